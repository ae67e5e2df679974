package runner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// Call sequences shared by the cases below.
var (
	setupCalls = []string{"sandbox.Upload", "sandbox.Exec sh", "sandbox.Exec rm"}
	// A run's own sandbox: created between a pending and a recorded ledger entry, synced, set up.
	provisionCalls = seq("publisher.Begin", "ledger.Pending", "provider.Create", "ledger.Record", "sync", setupCalls)
	// Teardown of a run's own sandbox and the publish after it.
	teardownCalls = []string{"agent.Close", "sandbox.Close", "ledger.Forget", "publisher.Finish"}
	// A provisioned clean room: a new sandbox, recorded, synced, set up, the change set applied.
	cleanRoomCalls = seq("ledger.Pending", "provider.Create", "ledger.Record", "sync", setupCalls, "workspace.Apply")
)

// seq flattens names and slices of names into one call sequence.
func seq(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("seq: %T", p))
		}
	}
	return out
}

// The pipeline calls its parts in one order: provision → sync → setup → agent ⇄ rubric →
// teardown (agent first, then the sandbox, then the ledger) → publish, leaving out the
// parts a run does not have, and never deleting an attached sandbox.
func TestStageOrder(t *testing.T) {
	t.Parallel()
	noRubric := everything()
	noRubric.rubric = false
	checksOnly := parts{rubric: true, iterations: []result.Iteration{needsRevision}}
	attached := everything()
	attached.attach = true
	loop := everything()
	loop.iterations = []result.Iteration{needsRevision, needsRevision, satisfied}
	limit := everything()
	limit.iterations = []result.Iteration{needsRevision, needsRevision}
	partial := everything()
	partial.iterations = []result.Iteration{needsRevision, satisfied}
	partial.agentRun = runner.AgentOutcome{Partial: true, StopReason: "max turns"}
	revisedPartial := everything()
	revisedPartial.iterations = []result.Iteration{needsRevision, needsRevision, satisfied}
	revisedPartial.revisions = []runner.AgentOutcome{{Partial: true, StopReason: "max cost"}}
	clean := everything()
	clean.workspace = true
	clean.iterations = []result.Iteration{needsRevision, satisfied}

	cases := []struct {
		name     string
		parts    parts
		calls    []string
		stages   string
		exit     int
		teardown string
	}{{
		name:  "every part",
		parts: everything(),
		calls: seq(provisionCalls,
			"agent.New", "agent.Run", "rubric.Describe", "rubric.Evaluate",
			teardownCalls),
		stages:   "provision:ok sync:ok setup:ok agent:ok rubric:ok teardown:ok publish:ok",
		exit:     runner.ExitPass,
		teardown: "deleted",
	}, {
		name:     "sandbox only",
		parts:    parts{},
		calls:    seq("provider.Create", "sandbox.Close"),
		stages:   "provision:ok sync:skipped setup:skipped agent:skipped rubric:skipped teardown:ok",
		exit:     runner.ExitPass,
		teardown: "deleted",
	}, {
		name:  "no rubric",
		parts: noRubric,
		calls: seq(provisionCalls,
			"agent.New", "agent.Run", teardownCalls),
		stages:   "provision:ok sync:ok setup:ok agent:ok rubric:skipped teardown:ok publish:ok",
		exit:     runner.ExitPass,
		teardown: "deleted",
	}, {
		// Without an agent there is nobody to revise: one evaluation, whatever it says.
		name:     "checks only",
		parts:    checksOnly,
		calls:    seq("provider.Create", "rubric.Describe", "rubric.Evaluate", "sandbox.Close"),
		stages:   "provision:ok sync:skipped setup:skipped agent:skipped rubric:ok teardown:ok",
		exit:     runner.ExitFail,
		teardown: "deleted",
	}, {
		name:  "attached sandbox is kept and never in the ledger",
		parts: attached,
		calls: seq("publisher.Begin", "provider.Attach", "sync", setupCalls,
			"agent.New", "agent.Run", "rubric.Describe", "rubric.Evaluate",
			"agent.Close", "sandbox.Close", "publisher.Finish"),
		stages:   "provision:ok sync:ok setup:ok agent:ok rubric:ok teardown:ok publish:ok",
		exit:     runner.ExitPass,
		teardown: "kept",
	}, {
		name:  "revision loop until satisfied",
		parts: loop,
		calls: seq(provisionCalls,
			"agent.New", "agent.Run", "rubric.Describe", "rubric.Evaluate",
			"agent.Revise", "rubric.Evaluate", "agent.Revise", "rubric.Evaluate",
			teardownCalls),
		stages: "provision:ok sync:ok setup:ok agent:ok rubric:ok agent:ok rubric:ok agent:ok rubric:ok " +
			"teardown:ok publish:ok",
		exit:     runner.ExitPass,
		teardown: "deleted",
	}, {
		name:  "revision loop stops at max iterations",
		parts: limit,
		calls: seq(provisionCalls,
			"agent.New", "agent.Run", "rubric.Describe", "rubric.Evaluate", "agent.Revise", "rubric.Evaluate",
			teardownCalls),
		stages:   "provision:ok sync:ok setup:ok agent:ok rubric:ok agent:ok rubric:ok teardown:ok publish:ok",
		exit:     runner.ExitFail,
		teardown: "deleted",
	}, {
		// An agent out of budget is not asked to revise; its work is scored once.
		name:  "partial agent is not revised",
		parts: partial,
		calls: seq(provisionCalls,
			"agent.New", "agent.Run", "rubric.Describe", "rubric.Evaluate",
			teardownCalls),
		stages:   "provision:ok sync:ok setup:ok agent:partial rubric:partial teardown:ok publish:ok",
		exit:     runner.ExitBudget,
		teardown: "deleted",
	}, {
		name:  "a revision out of budget ends the loop",
		parts: revisedPartial,
		calls: seq(provisionCalls,
			"agent.New", "agent.Run", "rubric.Describe", "rubric.Evaluate", "agent.Revise", "rubric.Evaluate",
			teardownCalls),
		stages:   "provision:ok sync:ok setup:ok agent:ok rubric:ok agent:partial rubric:partial teardown:ok publish:ok",
		exit:     runner.ExitBudget,
		teardown: "deleted",
	}, {
		// Each evaluation gets a clean room of its own, deleted (and forgotten) before the
		// agent's next pass; the workspace record is removed before the sandbox goes.
		name:  "clean rooms",
		parts: clean,
		calls: seq(provisionCalls,
			"workspace.Baseline", "agent.New", "agent.Run", "workspace.Changes", "rubric.Describe",
			cleanRoomCalls, "rubric.Evaluate", "sandbox.Close", "ledger.Forget",
			"agent.Revise", "workspace.Changes",
			cleanRoomCalls, "rubric.Evaluate", "sandbox.Close", "ledger.Forget",
			"workspace.Close", teardownCalls),
		stages: "provision:ok sync:ok setup:ok baseline:ok agent:ok changes:ok verify:ok rubric:ok " +
			"agent:ok changes:ok verify:ok rubric:ok teardown:ok publish:ok",
		exit:     runner.ExitPass,
		teardown: "deleted",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, opts, ctx := recorded(t, tc.parts)
			res := runner.Run(ctx, opts)
			if got := w.log(); !slices.Equal(got, tc.calls) {
				t.Errorf("calls:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(tc.calls, ", "))
			}
			if got := stageList(res); got != tc.stages {
				t.Errorf("stages:\n got %s\nwant %s", got, tc.stages)
			}
			if res.ExitCode != tc.exit {
				t.Errorf("exit %d (%s: %s), want %d", res.ExitCode, res.Verdict, res.Reason, tc.exit)
			}
			if res.Teardown == nil || fmt.Sprint(res.Teardown.Status) != tc.teardown {
				t.Errorf("teardown %+v, want %s", res.Teardown, tc.teardown)
			}
			if left := w.ledgerLeft(); len(left) != 0 {
				t.Errorf("ledger still holds %v after every sandbox was deleted", left)
			}
			if res.Rubric != nil && len(res.Rubric.Iterations) != count(tc.calls, "rubric.Evaluate") {
				t.Errorf("result.json has %d iterations for %d evaluations", len(res.Rubric.Iterations), count(tc.calls, "rubric.Evaluate"))
			}
			checkRecord(t, opts, res)
		})
	}
}

func count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}

// result.json on disk when teardown starts already holds the run's outcome (the stages
// finished, the rubric's iterations), so a run killed while deleting its sandbox still
// leaves the verdict's evidence; after teardown it is updated with the teardown and the
// verdict, before publishing.
func TestResultWrittenBeforeTeardown(t *testing.T) {
	t.Parallel()
	w, opts, ctx := recorded(t, everything())
	path := filepath.Join(opts.ReportDir, "result.json")
	var atTeardown, atPublish *result.Result
	read := func(into **result.Result) behaviour {
		return func(context.Context) error {
			r, err := result.Read(path)
			*into = r
			return err
		}
	}
	w.when("sandbox.Close", read(&atTeardown))
	w.when("publisher.Finish", read(&atPublish))
	res := runner.Run(ctx, opts)
	if res.ExitCode != runner.ExitPass {
		t.Fatalf("exit %d (%s)", res.ExitCode, res.Reason)
	}
	if atTeardown == nil || atTeardown.Rubric == nil || len(atTeardown.Rubric.Iterations) != 1 ||
		fmt.Sprint(atTeardown.Rubric.Status) != "satisfied" || atTeardown.Agent == nil {
		t.Fatalf("result.json at teardown lacks the agent or the rubric: %+v", atTeardown)
	}
	if got, want := stageList(atTeardown), "provision:ok sync:ok setup:ok agent:ok rubric:ok"; got != want {
		t.Errorf("stages in result.json at teardown: %s, want %s", got, want)
	}
	if atPublish == nil || atPublish.Teardown == nil || fmt.Sprint(atPublish.Teardown.Status) != "deleted" ||
		atPublish.Verdict != result.VerdictPass || atPublish.ExitCode != runner.ExitPass {
		t.Errorf("result.json when publishing: %+v, want the verdict and the teardown", atPublish)
	}
}
