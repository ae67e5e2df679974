package runner_test

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
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

// closingAgent records when Close ran, and whether the sandbox was still open then.
type closingAgent struct {
	sb        providers.Sandbox
	failRun   bool
	closed    int
	sandboxOK bool
}

func (a *closingAgent) Run(ctx context.Context, _ string) (runner.AgentOutcome, error) {
	if a.failRun {
		return runner.AgentOutcome{}, errors.New("the model API is down")
	}
	return runner.AgentOutcome{Final: "done"}, nil
}

func (a *closingAgent) Revise(context.Context, string) (runner.AgentOutcome, error) {
	return runner.AgentOutcome{}, nil
}

func (a *closingAgent) Close(ctx context.Context) {
	a.closed++
	_, err := a.sb.Exec(ctx, providers.Cmd{Argv: []string{"true"}})
	a.sandboxOK = err == nil
}

// An agent that keeps processes beside the sandbox (MCP servers) is closed once, before
// the sandbox is torn down, whether the agent stage succeeded or failed.
func TestAgentClosedBeforeTeardown(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		opts := baseOptions(t)
		opts.Prompt = "go"
		a := &closingAgent{failRun: fail}
		opts.NewAgent = func(_ context.Context, sb providers.Sandbox) (runner.Agent, error) {
			a.sb = sb
			return a, nil
		}
		res := runner.Run(t.Context(), opts)
		if a.closed != 1 || !a.sandboxOK {
			t.Errorf("agent failing %v: closed %d times, sandbox usable then %v; want once, usable", fail, a.closed, a.sandboxOK)
		}
		if res.Teardown == nil || res.Teardown.Status != "deleted" {
			t.Errorf("agent failing %v: teardown %+v", fail, res.Teardown)
		}
	}
}
