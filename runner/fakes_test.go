package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// The fakes in this file stand for every part the runner is handed (provider, sandbox,
// syncer, agent, rubric, workspace record, publisher, ledger). They all write to one call
// log, so a test can assert the exact order in which the runner used them, and each call
// can be given a behaviour (fail, panic, wait for the run to be stopped, send a signal).

// behaviour is what a faked call does before it returns normally.
type behaviour func(ctx context.Context) error

// failing makes a call return an error.
func failing(msg string) behaviour {
	return func(context.Context) error { return errors.New(msg) }
}

// panicking makes a call panic.
func panicking(msg string) behaviour {
	return func(context.Context) error { panic(msg) }
}

// waitingForStop makes a call hang until its context ends, like a stuck API; it returns
// the context's error, as a well-behaved provider or model client would.
func waitingForStop(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// world is one recorded run: the call log, the behaviours, and what the fakes saw.
type world struct {
	mu    sync.Mutex
	calls []string
	on    map[string]behaviour

	// execExit is the exit code of the setup script's command.
	execExit int
	// ledger holds the sandbox ids recorded and not yet forgotten; live, the ids of
	// sandboxes created and not yet deleted.
	ledger map[string]bool
	live   map[string]bool
	// pending is set while the ledger holds a pending create.
	pending bool
	// teardownCtx describes the context sandbox.Close was called with.
	teardownCtx closeContext

	// cancel stops the run the way cmd/talkops does on a signal (set by signalled).
	cancel context.CancelCauseFunc
	// force is closed by a second signal (Options.Force).
	force chan struct{}
}

// closeContext is what sandbox.Close saw of its context: on entry, and when it returned.
type closeContext struct {
	called      bool
	errOnEntry  error
	hasDeadline bool
	budget      time.Duration // time left before the deadline, on entry
	errOnReturn error
}

// call records name and runs its behaviour, if any.
func (w *world) call(ctx context.Context, name string) error {
	w.mu.Lock()
	w.calls = append(w.calls, name)
	b := w.on[name]
	w.mu.Unlock()
	if b == nil {
		return nil
	}
	return b(ctx)
}

// when gives the call name a behaviour.
func (w *world) when(name string, b behaviour) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on[name] = b
}

func (w *world) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

// ledgerLeft is the sandbox ids the ledger still holds, sorted.
func (w *world) ledgerLeft() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.ledger))
}

// alive is the ids of the sandboxes created and not deleted, sorted.
func (w *world) alive() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.live))
}

// signalled is a behaviour that delivers sig the way cmd/talkops does (as the cancel cause
// of the run's context) and then waits for the run to notice.
func (w *world) signalled(sig os.Signal) behaviour {
	return func(ctx context.Context) error {
		w.cancel(&runner.Interrupted{Signal: sig})
		<-ctx.Done()
		return ctx.Err()
	}
}

// parts says which optional parts a recorded run has.
type parts struct {
	sync, setup, agent, rubric, workspace, publisher, ledger bool
	attach                                                   bool
	// iterations are the rubric's answers, one per evaluation (the last one repeats).
	iterations []result.Iteration
	// agentRun is the agent's outcome of Run; revisions, of each Revise (the last one
	// repeats; none: a finished revision).
	agentRun  runner.AgentOutcome
	revisions []runner.AgentOutcome
}

// everything is a run with every part, whose rubric is satisfied at once.
func everything() parts {
	return parts{sync: true, setup: true, agent: true, rubric: true, publisher: true, ledger: true}
}

// recorded builds the options of a run whose parts are the fakes of w. The run's context
// (returned) is cancelled with a signal's cause by signalled behaviours.
func recorded(t *testing.T, p parts) (*world, runner.Options, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(t.Context())
	t.Cleanup(func() { cancel(nil) })
	w := &world{on: map[string]behaviour{}, ledger: map[string]bool{}, live: map[string]bool{}, cancel: cancel, force: make(chan struct{})}
	opts := runner.Options{
		RunID:        "recorded-run",
		ProjectDir:   t.TempDir(),
		ReportDir:    t.TempDir(),
		ProviderName: "recorded",
		Provider:     &fakeProvider{w: w},
		Prompt:       "fix the build",
		Force:        w.force,
		// Teardown and publishing after a signal must not wait for anything a test did
		// not ask them to wait for; the fakes answer at once.
		InterruptTeardownTimeout: 5 * time.Second,
	}
	if p.attach {
		opts.AttachID = "existing"
	}
	if p.sync {
		opts.Sync = func(ctx context.Context, _ providers.Sandbox, _ events.Sink) (*result.Sync, error) {
			if err := w.call(ctx, "sync"); err != nil {
				return nil, err
			}
			return &result.Sync{Files: 1}, nil
		}
	}
	if p.setup {
		opts.SetupScript = &runner.SetupScript{Path: "setup.sh", Content: []byte("make deps\n"), Mode: 0o755}
	}
	if p.agent {
		opts.NewAgent = func(ctx context.Context, sb providers.Sandbox) (runner.Agent, error) {
			if err := w.call(ctx, "agent.New"); err != nil {
				return nil, err
			}
			return &fakeAgent{w: w, run: p.agentRun, revisions: p.revisions}, nil
		}
	}
	if p.rubric {
		its := p.iterations
		if len(its) == 0 {
			its = []result.Iteration{satisfied}
		}
		opts.Rubric = &fakeRubric{w: w, iterations: its}
		opts.MaxIterations = len(its)
	}
	if p.workspace {
		opts.Workspace = &fakeWorkspace{w: w}
		opts.CleanRoom = runner.CleanRoomProvisioned
	}
	if p.publisher {
		opts.Publishers = []runner.Publisher{&fakePublisher{w: w}}
	}
	if p.ledger {
		opts.Ledger = &fakeLedger{w: w}
	}
	return w, opts, ctx
}

// Rubric answers.
var (
	satisfied = result.Iteration{Status: "satisfied", Score: 1,
		Items: []result.Item{{ID: "build", Kind: "check", Status: result.StatusPass, Required: true}}}
	needsRevision = result.Iteration{Status: "needs_revision", Score: 0,
		Items: []result.Item{{ID: "build", Kind: "check", Status: result.StatusFail, Required: true}}}
	rubricFailed = result.Iteration{Status: "failed", Score: 0,
		Items: []result.Item{{ID: "build", Kind: "check", Status: result.StatusFail, Required: true}}}
	rubricError = result.Iteration{Status: "error",
		Items: []result.Item{{ID: "build", Kind: "check", Status: result.StatusError, Required: true}}}
)

type fakeProvider struct {
	w       *world
	mu      sync.Mutex
	created int
}

func (p *fakeProvider) Name() string { return "recorded" }

func (p *fakeProvider) Create(ctx context.Context, _ providers.Spec) (providers.Sandbox, error) {
	if err := p.w.call(ctx, "provider.Create"); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.created++
	id := fmt.Sprintf("sb-%d", p.created)
	p.w.mu.Lock()
	p.w.live[id] = true
	p.w.mu.Unlock()
	return &fakeSandbox{w: p.w, id: id}, nil
}

func (p *fakeProvider) Attach(ctx context.Context, id string, _ providers.AttachOptions) (providers.Sandbox, error) {
	if err := p.w.call(ctx, "provider.Attach"); err != nil {
		return nil, err
	}
	return &fakeSandbox{w: p.w, id: id, attached: true}, nil
}

type fakeSandbox struct {
	w        *world
	id       string
	attached bool // Close releases it but never deletes it
}

func (s *fakeSandbox) ID() string      { return s.id }
func (s *fakeSandbox) WorkDir() string { return "/srv/project" }

// Exec is named after the program: "sandbox.Exec sh" runs the setup script, "sandbox.Exec
// rm" removes it.
func (s *fakeSandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	name := "sandbox.Exec " + path.Base(cmd.Argv[0])
	if err := s.w.call(ctx, name); err != nil {
		return providers.ExecResult{}, err
	}
	if name == "sandbox.Exec sh" {
		return providers.ExecResult{ExitCode: s.w.execExit, Stdout: []byte("deps installed\n")}, nil
	}
	return providers.ExecResult{}, nil
}

func (s *fakeSandbox) Upload(ctx context.Context, _ string, tgz io.Reader) error {
	if err := s.w.call(ctx, "sandbox.Upload"); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, tgz)
	return err
}

func (s *fakeSandbox) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := s.w.call(ctx, "sandbox.Download"); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: %w", p, os.ErrNotExist)
}

func (s *fakeSandbox) Close(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	seen := closeContext{called: true, errOnEntry: ctx.Err(), hasDeadline: ok, budget: time.Until(deadline)}
	err := s.w.call(ctx, "sandbox.Close")
	seen.errOnReturn = ctx.Err()
	s.w.mu.Lock()
	s.w.teardownCtx = seen
	if err == nil && !s.attached {
		delete(s.w.live, s.id)
	}
	s.w.mu.Unlock()
	return err
}

type fakeAgent struct {
	w         *world
	run       runner.AgentOutcome
	revisions []runner.AgentOutcome
	revised   int
}

func (a *fakeAgent) Run(ctx context.Context, _ string) (runner.AgentOutcome, error) {
	out := a.run
	out.Final = "done"
	return out, a.w.call(ctx, "agent.Run")
}

func (a *fakeAgent) Revise(ctx context.Context, _ string) (runner.AgentOutcome, error) {
	out := runner.AgentOutcome{Final: "revised"}
	if len(a.revisions) > 0 {
		out = a.revisions[min(a.revised, len(a.revisions)-1)]
	}
	a.revised++
	return out, a.w.call(ctx, "agent.Revise")
}

func (a *fakeAgent) Close(ctx context.Context) { _ = a.w.call(ctx, "agent.Close") }

type fakeRubric struct {
	w          *world
	iterations []result.Iteration
}

func (r *fakeRubric) Describe() result.Rubric {
	_ = r.w.call(context.Background(), "rubric.Describe")
	return result.Rubric{Name: "recorded"}
}

func (r *fakeRubric) Evaluate(ctx context.Context, _ providers.Sandbox, in runner.EvalInput) (runner.Evaluation, error) {
	if err := r.w.call(ctx, "rubric.Evaluate"); err != nil {
		return runner.Evaluation{}, err
	}
	it := r.iterations[min(in.Iteration, len(r.iterations))-1]
	it.N = in.Iteration
	return runner.Evaluation{Iteration: it, Revision: "the build still fails"}, nil
}

type fakeWorkspace struct{ w *world }

func (f *fakeWorkspace) Baseline(ctx context.Context, _ providers.Sandbox) (*result.WorkspaceRecord, error) {
	return &result.WorkspaceRecord{Entries: 1}, f.w.call(ctx, "workspace.Baseline")
}

func (f *fakeWorkspace) Changes(ctx context.Context, _ providers.Sandbox, n int) (*result.ChangeSet, error) {
	return &result.ChangeSet{Pass: n, Paths: []result.PathChange{}}, f.w.call(ctx, "workspace.Changes")
}

func (f *fakeWorkspace) Materialize(string) error {
	return f.w.call(context.Background(), "workspace.Materialize")
}

func (f *fakeWorkspace) Apply(ctx context.Context, _ providers.Sandbox, _ *result.CleanRoom) error {
	return f.w.call(ctx, "workspace.Apply")
}

func (f *fakeWorkspace) Close() error { return f.w.call(context.Background(), "workspace.Close") }

type fakePublisher struct{ w *world }

func (p *fakePublisher) Name() string { return "recorded" }

func (p *fakePublisher) Begin(ctx context.Context, _ *result.Result) error {
	return p.w.call(ctx, "publisher.Begin")
}

func (p *fakePublisher) Finish(ctx context.Context, _ *result.Result) error {
	return p.w.call(ctx, "publisher.Finish")
}

type fakeLedger struct{ w *world }

func (l *fakeLedger) Pending(providers.Spec) error {
	if err := l.w.call(context.Background(), "ledger.Pending"); err != nil {
		return err
	}
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	l.w.pending = true
	return nil
}

func (l *fakeLedger) DropPending(providers.Spec) error {
	if err := l.w.call(context.Background(), "ledger.DropPending"); err != nil {
		return err
	}
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	l.w.pending = false
	return nil
}

func (l *fakeLedger) Record(sb providers.Sandbox, _ providers.Spec) error {
	if err := l.w.call(context.Background(), "ledger.Record"); err != nil {
		return err
	}
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	l.w.ledger[sb.ID()] = true
	l.w.pending = false // Record replaces the create's pending entry
	return nil
}

func (l *fakeLedger) Forget(sb providers.Sandbox) error {
	if err := l.w.call(context.Background(), "ledger.Forget"); err != nil {
		return err
	}
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	delete(l.w.ledger, sb.ID())
	l.w.pending = false // the sandbox a failed Record left is gone
	return nil
}

// checkRecord fails the test unless result.json exists, is valid, and says what the
// returned result says.
func checkRecord(t *testing.T, opts runner.Options, res *result.Result) {
	t.Helper()
	onDisk, err := result.Read(filepath.Join(opts.ReportDir, "result.json"))
	if err != nil {
		t.Fatalf("result.json: %v", err)
	}
	want, got := marshal(t, res), marshal(t, onDisk)
	if want != got {
		t.Errorf("result.json differs from the returned result:\nreturned %s\non disk  %s", want, got)
	}
}

// stageList is "name:status" for each recorded stage, in order.
func stageList(res *result.Result) string {
	var s []string
	for _, st := range res.Stages {
		s = append(s, fmt.Sprintf("%s:%s", st.Name, st.Status))
	}
	return strings.Join(s, " ")
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
