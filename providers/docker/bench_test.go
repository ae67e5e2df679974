//go:build unix

package docker

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/workspace"
)

var benchTree = flag.String("benchtree", "", "directory BenchmarkSyncTree syncs (make one with providers/workspace/internal/gentree)")

// gzipOnly hides the sandbox's PlainTarUploader, so Sync sends gzip as it does over TCP.
type gzipOnly struct{ providers.Sandbox }

// BenchmarkSyncTree syncs one tree into a fresh container per iteration: gzip (what a
// TCP engine gets), a plain tar (a local engine), and `docker cp` of the same tree as
// the baseline. Only the copy is timed; cpu-s/op is this process's CPU (for docker cp,
// the CLI's), the engine's is not counted.
//
//	go run ./providers/workspace/internal/gentree -dir /tmp/tree -files 20000 -size 200MB
//	go test ./providers/docker -run '^$' -bench SyncTree -benchtime 3x -benchtree /tmp/tree
func BenchmarkSyncTree(b *testing.B) {
	if *benchTree == "" {
		b.Skip("-benchtree not set")
	}
	img := os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
	if img == "" {
		b.Skip("TALKOPS_TEST_DOCKER_IMAGE is not set; eval \"$(bash .ci/docker.sh start)\" sets it")
	}
	p := New(Options{Image: img})
	defer p.Close()
	ways := []struct {
		name string
		sync func(ctx context.Context, sb *Sandbox) (cpu time.Duration, err error)
	}{
		{"gzip", func(ctx context.Context, sb *Sandbox) (time.Duration, error) {
			return selfCPU(func() error {
				_, err := workspace.Sync(ctx, gzipOnly{sb}, *benchTree, "", workspace.Options{})
				return err
			})
		}},
		{"plain", func(ctx context.Context, sb *Sandbox) (time.Duration, error) {
			return selfCPU(func() error {
				_, err := workspace.Sync(ctx, sb, *benchTree, "", workspace.Options{})
				return err
			})
		}},
		{"docker-cp", func(ctx context.Context, sb *Sandbox) (time.Duration, error) {
			cmd := exec.CommandContext(ctx, "docker", "cp", *benchTree+"/.", sb.ID()+":"+sb.WorkDir())
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("docker cp: %v\n%s", err, out)
			}
			return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
		}},
	}
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			var cpu time.Duration
			for range b.N {
				b.StopTimer()
				sb, err := p.Create(b.Context(), providers.Spec{RunID: "bench-sync"})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c, err := w.sync(b.Context(), sb.(*Sandbox))
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				cpu += c
				if err := sb.Close(context.WithoutCancel(b.Context())); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// selfCPU runs f and returns the CPU time this process spent meanwhile.
func selfCPU(f func() error) (time.Duration, error) {
	before := processCPU()
	err := f()
	return processCPU() - before, err
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
