package vercel

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers/archive"
)

// BenchmarkRenameEntries measures what sending the workspace the way @vercel/sandbox does
// (x-cwd "/", full paths) costs the client: re-writing a 2,000-file archive with the
// working directory in front of every name.
//
//	go test -run '^$' -bench RenameEntries -benchmem ./providers/vercel/
func BenchmarkRenameEntries(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("resource variable output module provider data locals aws_instance ingress egress cidr_blocks tags = { } [ ]")
	var entries []archive.Entry
	var raw int
	for i := range 2000 {
		var body bytes.Buffer
		size := int(100 * math.Pow(160, rng.Float64())) // log-uniform 100 B–16 KiB, as in cloudbench
		for body.Len() < size {
			body.WriteString(words[rng.IntN(len(words))] + " ")
		}
		raw += body.Len()
		entries = append(entries, archive.Entry{Name: fmt.Sprintf("modules/m%02d/f%03d.tf", i/50, i%50), Body: body.Bytes(), Mode: 0o644})
	}
	tgz, err := archive.TarGz(entries...)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(raw))
	b.ReportAllocs()
	for b.Loop() {
		if err := renameEntries(io.Discard, bytes.NewReader(tgz), "home/runner/work/project"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tgz))/1024, "archive-KiB")
}
