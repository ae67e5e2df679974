//go:build unix

package docker

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/talkops/talkops/providers"
)

// benchImage is the image the step benchmarks run, skipping when the test engine is not set up.
func benchImage(b *testing.B) string {
	img := os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
	if img == "" {
		b.Skip("TALKOPS_TEST_DOCKER_IMAGE is not set; eval \"$(bash .ci/docker.sh start)\" sets it")
	}
	return img
}

// BenchmarkCreateClose is a sandbox's fixed cost outside the commands it runs: Create
// (volume, container start, probe) and Close (container and volume removal), one
// container per iteration, with and without one shared cache.
//
//	go test ./providers/docker -run '^$' -bench 'CreateClose|ExecTrue' -benchtime 10x
func BenchmarkCreateClose(b *testing.B) {
	p := New(Options{Image: benchImage(b)})
	defer p.Close()
	for _, withCache := range []bool{false, true} {
		name := "no-caches"
		var caches []providers.Cache
		if withCache {
			name = "one-cache"
			caches = []providers.Cache{{Name: "bench", HostDir: b.TempDir(), Path: "/cache/bench"}}
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				sb, err := p.Create(b.Context(), providers.Spec{RunID: "bench-steps", Caches: caches})
				if err != nil {
					b.Fatal(err)
				}
				if err := sb.Close(context.WithoutCancel(b.Context())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExecTrue is one command's round trip with nothing to run: the provider's
// Exec (exec create, start over a hijacked connection, inspect for the exit code)
// against the docker CLI's `docker exec` of the same command in the same container.
func BenchmarkExecTrue(b *testing.B) {
	p := New(Options{Image: benchImage(b)})
	defer p.Close()
	sb, err := p.Create(b.Context(), providers.Spec{RunID: "bench-steps"})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.WithoutCancel(b.Context()))
	b.Run("provider", func(b *testing.B) {
		for range b.N {
			res, err := sb.Exec(b.Context(), providers.Cmd{Argv: []string{"true"}})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("Exec(true) = %+v, %v", res, err)
			}
		}
	})
	b.Run("docker-cli", func(b *testing.B) {
		if _, err := exec.LookPath("docker"); err != nil {
			b.Skip("no docker CLI")
		}
		for range b.N {
			if out, err := exec.CommandContext(b.Context(), "docker", "exec", sb.ID(), "true").CombinedOutput(); err != nil {
				b.Fatalf("docker exec: %v\n%s", err, out)
			}
		}
	})
}
