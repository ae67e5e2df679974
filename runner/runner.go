// Package runner is the talkops pipeline: provision (or attach) → sync → setup → agent ⇄
// rubric → result → teardown → publish, with teardown guaranteed on every path.
//
// The runner owns the interfaces it consumes (Agent, Rubric, Publisher) and the exit-code
// table. It never decides how a sandbox, a model or a reporter works: cmd/talkops builds
// those from the configuration and hands them in.
package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// Default teardown budgets. Interrupted runs must finish inside GitHub's cancel window
// (SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that).
const (
	DefaultTeardownTimeout          = 2 * time.Minute
	DefaultInterruptTeardownTimeout = 7 * time.Second
)

// Agent runs the prompt inside the sandbox it was built for.
type Agent interface {
	// Run executes the prompt. A model or sandbox that stops working is an error; an agent
	// that ran out of budget is an outcome with Partial set.
	Run(ctx context.Context, prompt string) (AgentOutcome, error)
	// Revise continues the same conversation with the rubric's revision message.
	Revise(ctx context.Context, message string) (AgentOutcome, error)
}

// AgentCloser is implemented by agents that keep processes running beside the sandbox
// (MCP servers). The runner calls Close at teardown, before the sandbox is closed, on
// every path out of the stages.
type AgentCloser interface {
	Close(ctx context.Context)
}

// AgentOutcome is what the runner keeps of an agent run. Record and Findings are
// cumulative over Run and every Revise.
type AgentOutcome struct {
	Final      string
	Partial    bool
	StopReason string
	// Unfinished, when set, says why the agent ended without doing the task although no
	// budget ran out (it refused, or gave no answer). Without a rubric that is a fail.
	Unfinished string
	Record     result.Agent
	Findings   []result.Finding
}

// Rubric scores the outcome. Describe is called once before evaluation; Evaluate once per
// iteration.
type Rubric interface {
	Describe() result.Rubric
	Evaluate(ctx context.Context, sb providers.Sandbox, in EvalInput) (Evaluation, error)
}

// EvalInput is what one rubric iteration may look at.
type EvalInput struct {
	Iteration int
	Prompt    string
	// Sync is what the workspace sync sent and left out; nil when nothing was synced.
	Sync *result.Sync
	Sink events.Sink
}

// Evaluation is one rubric iteration's outcome.
type Evaluation struct {
	Iteration result.Iteration
	Findings  []result.Finding
	// Revision is the message for the agent when Iteration.Status is needs_revision.
	Revision string
}

// Publisher posts the result where people look. Begin runs when the run starts (the
// GitHub check run appears as in progress); Finish runs once result.json is final. Both
// are safe to call on a result that is still partial. Their errors never change the
// verdict: the runner logs them and records them in result.json.
type Publisher interface {
	// Name identifies the publisher in logs and result.json errors.
	Name() string
	Begin(ctx context.Context, r *result.Result) error
	Finish(ctx context.Context, r *result.Result) error
}

// Syncer copies the project into the sandbox.
type Syncer func(ctx context.Context, sb providers.Sandbox, sink events.Sink) (*result.Sync, error)

// Ledger records created sandboxes before first use, so a reaper can find them after a
// SIGKILL, and forgets them once deleted. Pending is written before each create and
// replaced by Record, so a run killed while its create is in flight is known to be dead.
type Ledger interface {
	Pending(spec providers.Spec) error
	DropPending(spec providers.Spec) error
	Record(sb providers.Sandbox, spec providers.Spec) error
	Forget(sb providers.Sandbox) error
}

// Options is everything one run needs.
type Options struct {
	RunID        string
	Version      string
	Commit       string
	ProjectDir   string
	ReportDir    string
	ProviderName string
	Provider     providers.Provider
	AttachID     string // non-empty: attach, never delete
	Spec         providers.Spec
	Sync         Syncer // nil: no sync
	SetupScript  *SetupScript
	Prompt       string
	NewAgent     func(ctx context.Context, sb providers.Sandbox) (Agent, error) // nil: no agent (checks-only run)
	Rubric       Rubric                                                         // nil: no rubric
	// Workspace records the workspace on the host after setup and after each agent pass
	// (nil: not recorded, and verification falls back to in-place).
	Workspace Workspace
	// Verify is result.VerifyClean or result.VerifyInPlace ("": clean). A run without an
	// agent always verifies in place: nobody had a shell in the sandbox.
	Verify string
	// CleanRoom is how this provider makes a clean room (CleanRoomProvisioned or
	// CleanRoomMaterialized); "" when it cannot, with the reason in NoCleanRoom.
	CleanRoom   string
	NoCleanRoom string
	// MaxIterations bounds the revision loop (1 = no revision).
	MaxIterations int
	Publishers    []Publisher
	Ledger        Ledger
	// Timeout bounds everything before teardown; 0 means no limit. When it runs out the
	// result is partial and the exit code 124.
	Timeout                  time.Duration
	TeardownTimeout          time.Duration
	InterruptTeardownTimeout time.Duration
	// Force is closed when the user insists (a second signal): teardown stops waiting
	// for a graceful delete.
	Force    <-chan struct{}
	Sink     events.Sink
	Config   []result.ConfigValue
	CI       *result.CI
	Advisory bool // map exit 3 and 124 to 0
	// Redact masks secrets in output the runner records or emits itself (the setup
	// script's); nil records it as is.
	Redact func(string) string
	// AfterResult is called each time result.json is written (tests use it).
	AfterResult func(path string)
}

// Run executes the pipeline and returns the result; it never panics and always tears down
// what it created. The returned error is only for the caller's log: the result already
// carries the exit code.
func Run(ctx context.Context, opts Options) *result.Result {
	if opts.Sink == nil {
		opts.Sink = events.Discard
	}
	if opts.TeardownTimeout == 0 {
		opts.TeardownTimeout = DefaultTeardownTimeout
	}
	if opts.InterruptTeardownTimeout == 0 {
		opts.InterruptTeardownTimeout = DefaultInterruptTeardownTimeout
	}
	if opts.MaxIterations < 1 {
		opts.MaxIterations = 1
	}
	r := &run{opts: opts, log: zerolog.Ctx(ctx)}
	r.res = &result.Result{
		Schema:  result.Schema,
		Verdict: result.VerdictError,
		Reason:  "run in progress",
		Run: result.Run{
			ID:         opts.RunID,
			Version:    opts.Version,
			Commit:     opts.Commit,
			StartedAt:  time.Now().UTC(),
			ProjectDir: opts.ProjectDir,
			ReportDir:  opts.ReportDir,
			Prompt:     opts.Prompt,
			CI:         opts.CI,
		},
		ExitCode: ExitError,
		Advisory: opts.Advisory,
		Config:   opts.Config,
		Stages:   []result.Stage{},
	}
	r.execute(ctx)
	return r.res
}

type run struct {
	opts Options
	log  *zerolog.Logger
	res  *result.Result

	mu       sync.Mutex // guards res during teardown from a deferred path
	sb       providers.Sandbox
	created  bool
	tornDown bool
	agent    AgentCloser // closed at teardown, before the sandbox
	room     *cleanRoom  // the open clean room, deleted after its evaluation or at teardown

	agentFindings []result.Finding // the agent's findings (cumulative over its passes)
	unfinished    string
	iterFindings  []result.Finding // the last rubric iteration's findings

	partialReason string
	infraErr      error
	interrupt     *Interrupted
}

func (r *run) emit(e events.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	r.opts.Sink.Emit(e)
}

func (r *run) execute(parent context.Context) {
	r.emit(events.Event{Type: events.RunStarted, Message: r.opts.RunID, Data: map[string]string{
		"run_id": r.opts.RunID, "provider": r.opts.ProviderName, "report_dir": r.opts.ReportDir,
	}})
	_ = r.writeResult() // a failure is logged; the final write decides
	r.begin(parent)

	ctx := parent
	var cancel context.CancelFunc = func() {}
	if r.opts.Timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(parent, r.opts.Timeout, errTimeout)
	}
	defer cancel()

	func() {
		// Teardown is registered by provision the moment a sandbox exists; this deferred
		// call is the guarantee for every path out of the stages, including a panic.
		defer r.teardown(parent)
		defer func() {
			if p := recover(); p != nil {
				r.fail("panic", fmt.Errorf("internal error: %v\n%s", p, debug.Stack()))
				r.failRunning(fmt.Sprintf("internal error: %v", p))
			}
		}()
		r.stages(ctx)
	}()

	r.finish(parent)
	_ = r.writeResult() // a failure is logged; the final write decides
	r.publish(parent)
	r.noteLateInterrupt(parent)
	if err := r.writeResult(); err != nil {
		r.resultUnwritten(err)
	}
	r.emit(events.Event{Type: events.RunFinished, Message: r.res.Verdict, Data: map[string]any{
		"verdict": r.res.Verdict, "exit_code": r.res.ExitCode, "score": r.res.Score,
	}})
}

var errTimeout = errors.New("run timeout reached")

// stages runs everything between provisioning and the verdict. It returns early on the
// first infrastructure failure or interruption.
func (r *run) stages(ctx context.Context) {
	if !r.stage(ctx, result.StageProvision, r.provision) {
		return
	}
	if r.opts.Sync != nil {
		if !r.stage(ctx, result.StageSync, r.sync) {
			return
		}
	} else {
		r.skip(result.StageSync)
	}
	if r.opts.SetupScript != nil {
		if !r.stage(ctx, result.StageSetup, r.setup) {
			return
		}
	} else {
		r.skip(result.StageSetup)
	}
	var agent Agent
	var outcome *AgentOutcome
	r.planVerification()
	recording := r.opts.NewAgent != nil && r.opts.Workspace != nil
	// The last moment the sandbox is trusted: after setup, before the agent's first call.
	if recording && !r.stage(ctx, result.StageBaseline, r.baseline) {
		return
	}
	pass := 0
	recordPass := func() bool {
		pass++
		return !recording || r.stage(ctx, result.StageChanges, func(ctx context.Context) error { return r.changes(ctx, pass) })
	}
	if r.opts.NewAgent != nil {
		ok := r.stage(ctx, result.StageAgent, func(ctx context.Context) error {
			a, err := r.opts.NewAgent(ctx, r.sb)
			if err != nil {
				return err
			}
			agent = a
			if c, ok := a.(AgentCloser); ok {
				r.mu.Lock()
				r.agent = c
				r.mu.Unlock()
			}
			out, err := a.Run(ctx, r.opts.Prompt)
			r.recordAgent(out)
			outcome = &out
			return err
		})
		if !ok || !recordPass() {
			return
		}
	} else {
		r.skip(result.StageAgent)
	}
	if r.opts.Rubric == nil {
		r.skip(result.StageRubric)
		return
	}
	desc := r.opts.Rubric.Describe()
	r.res.Rubric = &desc
	r.res.Rubric.Iterations = []result.Iteration{}
	for n := 1; ; n++ {
		var ev Evaluation
		eval := func(ctx context.Context, sb providers.Sandbox) error {
			var err error
			ev, err = r.opts.Rubric.Evaluate(ctx, sb, EvalInput{
				Iteration: n, Prompt: r.opts.Prompt, Sync: r.res.Sync, Sink: r.opts.Sink,
			})
			if err != nil {
				return err
			}
			r.recordIteration(ev)
			return nil
		}
		var ok bool
		if r.clean() {
			ok = r.evaluateClean(ctx, eval)
		} else {
			ok = r.stage(ctx, result.StageRubric, func(ctx context.Context) error { return eval(ctx, r.sb) })
		}
		if !ok {
			return
		}
		if ev.Iteration.Status != result.RubricNeedsRevision || agent == nil || n >= r.opts.MaxIterations ||
			(outcome != nil && outcome.Partial) {
			return
		}
		ok = r.stage(ctx, result.StageAgent, func(ctx context.Context) error {
			out, err := agent.Revise(ctx, ev.Revision)
			r.recordAgent(out)
			outcome = &out
			return err
		})
		if !ok || !recordPass() {
			return
		}
	}
}

// stage runs fn as a named, timed stage and records its outcome. It returns false when the
// pipeline must stop.
func (r *run) stage(ctx context.Context, name result.StageName, fn func(context.Context) error) bool {
	if err := r.stopped(ctx); err != nil {
		r.record(name, time.Now(), result.StageSkipped)
		return false
	}
	start := time.Now()
	idx := r.record(name, start, result.StageRunning)
	r.emit(events.Event{Type: events.StageStarted, Stage: name})
	_ = r.writeResult() // a failure is logged; the final write decides
	err := fn(ctx)
	status := result.StageOK
	// A stage may swallow a cancellation (checks record it per item), so the context
	// decides first: an interrupt or the run timeout is not the stage's failure.
	switch stop := r.stopped(ctx); {
	case stop != nil:
		status = result.StageInterrupted
		if errors.Is(stop, errTimeout) {
			status = result.StageTimeout
		}
		if err == nil {
			err = stop
		}
	case err != nil:
		status = result.StageFailed
		r.fail(name, err)
	case r.partialReason != "":
		status = result.StagePartial
	}
	r.mu.Lock()
	st := &r.res.Stages[idx]
	st.Status = status
	st.DurationMS = time.Since(start).Milliseconds()
	if err != nil {
		st.Error = err.Error()
	}
	r.mu.Unlock()
	r.emit(events.Event{Type: events.StageFinished, Stage: name, Message: string(status), Data: map[string]any{
		"status": status, "duration_ms": st.DurationMS, "error": st.Error,
	}})
	return err == nil
}

// stopped reports why the pipeline must not go on: an interrupt or the run timeout.
func (r *run) stopped(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	if in, ok := interruptedBy(cause); ok {
		r.interrupt = in
		return cause
	}
	if errors.Is(cause, errTimeout) {
		if r.partialReason == "" {
			r.partialReason = "timeout"
		}
		return cause
	}
	return cause
}

func (r *run) record(name result.StageName, start time.Time, status result.StageStatus) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Stages = append(r.res.Stages, result.Stage{Name: name, Status: status, StartedAt: start.UTC()})
	return len(r.res.Stages) - 1
}

// failRunning marks the stage a panic cut short as failed, so result.json never shows a
// finished run with a stage still running.
func (r *run) failRunning(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.res.Stages {
		if st := &r.res.Stages[i]; st.Status == result.StageRunning {
			st.Status, st.Error = result.StageFailed, msg
			st.DurationMS = time.Since(st.StartedAt).Milliseconds()
		}
	}
}

func (r *run) skip(name result.StageName) { r.record(name, time.Now(), result.StageSkipped) }

// fail records an infrastructure error; the first one decides the reason.
func (r *run) fail(stage result.StageName, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.infraErr == nil {
		r.infraErr = &StageError{Stage: stage, Err: err}
	}
	r.res.Errors = append(r.res.Errors, result.Error{Stage: stage, Message: err.Error()})
	r.log.Error().Str("stage", string(stage)).Err(err).Msg("stage failed")
}

func (r *run) provision(ctx context.Context) error {
	p := r.opts.Provider
	spec := r.opts.Spec
	r.res.Sandbox = &result.Sandbox{Provider: r.opts.ProviderName, Snapshot: spec.Snapshot}
	if r.opts.AttachID != "" {
		sb, err := p.Attach(ctx, r.opts.AttachID, providers.AttachOptions{WorkDir: spec.WorkDir})
		if err != nil {
			return fmt.Errorf("attach %s sandbox %q: %w", r.opts.ProviderName, r.opts.AttachID, err)
		}
		r.sb = sb
		r.res.Sandbox.ID, r.res.Sandbox.WorkDir, r.res.Sandbox.Attached = sb.ID(), sb.WorkDir(), true
		return nil
	}
	sb, err := r.create(ctx, spec)
	if err != nil {
		return fmt.Errorf("create %s sandbox: %w", r.opts.ProviderName, err)
	}
	r.mu.Lock()
	r.sb, r.created = sb, true
	r.mu.Unlock()
	r.res.Sandbox.ID, r.res.Sandbox.WorkDir = sb.ID(), sb.WorkDir()
	if r.opts.Ledger != nil {
		if err := r.opts.Ledger.Record(sb, spec); err != nil {
			// The sandbox exists but a reaper could not find it after a crash: do not use it.
			return fmt.Errorf("record sandbox %s in the state file: %w", sb.ID(), err)
		}
	}
	_ = r.writeResult() // a failure is logged; the final write decides
	return nil
}

// create asks the provider for a sandbox, with a pending ledger entry around the call: a
// run killed before Record leaves evidence that its sandboxes have no live owner. A
// create that returned an error made nothing, so its entry goes; one that panicked may
// have, so its entry stays for gc.
func (r *run) create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if r.opts.Ledger != nil {
		if err := r.opts.Ledger.Pending(spec); err != nil {
			// A crash during the create would strand the sandbox until its expiry.
			return nil, fmt.Errorf("record the pending create in the state file: %w", err)
		}
	}
	sb, err := r.opts.Provider.Create(ctx, spec)
	if err != nil && r.opts.Ledger != nil {
		if derr := r.opts.Ledger.DropPending(spec); derr != nil {
			r.log.Warn().Err(derr).Msg("the create failed but its pending state file entry remains")
		}
	}
	return sb, err
}

func (r *run) sync(ctx context.Context) error {
	stats, err := r.opts.Sync(ctx, r.sb, r.opts.Sink)
	if stats != nil {
		r.res.Sync = stats
	}
	if err != nil {
		return fmt.Errorf("sync workspace: %w", err)
	}
	return nil
}

func (r *run) recordAgent(out AgentOutcome) {
	rec := out.Record
	r.res.Agent = &rec
	r.agentFindings = out.Findings
	r.unfinished = out.Unfinished
	r.res.Findings = r.findings()
	if out.Partial && r.partialReason == "" {
		r.partialReason = out.StopReason
		if r.partialReason == "" {
			r.partialReason = "budget"
		}
	}
}

func (r *run) recordIteration(ev Evaluation) {
	rb := r.res.Rubric
	rb.Iterations = append(rb.Iterations, ev.Iteration)
	rb.Items = ev.Iteration.Items
	rb.Status = ev.Iteration.Status
	rb.Counts = result.CountItems(ev.Iteration.Items)
	r.iterFindings = ev.Findings
	r.res.Findings = r.findings()
	// A score only means something when an item passed or failed: with nothing
	// evaluated (every item an error, an interrupt) the score stays empty.
	r.res.Score = nil
	if rb.Counts.Pass+rb.Counts.Fail > 0 {
		score := ev.Iteration.Score
		r.res.Score = &score
	}
}

func (r *run) findings() []result.Finding {
	out := make([]result.Finding, 0, len(r.agentFindings)+len(r.iterFindings))
	out = append(out, r.agentFindings...)
	return append(out, r.iterFindings...)
}

// teardown closes the sandbox exactly once, on a context that survives the run's
// cancellation, with its own deadline; a second signal (Force) cuts the wait short.
func (r *run) teardown(parent context.Context) {
	r.closeCleanRoom(parent) // open only when a panic cut its evaluation short
	if r.opts.Workspace != nil {
		if err := recovered(r.opts.Workspace.Close); err != nil {
			r.log.Warn().Err(err).Msg("could not remove the workspace record")
		}
	}
	r.mu.Lock()
	if r.tornDown {
		r.mu.Unlock()
		return
	}
	r.tornDown = true
	sb, created := r.sb, r.created
	r.mu.Unlock()
	if sb == nil {
		r.res.Teardown = &result.Teardown{Status: result.TeardownNone}
		return
	}
	// The outcome is on disk before the deletion, which may hang until a SIGKILL.
	_ = r.writeResult() // a failure is logged; the final write decides
	ctx, cancel := r.teardownContext(parent)
	defer cancel()
	r.mu.Lock()
	agentCloser := r.agent
	r.mu.Unlock()
	if agentCloser != nil {
		if err := recovered(func() error { agentCloser.Close(ctx); return nil }); err != nil {
			r.fail(result.StageTeardown, fmt.Errorf("close the agent: %w", err))
		}
	}
	start := time.Now()
	idx := r.record(result.StageTeardown, start, result.StageRunning)
	r.emit(events.Event{Type: events.TeardownStarted, Stage: result.StageTeardown, Data: map[string]any{
		"sandbox": sb.ID(), "delete": created,
	}})
	err := recovered(func() error { return sb.Close(ctx) })
	td := &result.Teardown{Status: result.TeardownDeleted, DurationMS: time.Since(start).Milliseconds()}
	if !created {
		td.Status = result.TeardownKept
	}
	if n, ok := sb.(providers.TeardownNoter); ok && err == nil {
		td.Note = n.TeardownNote()
	}
	status := result.StageOK
	if err != nil {
		td.Status, td.Error, status = result.TeardownFailed, err.Error(), result.StageFailed
		r.fail(result.StageTeardown, fmt.Errorf("delete sandbox %s: %w (run `talkops sandbox gc` to retry)", sb.ID(), err))
	} else if created && r.opts.Ledger != nil {
		if ferr := recovered(func() error { return r.opts.Ledger.Forget(sb) }); ferr != nil {
			r.log.Warn().Err(ferr).Msg("sandbox deleted but its state file entry remains")
		}
	}
	r.mu.Lock()
	r.res.Teardown = td
	r.res.Stages[idx].Status = status
	r.res.Stages[idx].DurationMS = td.DurationMS
	r.res.Stages[idx].Error = td.Error
	r.mu.Unlock()
	r.emit(events.Event{Type: events.TeardownFinished, Stage: result.StageTeardown, Message: string(td.Status), Data: td})
	if td.Note != "" {
		r.emit(events.Event{Type: events.Warning, Stage: result.StageTeardown, Message: td.Note})
	}
}

// teardownContext is the context a deletion runs on: it survives the run's cancellation,
// has its own budget (shorter after a signal, to fit the cancel window), and ends early
// on a second signal (Force).
func (r *run) teardownContext(parent context.Context) (context.Context, context.CancelFunc) {
	budget := r.opts.TeardownTimeout
	if parent.Err() != nil {
		budget = r.opts.InterruptTeardownTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), budget)
	if r.opts.Force != nil {
		go func() {
			select {
			case <-r.opts.Force:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}

// finish decides the verdict and the exit code.
func (r *run) finish(parent context.Context) {
	res := r.res
	res.Run.FinishedAt = time.Now().UTC()
	res.Run.DurationMS = res.Run.FinishedAt.Sub(res.Run.StartedAt).Milliseconds()
	if r.interrupt == nil {
		if in, ok := interruptedBy(context.Cause(parent)); ok {
			r.interrupt = in
		}
	}
	res.Reason = ""
	switch {
	case r.interrupt != nil:
		res.Verdict = result.VerdictError
		res.Interrupted = SignalName(r.interrupt.Signal)
		res.Reason = r.interrupt.Error()
		res.ExitCode = r.interrupt.ExitCode()
	case r.infraErr != nil:
		res.Verdict = result.VerdictError
		res.Reason = r.infraErr.Error()
		res.ExitCode = ExitError
	case r.partialReason != "":
		// A budget ran out: whatever the checks say, the work did not finish.
		res.Partial = true
		res.Verdict = result.VerdictFail
		res.Reason = "budget exhausted: " + r.partialReason
		res.ExitCode = ExitBudget
	case r.res.Rubric == nil && r.unfinished != "":
		res.Verdict = result.VerdictFail
		res.Reason = r.unfinished
		res.ExitCode = ExitFail
	default:
		res.Verdict = r.verdictFromRubric()
		switch res.Verdict {
		case result.VerdictPass:
			res.ExitCode = ExitPass
		case result.VerdictFail:
			res.ExitCode = ExitFail
			res.Reason = "rubric not satisfied"
		default:
			res.ExitCode = ExitError
			res.Reason = "the rubric could not be evaluated"
		}
	}
	if code := AdvisoryExitCode(res.ExitCode, r.opts.Advisory); code != res.ExitCode {
		res.Reason += " (advisory mode: exit 0)"
		res.ExitCode = code
	}
}

func (r *run) verdictFromRubric() string {
	if r.res.Rubric == nil {
		return result.VerdictPass // no rubric: the agent finished
	}
	return result.VerdictFromRubric(r.res.Rubric.Status)
}

func (r *run) begin(ctx context.Context) {
	for _, p := range r.opts.Publishers {
		if err := recovered(func() error { return p.Begin(ctx, r.res) }); err != nil {
			r.log.Warn().Str("publisher", p.Name()).Err(err).Msg("could not announce the run")
			r.res.Errors = append(r.res.Errors, result.Error{Stage: result.StagePublish, Message: p.Name() + ": " + err.Error()})
		}
	}
}

// publish posts the final result; failures are recorded but never change the verdict.
func (r *run) publish(parent context.Context) {
	if len(r.opts.Publishers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 2*time.Minute)
	defer cancel()
	go func() {
		// A signal while publishing leaves a short grace (GitHub's cancel window), a second
		// signal none.
		select {
		case <-parent.Done():
			select {
			case <-time.After(r.opts.InterruptTeardownTimeout / 2):
			case <-r.opts.Force:
			case <-ctx.Done():
			}
			cancel()
		case <-r.opts.Force:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	idx := r.record(result.StagePublish, start, result.StageRunning)
	var errs []error
	for _, p := range r.opts.Publishers {
		if err := recovered(func() error { return p.Finish(ctx, r.res) }); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		}
	}
	st := &r.res.Stages[idx]
	st.DurationMS = time.Since(start).Milliseconds()
	st.Status = result.StageOK
	if err := errors.Join(errs...); err != nil {
		st.Status, st.Error = result.StageFailed, err.Error()
		r.res.Errors = append(r.res.Errors, result.Error{Stage: result.StagePublish, Message: err.Error()})
		r.log.Warn().Err(err).Msg("publishing failed; the verdict stands")
	}
}

// recovered calls fn and turns a panic in it into an error, for the code that runs outside
// the stages' recover (publishing, teardown): a bug there must neither crash the run nor
// skip what follows (the deletion, result.json).
func recovered(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: %v", p)
		}
	}()
	return fn()
}

// writeResult stores result.json. A failure is logged; the final write's failure also
// changes the exit code (resultUnwritten).
func (r *run) writeResult() error {
	if r.opts.ReportDir == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	path, err := result.Write(r.opts.ReportDir, r.res)
	if err != nil {
		r.log.Error().Err(err).Msg("could not write result.json")
		return err
	}
	if r.opts.AfterResult != nil {
		r.opts.AfterResult(path)
	}
	return nil
}

// resultUnwritten makes a run whose final result.json could not be written exit 3: the
// steps that read it (reports, artifacts, talkops report --from) would find nothing, so
// the run must not look green. An interrupt keeps its own code.
func (r *run) resultUnwritten(err error) {
	res := r.res
	res.Errors = append(res.Errors, result.Error{Stage: result.StagePublish, Message: err.Error()})
	if res.Interrupted != "" {
		return
	}
	res.Verdict = result.VerdictError
	res.Reason = "result.json could not be written: " + err.Error()
	res.ExitCode = AdvisoryExitCode(ExitError, r.opts.Advisory)
}

// noteLateInterrupt records a signal that arrived after the verdict, while publishing:
// the exit code says the run was interrupted, and result.json says when.
func (r *run) noteLateInterrupt(parent context.Context) {
	in, ok := interruptedBy(context.Cause(parent))
	if !ok || r.res.Interrupted != "" {
		return
	}
	r.res.Interrupted = SignalName(in.Signal)
	r.res.ExitCode = in.ExitCode()
	r.res.Reason = strings.TrimPrefix(r.res.Reason+"; ", "; ") + in.Error() + " while publishing"
}
