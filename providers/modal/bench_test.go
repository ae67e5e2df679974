package modal_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/modal"
	"github.com/talkops/talkops/providers/modal/modalfake"
	"github.com/talkops/talkops/providers/workspace"
)

// BenchmarkRun measures the RPCs of one run against the fake, the workload of
// providers/httpapi/cloudbench: create (the fake answers "no task yet" twice), sync of the
// same 2,000-file project through workspace.Sync, 10 execs of `wc -c FILE` (each checked),
// terminate. RPCs are counted by the client (every attempt; a server stream is one).
//
//	go test -run '^$' -bench . -benchtime 3x ./providers/modal/
func BenchmarkRun(b *testing.B) {
	root, sizes := benchProject(b)
	var total, sync int
	var syncTime time.Duration
	for range b.N {
		srv := modalfake.New(tokenID, tokenSecret)
		srv.TaskAfter = 2
		stats := &modal.Stats{}
		p, err := modal.New(modal.Options{ServerURL: srv.URL, TLSConfig: srv.TLSConfig(), WorkingDir: b.TempDir(), PollInterval: 5 * time.Millisecond, Stats: stats},
			env("MODAL_TOKEN_ID", tokenID, "MODAL_TOKEN_SECRET", tokenSecret, "MODAL_CONFIG_PATH", "/nonexistent"))
		if err != nil {
			b.Fatal(err)
		}
		ctx := b.Context()
		sb, err := p.Create(ctx, spec("bench"))
		if err != nil {
			b.Fatal(err)
		}
		before := stats.Total()
		start := time.Now()
		if _, err := workspace.Sync(ctx, sb, root, "", workspace.Options{}); err != nil {
			b.Fatal(err)
		}
		syncTime += time.Since(start)
		sync += stats.Total() - before
		for i := range 10 {
			rel := benchFile(i * 200)
			res, err := sb.Exec(ctx, providers.Cmd{Argv: []string{"wc", "-c", rel}})
			if want := fmt.Sprintf("%d %s\n", sizes[i*200], rel); err != nil || string(res.Stdout) != want {
				b.Fatalf("wc -c %s = %q, %v; want %q", rel, res.Stdout, err, want)
			}
		}
		if err := sb.Close(ctx); err != nil {
			b.Fatal(err)
		}
		total += stats.Total()
		if testing.Verbose() && total == stats.Total() {
			b.Logf("RPCs of one run: %v", stats.Calls())
		}
		_ = p.Close()
		srv.Close()
	}
	n := float64(b.N)
	b.ReportMetric(float64(total)/n, "rpc/run")
	b.ReportMetric(float64(sync)/n, "sync-rpc/run")
	b.ReportMetric(float64(syncTime.Milliseconds())/n, "sync-ms/run")
}

func benchFile(i int) string { return fmt.Sprintf("modules/m%02d/f%03d.tf", i/50, i%50) }

// benchProject writes cloudbench's deterministic project: 2,000 files in 40 directories,
// sizes log-uniform between 100 B and 16 KiB, the same generator and seed.
func benchProject(b *testing.B) (string, []int) {
	b.Helper()
	root := b.TempDir()
	rng := rand.New(rand.NewChaCha8([32]byte{'t', 'a', 'l', 'k', 'o', 'p', 's'}))
	words := strings.Fields(`resource variable output module provider data locals terraform aws_instance
		aws_security_group ingress egress cidr_blocks from_port to_port protocol tags Name count
		for_each depends_on lifecycle ami instance_type subnet_id vpc_id = { } [ ] "0.0.0.0/0" 22 443 tcp`)
	var sizes []int
	for i := range 2000 {
		rel := benchFile(i)
		size := int(100 * math.Pow(160, rng.Float64()))
		var buf bytes.Buffer
		for buf.Len() < size {
			buf.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(8) == 0 {
				buf.WriteByte('\n')
			} else {
				buf.WriteByte(' ')
			}
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), buf.Bytes()[:size], 0o644); err != nil {
			b.Fatal(err)
		}
		sizes = append(sizes, size)
	}
	return root, sizes
}
