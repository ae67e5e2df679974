package runner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// runGuarded runs the pipeline and turns a panic out of Run (which it promises never to
// do) into a value the test reports, instead of a crash of the whole test binary.
func runGuarded(ctx context.Context, opts runner.Options) (res *result.Result, panicked any) {
	defer func() { panicked = recover() }()
	return runner.Run(ctx, opts), nil
}

// How a call goes wrong.
const (
	withError   = "error"
	withPanic   = "panic"
	withTimeout = "timeout" // Options.Timeout runs out while the call waits
	withSIGINT  = "SIGINT"
	withSIGTERM = "SIGTERM"
)

// Where it goes wrong: one call in each stage, as the fakes name them.
var faultPoints = []struct {
	call  string
	stage string
	// kinds this point can suffer (Describe has no context to wait on or error to return;
	// the run's budget does not cover publishing).
	kinds []string
}{
	{"publisher.Begin", "publish", []string{withError, withPanic, withSIGINT, withSIGTERM}},
	{"ledger.Pending", "provision", []string{withError, withPanic}},
	{"provider.Create", "provision", nil},
	{"ledger.Record", "provision", []string{withError, withPanic}},
	{"sync", "sync", nil},
	{"sandbox.Upload", "setup", nil},
	{"sandbox.Exec sh", "setup", nil},
	{"workspace.Baseline", "baseline", nil},
	{"agent.New", "agent", nil},
	{"agent.Run", "agent", nil},
	{"workspace.Changes", "changes", nil},
	{"rubric.Describe", "rubric", []string{withPanic}},
	{"workspace.Apply", "verify", nil},
	{"rubric.Evaluate", "rubric", nil},
	{"agent.Revise", "agent", nil},
	{"publisher.Finish", "publish", []string{withError, withPanic, withSIGINT, withSIGTERM}},
}

var allKinds = []string{withError, withPanic, withTimeout, withSIGINT, withSIGTERM}

// Whatever goes wrong in whichever stage, Run returns, every sandbox it created (the run's
// and any clean room) is deleted and forgotten in the ledger, the agent is closed before
// its sandbox, result.json is written and says what Run returned, and the exit code says
// what happened. Teardown after a signal runs on a live context with the short budget.
func TestTeardownOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, fp := range faultPoints {
		kinds := fp.kinds
		if kinds == nil {
			kinds = allKinds
		}
		for _, kind := range kinds {
			t.Run(fp.call+"/"+kind, func(t *testing.T) {
				t.Parallel()
				p := everything()
				p.workspace = true
				p.iterations = []result.Iteration{needsRevision, satisfied}
				w, opts, ctx := recorded(t, p)
				opts.TeardownTimeout = time.Hour
				opts.InterruptTeardownTimeout = 5 * time.Second
				const injected = "injected fault"
				var wantExit int
				switch kind {
				case withError:
					w.when(fp.call, failing(injected))
					wantExit = runner.ExitError
				case withPanic:
					w.when(fp.call, panicking(injected))
					wantExit = runner.ExitError
				case withTimeout:
					// Long enough for the fakes before the stuck call to finish on a
					// loaded machine; the test waits for nothing else.
					opts.Timeout = 500 * time.Millisecond
					w.when(fp.call, waitingForStop)
					wantExit = runner.ExitBudget
				case withSIGINT:
					w.when(fp.call, w.signalled(syscall.SIGINT))
					wantExit = runner.ExitSIGINT
				case withSIGTERM:
					w.when(fp.call, w.signalled(syscall.SIGTERM))
					wantExit = runner.ExitSIGTERM
				}
				publishing := strings.HasPrefix(fp.call, "publisher.")
				if publishing && (kind == withError || kind == withPanic) {
					wantExit = runner.ExitPass // publishing never changes the verdict
				}
				if fp.call == "publisher.Finish" {
					// A signal while publishing leaves half this as grace; keep the wait short.
					opts.InterruptTeardownTimeout = 200 * time.Millisecond
				}

				res, panicked := runGuarded(ctx, opts)
				if panicked != nil {
					t.Fatalf("Run panicked: %v", panicked)
				}
				calls := w.log()
				if !slices.Contains(calls, fp.call) {
					t.Fatalf("the run never reached %s: %v", fp.call, calls)
				}
				if res.ExitCode != wantExit {
					t.Errorf("exit %d (%s: %s), want %d", res.ExitCode, res.Verdict, res.Reason, wantExit)
				}
				if alive := w.alive(); len(alive) != 0 {
					t.Errorf("sandboxes left alive: %v (calls %v)", alive, calls)
				}
				if left := w.ledgerLeft(); len(left) != 0 {
					t.Errorf("ledger still holds %v although every sandbox was deleted", left)
				}
				w.mu.Lock()
				pending := w.pending
				w.mu.Unlock()
				// A create that panicked may have made a sandbox nobody can name: its
				// pending entry stays for gc. Every other path drops it.
				if wantPending := fp.call == "provider.Create" && kind == withPanic; pending != wantPending {
					t.Errorf("ledger holds a pending create: %t, want %t (calls %v)", pending, wantPending, calls)
				}
				if fp.call == "ledger.Pending" && slices.Contains(calls, "provider.Create") {
					t.Errorf("the create was sent though its pending entry was not written: %v", calls)
				}
				created := slices.Contains(calls, "sandbox.Close")
				if fp.call == "provider.Create" || fp.call == "ledger.Pending" || (fp.call == "publisher.Begin" && kind != withError && kind != withPanic) {
					// Nothing was provisioned.
					if created || res.Teardown == nil || fmt.Sprint(res.Teardown.Status) != "none" {
						t.Errorf("teardown %+v with no sandbox (calls %v)", res.Teardown, calls)
					}
				} else if res.Teardown == nil || fmt.Sprint(res.Teardown.Status) != "deleted" {
					t.Errorf("teardown %+v, want deleted", res.Teardown)
				}
				if i := slices.Index(calls, "agent.New"); i >= 0 && fp.call != "agent.New" {
					closed := slices.Index(calls, "agent.Close")
					if closed < 0 || count(calls, "agent.Close") != 1 || closed > lastIndex(calls, "sandbox.Close") {
						t.Errorf("agent closed %d times, at %d, sandbox closed last at %d; want once, before",
							count(calls, "agent.Close"), closed, lastIndex(calls, "sandbox.Close"))
					}
				}
				for _, st := range res.Stages {
					if fmt.Sprint(st.Status) == "running" {
						t.Errorf("stage %s still says running in the final result (stages %s)", st.Name, stageList(res))
					}
				}
				checkFault(t, fp.stage, kind, fp.call, res)
				checkTeardownContext(t, w, kind, fp.call, opts)
				checkRecord(t, opts, res)
			})
		}
	}
}

// checkFault checks that the result says what went wrong, and where.
func checkFault(t *testing.T, stage, kind, call string, res *result.Result) {
	t.Helper()
	publishing := strings.HasPrefix(call, "publisher.")
	switch kind {
	case withError, withPanic:
		if !slices.ContainsFunc(res.Errors, func(e result.Error) bool { return strings.Contains(e.Message, "injected fault") }) {
			t.Errorf("errors %+v do not carry the fault", res.Errors)
		}
		if publishing {
			if res.Verdict != result.VerdictPass {
				t.Errorf("a publisher's %s changed the verdict to %s (%s)", kind, res.Verdict, res.Reason)
			}
			return
		}
		if res.Verdict != result.VerdictError || !strings.Contains(res.Reason, "injected fault") {
			t.Errorf("verdict %s reason %q, want error naming the fault", res.Verdict, res.Reason)
		}
		if kind == withError && !strings.HasPrefix(res.Reason, stage+": ") {
			t.Errorf("reason %q does not name the stage %s", res.Reason, stage)
		}
	case withTimeout:
		if !res.Partial || res.Verdict != result.VerdictFail || !strings.Contains(res.Reason, "timeout") {
			t.Errorf("partial %v verdict %s reason %q, want a partial fail for the timeout", res.Partial, res.Verdict, res.Reason)
		}
		if !slices.ContainsFunc(res.Stages, func(st result.Stage) bool {
			return string(st.Name) == stage && fmt.Sprint(st.Status) == "timeout"
		}) {
			t.Errorf("no %s stage says timeout: %s", stage, stageList(res))
		}
	case withSIGINT, withSIGTERM:
		if call == "publisher.Finish" {
			// A signal after the verdict (while publishing) changes the exit code and is
			// recorded, but the verdict stands.
			if res.Interrupted != kind || res.Verdict != result.VerdictPass || !strings.Contains(res.Reason, "while publishing") {
				t.Errorf("interrupted %q verdict %s reason %q, want %s recorded beside the pass", res.Interrupted, res.Verdict, res.Reason, kind)
			}
			return
		}
		if res.Interrupted != kind || res.Verdict != result.VerdictError {
			t.Errorf("interrupted %q verdict %s, want %s error", res.Interrupted, res.Verdict, kind)
		}
		if call == "publisher.Begin" {
			stage = "provision" // the signal came before anything was provisioned
		}
		if !slices.ContainsFunc(res.Stages, func(st result.Stage) bool {
			s := fmt.Sprint(st.Status)
			return string(st.Name) == stage && (s == "interrupted" || s == "skipped")
		}) {
			t.Errorf("the %s stage does not say it was interrupted: %s", stage, stageList(res))
		}
	}
}

// checkTeardownContext checks the context the sandbox was deleted on: alive although the
// run's context was cancelled, with the short budget after a signal and the long one
// otherwise.
func checkTeardownContext(t *testing.T, w *world, kind, call string, opts runner.Options) {
	t.Helper()
	w.mu.Lock()
	seen := w.teardownCtx
	w.mu.Unlock()
	if !seen.called {
		return
	}
	if seen.errOnEntry != nil || !seen.hasDeadline {
		t.Errorf("teardown context: err %v, deadline %v; want alive with a deadline", seen.errOnEntry, seen.hasDeadline)
	}
	signalled := (kind == withSIGINT || kind == withSIGTERM) && call != "publisher.Finish"
	if short := seen.budget <= opts.InterruptTeardownTimeout; short != signalled {
		t.Errorf("teardown budget %s (signal before teardown: %v; budgets %s, after a signal %s)",
			seen.budget.Round(time.Second), signalled, opts.TeardownTimeout, opts.InterruptTeardownTimeout)
	}
}

func lastIndex(calls []string, name string) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i] == name {
			return i
		}
	}
	return -1
}

// Teardown itself going wrong: the sandbox that could not be deleted stays in the ledger
// (so `talkops sandbox gc` finds it) and the run is an error; its budget and a second
// signal bound the wait; an attached sandbox is released, never deleted or recorded.
func TestTeardownFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		parts   parts
		arrange func(w *world, opts *runner.Options)
		// what became of the sandbox
		exit     int
		teardown string
		left     []string // alive after the run
		ledger   []string // in the ledger after the run, when not left
		// how the deletion's context ended (nil: it was not cancelled)
		closeErr error
		reason   string
	}{{
		name:  "delete fails",
		parts: everything(),
		arrange: func(w *world, _ *runner.Options) {
			w.when("sandbox.Close", failing("injected fault"))
		},
		exit: runner.ExitError, teardown: "failed", left: []string{"sb-1"},
		reason: "teardown: delete sandbox sb-1: injected fault (run `talkops sandbox gc` to retry)",
	}, {
		name:  "delete panics",
		parts: everything(),
		arrange: func(w *world, _ *runner.Options) {
			w.when("sandbox.Close", panicking("injected fault"))
		},
		exit: runner.ExitError, teardown: "failed", left: []string{"sb-1"},
		reason: "injected fault",
	}, {
		name:  "delete outlasts the teardown budget",
		parts: everything(),
		arrange: func(w *world, opts *runner.Options) {
			opts.TeardownTimeout = 100 * time.Millisecond
			w.when("sandbox.Close", waitingForStop)
		},
		exit: runner.ExitError, teardown: "failed", left: []string{"sb-1"}, closeErr: context.DeadlineExceeded,
		reason: "context deadline exceeded",
	}, {
		// The first signal starts a graceful teardown; the second one, while it waits,
		// stops the wait at once rather than at the end of the budget.
		name:  "second signal during teardown",
		parts: everything(),
		arrange: func(w *world, opts *runner.Options) {
			opts.InterruptTeardownTimeout = 30 * time.Second // only Force ends the wait sooner
			w.when("agent.Run", w.signalled(syscall.SIGTERM))
			w.when("sandbox.Close", func(ctx context.Context) error {
				close(w.force)
				return waitingForStop(ctx)
			})
		},
		exit: runner.ExitSIGTERM, teardown: "failed", left: []string{"sb-1"}, closeErr: context.Canceled,
		reason: "interrupted by SIGTERM",
	}, {
		// A first signal that arrives while the sandbox is being deleted does not stop
		// the deletion; it is recorded and decides the exit code.
		name:  "first signal during teardown",
		parts: everything(),
		arrange: func(w *world, _ *runner.Options) {
			w.when("sandbox.Close", func(ctx context.Context) error {
				w.cancel(&runner.Interrupted{Signal: syscall.SIGINT})
				return ctx.Err()
			})
		},
		exit: runner.ExitSIGINT, teardown: "deleted",
		reason: "interrupted by SIGINT",
	}, {
		name:  "second signal before teardown",
		parts: everything(),
		arrange: func(w *world, opts *runner.Options) {
			opts.InterruptTeardownTimeout = 30 * time.Second // only Force ends the wait sooner
			w.when("agent.Run", func(ctx context.Context) error {
				w.cancel(&runner.Interrupted{Signal: syscall.SIGINT})
				close(w.force)
				return waitingForStop(ctx)
			})
			w.when("sandbox.Close", waitingForStop)
		},
		exit: runner.ExitSIGINT, teardown: "failed", left: []string{"sb-1"}, closeErr: context.Canceled,
		reason: "interrupted by SIGINT",
	}, {
		name:  "agent close panics",
		parts: everything(),
		arrange: func(w *world, _ *runner.Options) {
			w.when("agent.Close", panicking("injected fault"))
		},
		exit: runner.ExitError, teardown: "deleted",
		reason: "injected fault",
	}, {
		name:  "workspace record removal panics",
		parts: parts{agent: true, rubric: true, workspace: true, ledger: true},
		arrange: func(w *world, _ *runner.Options) {
			w.when("workspace.Close", panicking("injected fault"))
		},
		exit: runner.ExitPass, teardown: "deleted",
	}, {
		name:  "ledger panics when forgetting",
		parts: everything(),
		arrange: func(w *world, _ *runner.Options) {
			w.when("ledger.Forget", panicking("injected fault"))
		},
		exit: runner.ExitPass, teardown: "deleted", ledger: []string{"sb-1"},
	}, {
		// A clean room whose deletion fails is reported like the run's own sandbox, and
		// stays in the ledger; the run's sandbox is still deleted.
		name:  "clean room delete fails",
		parts: parts{agent: true, rubric: true, workspace: true, ledger: true},
		arrange: func(w *world, _ *runner.Options) {
			w.when("sandbox.Close", func(context.Context) error {
				w.when("sandbox.Close", nil) // only the first deletion, the clean room's
				return errors.New("injected fault")
			})
		},
		exit: runner.ExitError, teardown: "deleted", left: []string{"sb-2"},
		reason: "teardown: delete clean room sb-2: injected fault (run `talkops sandbox gc` to retry)",
	}, {
		name:  "clean room delete panics",
		parts: parts{agent: true, rubric: true, workspace: true, ledger: true},
		arrange: func(w *world, _ *runner.Options) {
			w.when("sandbox.Close", func(context.Context) error {
				w.when("sandbox.Close", nil)
				panic("injected fault")
			})
		},
		exit: runner.ExitError, teardown: "deleted", left: []string{"sb-2"},
		reason: "injected fault",
	}, {
		// The sandbox is gone; a stale ledger entry only costs gc a lookup.
		name:  "ledger cannot forget",
		parts: everything(),
		arrange: func(w *world, _ *runner.Options) {
			w.when("ledger.Forget", failing("injected fault"))
		},
		exit: runner.ExitPass, teardown: "deleted", ledger: []string{"sb-1"},
	}, {
		name:  "workspace record cannot be removed",
		parts: parts{agent: true, rubric: true, workspace: true, ledger: true},
		arrange: func(w *world, _ *runner.Options) {
			w.when("workspace.Close", failing("injected fault"))
		},
		exit: runner.ExitPass, teardown: "deleted",
	}, {
		name:  "attached sandbox after a signal",
		parts: parts{attach: true, agent: true, ledger: true},
		arrange: func(w *world, _ *runner.Options) {
			w.when("agent.Run", w.signalled(syscall.SIGINT))
		},
		exit: runner.ExitSIGINT, teardown: "kept",
		reason: "interrupted by SIGINT",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, opts, ctx := recorded(t, tc.parts)
			tc.arrange(w, &opts)
			res, panicked := runGuarded(ctx, opts)
			if panicked != nil {
				t.Fatalf("Run panicked: %v", panicked)
			}
			calls := w.log()
			if res.ExitCode != tc.exit {
				t.Errorf("exit %d (%s: %s), want %d", res.ExitCode, res.Verdict, res.Reason, tc.exit)
			}
			if res.Teardown == nil || fmt.Sprint(res.Teardown.Status) != tc.teardown {
				t.Errorf("teardown %+v, want %s", res.Teardown, tc.teardown)
			}
			if alive := w.alive(); !slices.Equal(alive, tc.left) {
				t.Errorf("alive after the run: %v, want %v", alive, tc.left)
			}
			// The ledger forgets only what was deleted.
			wantLedger := cmpOr(tc.ledger, tc.left)
			if got := w.ledgerLeft(); !slices.Equal(got, wantLedger) {
				t.Errorf("ledger holds %v, want %v", got, wantLedger)
			}
			if tc.parts.attach && (slices.Contains(calls, "ledger.Record") || slices.Contains(calls, "ledger.Forget")) {
				t.Errorf("an attached sandbox went into the ledger: %v", calls)
			}
			if !slices.Contains(calls, "sandbox.Close") {
				t.Errorf("sandbox never closed: %v", calls)
			}
			w.mu.Lock()
			seen := w.teardownCtx
			w.mu.Unlock()
			if !errors.Is(seen.errOnReturn, tc.closeErr) || (tc.closeErr == nil) != (seen.errOnReturn == nil) {
				t.Errorf("the deletion's context ended with %v, want %v", seen.errOnReturn, tc.closeErr)
			}
			if !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", res.Reason, tc.reason)
			}
			checkRecord(t, opts, res)
		})
	}
}

func cmpOr[T any](a, b []T) []T {
	if a != nil {
		return a
	}
	return b
}
