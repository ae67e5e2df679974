// Package provbench measures the local, bwrap and docker providers side by side: the
// cost of Create+Close and of one Exec of `true`. Run it with
//
//	eval "$(bash .ci/docker.sh start)"
//	go test -run '^$' -bench . -benchtime 20x ./providers/internal/provbench/
//
// A provider that cannot run here (no bwrap, no engine) is skipped with the reason.
package provbench

import (
	"context"
	"os"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/docker"
	"github.com/talkops/talkops/providers/local"
)

type target struct {
	name string
	make func(b *testing.B) providers.Provider
}

func targets() []target {
	return []target{
		{"local", func(b *testing.B) providers.Provider { return local.New(local.Options{}) }},
		{"bwrap", func(b *testing.B) providers.Provider {
			return bwrap.New(bwrap.Options{StateDir: b.TempDir()})
		}},
		// Without limits there is no cgroup to move each command into: moving a process
		// between cgroups waits for an RCU grace period, which dominates under load.
		{"bwrap-nolimits", func(b *testing.B) providers.Provider {
			return bwrap.New(bwrap.Options{StateDir: b.TempDir(), Limits: bwrap.LimitsNone})
		}},
		{"docker", func(b *testing.B) providers.Provider {
			img := os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
			if os.Getenv("DOCKER_HOST") == "" || img == "" {
				b.Skip("no engine: eval \"$(bash .ci/docker.sh start)\" sets DOCKER_HOST and TALKOPS_TEST_DOCKER_IMAGE")
			}
			p := docker.New(docker.Options{Image: img, Pull: docker.PullNever})
			b.Cleanup(func() { p.Close() })
			return p
		}},
	}
}

func spec(b *testing.B) providers.Spec {
	return providers.Spec{RunID: "bench", ProjectDir: b.TempDir()}
}

func create(b *testing.B, p providers.Provider) providers.Sandbox {
	b.Helper()
	sb, err := p.Create(b.Context(), spec(b))
	if err != nil {
		b.Skipf("%s cannot create a sandbox here: %v", p.Name(), err)
	}
	return sb
}

// BenchmarkCreateClose is one sandbox's lifetime without commands: Create, then Close
// (which deletes it).
func BenchmarkCreateClose(b *testing.B) {
	for _, tg := range targets() {
		b.Run(tg.name, func(b *testing.B) {
			p := tg.make(b)
			create(b, p).Close(context.Background())
			for b.Loop() {
				sb, err := p.Create(b.Context(), spec(b))
				if err != nil {
					b.Fatal(err)
				}
				if err := sb.Close(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExecTrue is the fixed cost of one command: Exec of `true` in a running sandbox.
func BenchmarkExecTrue(b *testing.B) {
	for _, tg := range targets() {
		b.Run(tg.name, func(b *testing.B) {
			sb := create(b, tg.make(b))
			b.Cleanup(func() { sb.Close(context.Background()) })
			cmd := providers.Cmd{Argv: []string{"true"}}
			for b.Loop() {
				res, err := sb.Exec(b.Context(), cmd)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("Exec(true) = %+v, %v", res, err)
				}
			}
		})
	}
}
