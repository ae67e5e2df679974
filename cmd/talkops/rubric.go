package main

import (
	"context"
	"errors"
	"time"

	"github.com/talkops/talkops/changeset"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

// rubricRunner adapts a parsed rubric to the runner: each iteration runs the rubric's
// evaluator (checks, then the judge for criteria, then the protected-path comparison) in
// the run's sandbox.
type rubricRunner struct {
	r       *rubric.Rubric
	checker rubric.Checker
	judge   rubric.Judge // nil when the rubric has no criteria
	maxIter int
	session *session // nil in a checks-only run
	sink    events.Sink
	// host is the run's host-side workspace record (nil in a checks-only run): the
	// judge's diff and the protected-path comparison come from it, never from the sandbox.
	host *changeset.Recorder
}

var _ runner.Rubric = (*rubricRunner)(nil)

func (c *rubricRunner) Describe() result.Rubric {
	rec := c.r.Record(nil)
	rec.Status = ""
	return *rec
}

func (c *rubricRunner) Evaluate(ctx context.Context, sb providers.Sandbox, in runner.EvalInput) (runner.Evaluation, error) {
	ev := &rubric.Evaluator{
		Rubric: c.r, Sandbox: sb, Sink: in.Sink, Checker: c.checker, Judge: c.judge,
		MaxIterations: c.maxIter,
	}
	if c.host != nil {
		ev.Workspace = c.host
		ev.Baseline = c.host.BaselineDigests()
		ev.ProtectedNow = c.host.LatestDigests
		if ev.Baseline == nil { // the runner stops before the rubric when it could not record one
			ev.Baseline = map[string]string{}
			ev.ProtectedNow = func(context.Context) (map[string]string, error) {
				return nil, errors.New("the runner recorded no baseline of the workspace")
			}
		}
	}
	if c.session != nil {
		ev.Agent = c.session.agentRecord
	} else {
		ev.Agent = func(int) rubric.AgentRecord { return rubric.AgentRecord{Prompt: in.Prompt} }
	}
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

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
