package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

func baseOptions(t *testing.T) runner.Options {
	t.Helper()
	return runner.Options{
		RunID:        "runner-test",
		ProjectDir:   t.TempDir(),
		ReportDir:    t.TempDir(),
		ProviderName: fake.Name,
		Provider:     fake.New(fake.Options{Dir: t.TempDir()}),
	}
}

// A run whose final result.json cannot be written must not exit 0: the steps that read it
// would find nothing.
func TestUnwritableResultIsAnError(t *testing.T) {
	t.Parallel()
	opts := baseOptions(t)
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opts.ReportDir = filepath.Join(file, "report")
	res := runner.Run(t.Context(), opts)
	if res.ExitCode != runner.ExitError || res.Verdict != result.VerdictError {
		t.Fatalf("exit %d verdict %s, want %d error (reason %q)", res.ExitCode, res.Verdict, runner.ExitError, res.Reason)
	}
}

// blockingPublisher's Finish waits until its context ends, like a hung GitHub API.
type blockingPublisher struct {
	finishing chan struct{}
	waited    time.Duration
}

func (p *blockingPublisher) Name() string                                { return "blocking" }
func (p *blockingPublisher) Begin(context.Context, *result.Result) error { return nil }
func (p *blockingPublisher) Finish(ctx context.Context, _ *result.Result) error {
	start := time.Now()
	close(p.finishing)
	<-ctx.Done()
	p.waited = time.Since(start)
	return ctx.Err()
}

// A signal while publishing is recorded and shortens the wait to fit GitHub's cancel
// window, instead of exiting 0 after the 2-minute publish budget.
func TestSignalDuringPublish(t *testing.T) {
	t.Parallel()
	opts := baseOptions(t)
	pub := &blockingPublisher{finishing: make(chan struct{})}
	opts.Publishers = []runner.Publisher{pub}
	opts.InterruptTeardownTimeout = 2 * time.Second
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-pub.finishing
		cancel(&runner.Interrupted{Signal: syscall.SIGTERM})
	}()
	res := runner.Run(ctx, opts)
	if res.ExitCode != runner.ExitSIGTERM || res.Interrupted != "SIGTERM" {
		t.Fatalf("exit %d interrupted %q, want %d SIGTERM (reason %q)", res.ExitCode, res.Interrupted, runner.ExitSIGTERM, res.Reason)
	}
	if pub.waited > 10*time.Second {
		t.Errorf("publishing went on for %s after the signal", pub.waited)
	}
	if _, err := result.Read(filepath.Join(opts.ReportDir, "result.json")); err != nil {
		t.Errorf("result.json after a signal while publishing: %v", err)
	}
}
