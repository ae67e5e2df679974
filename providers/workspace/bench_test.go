//go:build unix

package workspace

import (
	stdgzip "compress/gzip"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

var benchTree = flag.String("benchtree", "", "directory BenchmarkPackCompressors packs (make one with internal/gentree)")

type discardCounter struct{ n int64 }

func (d *discardCounter) Write(b []byte) (int, error) { d.n += int64(len(b)); return len(b), nil }

// BenchmarkPackCompressors compares gzip implementations and levels on a real tree. It
// reports CPU time per pack (steadier than wall time on a shared machine) and the
// compressed size relative to the content.
//
//	go test -run=NONE -bench=PackCompressors -benchtime=3x ./providers/workspace/ -args -benchtree=/tmp/tree
func BenchmarkPackCompressors(b *testing.B) {
	if *benchTree == "" {
		b.Skip("-benchtree not set")
	}
	compressors := []struct {
		name string
		new  func(io.Writer) (compressor, error)
	}{
		{"stdlib-1", func(w io.Writer) (compressor, error) { return stdgzip.NewWriterLevel(w, stdgzip.BestSpeed) }},
		{"stdlib-6", func(w io.Writer) (compressor, error) { return stdgzip.NewWriterLevel(w, stdgzip.DefaultCompression) }},
		{"klauspost-1", func(w io.Writer) (compressor, error) { return gzip.NewWriterLevel(w, gzip.BestSpeed) }},
		{"klauspost-5", func(w io.Writer) (compressor, error) { return gzip.NewWriterLevel(w, gzip.DefaultCompression) }},
	}
	defer func(orig func(io.Writer) (compressor, error)) { newCompressor = orig }(newCompressor)
	for _, c := range compressors {
		b.Run(c.name, func(b *testing.B) {
			newCompressor = c.new
			var cpu time.Duration
			var stats Stats
			var out discardCounter
			for b.Loop() {
				before := cpuTime()
				s, err := Pack(b.Context(), *benchTree, Options{}, &out)
				cpu += cpuTime() - before
				if err != nil {
					b.Fatal(err)
				}
				stats = s
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(stats.BytesSent)/float64(stats.Bytes), "ratio")
			b.SetBytes(stats.Bytes)
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPackGitTracked measures what the tracked-file rule costs: the same tree (this
// repository) packed as a git work tree (git ls-files, then a binary search per entry)
// and with the rule off (every path gets every rule, as outside git).
//
//	go test -run=NONE -bench=PackGitTracked -benchmem -count=5 ./providers/workspace/
func BenchmarkPackGitTracked(b *testing.B) {
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		b.Skip("not run from a git checkout")
	}
	defer func(orig func(context.Context, string) ([]string, error)) { listTracked = orig }(listTracked)
	for _, mode := range []struct {
		name string
		list func(context.Context, string) ([]string, error)
	}{
		{"git", gitTracked},
		{"no-git", func(context.Context, string) ([]string, error) { return nil, nil }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			listTracked = mode.list
			var out discardCounter
			var stats Stats
			for b.Loop() {
				s, err := Pack(b.Context(), root, Options{}, &out)
				if err != nil {
					b.Fatal(err)
				}
				stats = s
			}
			b.ReportMetric(float64(stats.Files), "files")
		})
	}
}
