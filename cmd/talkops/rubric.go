package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/talkops/talkops/changeset"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/workspace"
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
	host    *changeset.Recorder
	leftOut []result.LeftOut // what the workspace sync left out (listed part)
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
	c.warnLeftOut(&it, in.Sink)
	out := runner.Evaluation{Iteration: it}
	for _, item := range it.Items {
		out.Findings = append(out.Findings, item.Findings...)
	}
	if it.Status == result.RubricNeedsRevision {
		out.Revision = rubric.RevisionMessage(c.r, it)
	}
	return out, nil
}

// warnLeftOut flags failing checks whose output names a path the workspace sync left
// out: the likely cause of the failure is the sync, not the project. The note goes into
// the item's reason (result.json and every report) and a warning event.
func (c *rubricRunner) warnLeftOut(it *result.Iteration, sink events.Sink) {
	if len(c.leftOut) == 0 || it == nil {
		return
	}
	paths := make([]string, len(c.leftOut))
	reasons := map[string]string{}
	for i, l := range c.leftOut {
		paths[i], reasons[l.Path] = l.Path, l.Reason
	}
	for i := range it.Items {
		item := &it.Items[i]
		if item.Check == nil || item.Status != result.StatusFail && item.Status != result.StatusError {
			continue
		}
		named := workspace.Referenced(item.Check.StdoutTail+"\n"+item.Check.StderrTail, paths)
		if len(named) == 0 {
			continue
		}
		var parts []string
		for _, p := range named {
			parts = append(parts, fmt.Sprintf("%s (%s)", p, reasons[p]))
		}
		note := fmt.Sprintf("its output names %s, left out of the sandbox by the workspace sync; add it to [sandboxes.sync] include if the check needs it",
			strings.Join(parts, ", "))
		item.Reason = strings.TrimSpace(item.Reason + "; " + note)
		item.Reason = strings.TrimPrefix(item.Reason, "; ")
		if sink != nil {
			sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageRubric,
				Message: "check " + item.ID + " failed and " + note})
		}
	}
}
