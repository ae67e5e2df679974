package main

import (
	"context"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

// checksRubric adapts a parsed rubric to the runner: each iteration runs the rubric's
// evaluator in the run's sandbox.
type checksRubric struct {
	r       *rubric.Rubric
	checker rubric.Checker
	maxIter int
}

var _ runner.Rubric = (*checksRubric)(nil)

func (c *checksRubric) Describe() result.Rubric {
	rec := c.r.Record(nil)
	rec.Status = ""
	return *rec
}

func (c *checksRubric) Evaluate(ctx context.Context, sb providers.Sandbox, in runner.EvalInput) (runner.Evaluation, error) {
	ev := &rubric.Evaluator{Rubric: c.r, Sandbox: sb, Sink: in.Sink, Checker: c.checker, MaxIterations: c.maxIter}
	it := ev.Evaluate(ctx, in.Iteration)
	out := runner.Evaluation{Iteration: it}
	for _, item := range it.Items {
		out.Findings = append(out.Findings, item.Findings...)
	}
	if it.Status == rubric.StatusNeedsRevision {
		out.Revision = rubric.RevisionMessage(c.r, it)
	}
	return out, nil
}
