package runner_test

import (
	"context"
	"testing"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// syncSeeingRubric records the sync record each evaluation was given.
type syncSeeingRubric struct{ seen []*result.Sync }

func (r *syncSeeingRubric) Describe() result.Rubric { return result.Rubric{} }
func (r *syncSeeingRubric) Evaluate(_ context.Context, _ providers.Sandbox, in runner.EvalInput) (runner.Evaluation, error) {
	r.seen = append(r.seen, in.Sync)
	return runner.Evaluation{Iteration: result.Iteration{Status: result.RubricSatisfied}}, nil
}

// The rubric learns what the workspace sync left out from the runner, not from a value
// patched into it after construction.
func TestRubricSeesTheSyncRecord(t *testing.T) {
	t.Parallel()
	opts := baseOptions(t)
	sent := &result.Sync{Files: 3, LeftOut: []result.LeftOut{{Path: "data/big.bin", Reason: "too_large"}}}
	opts.Sync = func(context.Context, providers.Sandbox, events.Sink) (*result.Sync, error) { return sent, nil }
	rb := &syncSeeingRubric{}
	opts.Rubric = rb
	res := runner.Run(t.Context(), opts)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d (%s), want 0", res.ExitCode, res.Reason)
	}
	if len(rb.seen) != 1 || rb.seen[0] != sent {
		t.Errorf("the rubric saw sync records %v, want the one the syncer returned", rb.seen)
	}

	opts = baseOptions(t)
	rb = &syncSeeingRubric{}
	opts.Rubric = rb
	runner.Run(t.Context(), opts)
	if len(rb.seen) != 1 || rb.seen[0] != nil {
		t.Errorf("without a sync the rubric saw %v, want nil", rb.seen)
	}
}
