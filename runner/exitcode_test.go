package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// The exit-code table (README "Exit codes"): every verdict and condition a run can end in,
// its code, and the code under --advisory, which maps 3 and 124 to 0 and nothing else.
// result.json is written in each case and says what Run returned.
func TestExitCodeTable(t *testing.T) {
	t.Parallel()
	agentOnly := parts{agent: true}
	refused := parts{agent: true, agentRun: runner.AgentOutcome{Unfinished: "the model refused the task"}}
	refusedButSatisfied := refused
	refusedButSatisfied.rubric = true
	rubricSays := func(it result.Iteration) parts {
		return parts{agent: true, rubric: true, iterations: []result.Iteration{it}}
	}
	unknownStatus := rubricError
	unknownStatus.Status = "probably"
	outOfBudget := rubricSays(satisfied)
	outOfBudget.agentRun = runner.AgentOutcome{Partial: true, StopReason: "max cost"}
	outOfBudgetNoReason := agentOnly
	outOfBudgetNoReason.agentRun = runner.AgentOutcome{Partial: true}

	cases := []struct {
		name     string
		parts    parts
		arrange  func(w *world)
		verdict  string
		exit     int
		advisory int // the exit code with Options.Advisory
		reason   string
	}{
		{name: "sandbox only", parts: parts{}, verdict: "pass", exit: 0, advisory: 0},
		{name: "agent finished, no rubric", parts: agentOnly, verdict: "pass", exit: 0, advisory: 0},
		{name: "agent refused, no rubric", parts: refused, verdict: "fail", exit: 1, advisory: 1,
			reason: "the model refused the task"},
		{name: "agent refused, rubric satisfied", parts: refusedButSatisfied, verdict: "pass", exit: 0, advisory: 0},
		{name: "rubric satisfied", parts: rubricSays(satisfied), verdict: "pass", exit: 0, advisory: 0},
		{name: "rubric failed", parts: rubricSays(rubricFailed), verdict: "fail", exit: 1, advisory: 1,
			reason: "rubric not satisfied"},
		{name: "rubric needs revision, none left", parts: rubricSays(needsRevision), verdict: "fail", exit: 1, advisory: 1,
			reason: "rubric not satisfied"},
		{name: "rubric error", parts: rubricSays(rubricError), verdict: "error", exit: 3, advisory: 0,
			reason: "the rubric could not be evaluated"},
		{name: "rubric status unknown", parts: rubricSays(unknownStatus), verdict: "error", exit: 3, advisory: 0,
			reason: "the rubric could not be evaluated"},
		{name: "agent out of budget, rubric satisfied", parts: outOfBudget, verdict: "fail", exit: 124, advisory: 0,
			reason: "budget exhausted: max cost"},
		{name: "agent out of budget, no reason given", parts: outOfBudgetNoReason, verdict: "fail", exit: 124, advisory: 0,
			reason: "budget exhausted: budget"},
		{name: "setup script exits non-zero", parts: parts{setup: true}, verdict: "error", exit: 3, advisory: 0,
			arrange: func(w *world) { w.execExit = 2 }, reason: "setup: setup script setup.sh exited with code 2"},
		{name: "model API down", parts: rubricSays(satisfied), verdict: "error", exit: 3, advisory: 0,
			arrange: func(w *world) { w.when("agent.Run", failing("model API down")) }, reason: "agent: model API down"},
		{name: "teardown failed after a pass", parts: rubricSays(satisfied), verdict: "error", exit: 3, advisory: 0,
			arrange: func(w *world) { w.when("sandbox.Close", failing("delete refused")) }, reason: "delete refused"},
		{name: "publisher failed after a pass", parts: everything(), verdict: "pass", exit: 0, advisory: 0,
			arrange: func(w *world) { w.when("publisher.Finish", failing("GitHub API down")) }},
		{name: "SIGINT", parts: rubricSays(satisfied), verdict: "error", exit: 130, advisory: 130,
			arrange: func(w *world) { w.when("agent.Run", w.signalled(syscall.SIGINT)) }, reason: "interrupted by SIGINT"},
		{name: "SIGTERM", parts: rubricSays(satisfied), verdict: "error", exit: 143, advisory: 143,
			arrange: func(w *world) { w.when("agent.Run", w.signalled(syscall.SIGTERM)) }, reason: "interrupted by SIGTERM"},
		{name: "another signal", parts: rubricSays(satisfied), verdict: "error", exit: 130, advisory: 130,
			arrange: func(w *world) { w.when("agent.Run", w.signalled(syscall.SIGHUP)) }, reason: "interrupted by hangup"},
	}
	for _, tc := range cases {
		for _, advisory := range []bool{false, true} {
			name := tc.name
			if advisory {
				name += "/advisory"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				w, opts, ctx := recorded(t, tc.parts)
				opts.Advisory = advisory
				if tc.arrange != nil {
					tc.arrange(w)
				}
				res := runner.Run(ctx, opts)
				want := tc.exit
				if advisory {
					want = tc.advisory
				}
				if res.ExitCode != want || res.Verdict != tc.verdict {
					t.Errorf("exit %d verdict %s (%s), want %d %s", res.ExitCode, res.Verdict, res.Reason, want, tc.verdict)
				}
				if !strings.Contains(res.Reason, tc.reason) {
					t.Errorf("reason %q, want it to contain %q", res.Reason, tc.reason)
				}
				if mapped := advisory && want != tc.exit; mapped != strings.HasSuffix(res.Reason, "(advisory mode: exit 0)") {
					t.Errorf("reason %q: exit %d mapped to %d without saying so, or the other way round", res.Reason, tc.exit, want)
				}
				if res.Partial != (tc.exit == runner.ExitBudget) {
					t.Errorf("partial %v for exit %d", res.Partial, tc.exit)
				}
				// result.json records the mode, and report --from maps its code the same way.
				if res.Advisory != advisory {
					t.Errorf("result.advisory = %v, want %v", res.Advisory, advisory)
				}
				if got := runner.AdvisoryExitCode(tc.exit, advisory); got != want {
					t.Errorf("AdvisoryExitCode(%d, %v) = %d, want %d", tc.exit, advisory, got, want)
				}
				checkRecord(t, opts, res)
			})
		}
	}
}

// A final result.json that cannot be written makes the run an error (exit 3, or 0 under
// --advisory): the steps that read it would find nothing, so the run must not look green.
// An interrupt keeps its own code.
func TestUnwritableResultExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		advisory bool
		signal   bool
		exit     int
		verdict  string
	}{
		{name: "plain", exit: runner.ExitError, verdict: "error"},
		{name: "advisory", advisory: true, exit: runner.ExitPass, verdict: "error"},
		{name: "interrupted", signal: true, exit: runner.ExitSIGTERM, verdict: "error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, opts, ctx := recorded(t, parts{agent: true})
			file := filepath.Join(t.TempDir(), "not-a-dir")
			if err := os.WriteFile(file, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			opts.ReportDir = filepath.Join(file, "report")
			opts.Advisory = tc.advisory
			if tc.signal {
				w.when("agent.Run", w.signalled(syscall.SIGTERM))
			}
			res := runner.Run(ctx, opts)
			if res.ExitCode != tc.exit || res.Verdict != tc.verdict {
				t.Errorf("exit %d verdict %s (%s), want %d %s", res.ExitCode, res.Verdict, res.Reason, tc.exit, tc.verdict)
			}
			if !strings.Contains(res.Errors[len(res.Errors)-1].Message, "not a directory") {
				t.Errorf("errors %+v do not say why result.json is missing", res.Errors)
			}
		})
	}
}

// The signal → exit code and name table that cmd/talkops relies on.
func TestInterruptedExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		signal os.Signal
		exit   int
		name   string
	}{
		{syscall.SIGINT, runner.ExitSIGINT, "SIGINT"},
		{syscall.SIGTERM, runner.ExitSIGTERM, "SIGTERM"},
		{syscall.SIGHUP, runner.ExitSIGINT, "hangup"},
		{nil, runner.ExitSIGINT, "signal"},
	}
	for _, tc := range cases {
		in := &runner.Interrupted{Signal: tc.signal}
		if in.ExitCode() != tc.exit || runner.SignalName(tc.signal) != tc.name || in.Error() != "interrupted by "+tc.name {
			t.Errorf("%v: exit %d name %q error %q, want %d %q", tc.signal, in.ExitCode(), runner.SignalName(tc.signal), in.Error(), tc.exit, tc.name)
		}
	}
}
