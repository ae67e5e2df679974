// Package gate runs a parsed rubric for the runner: each iteration evaluates the rubric
// (checks, then the judge for criteria, then the protected-path comparison) in the
// sandbox the runner hands it, and turns the outcome into the runner's Evaluation.
package gate

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

// Options build a Gate.
type Options struct {
	Rubric  *rubric.Rubric
	Checker rubric.Checker
	Judge   rubric.Judge // nil when the rubric has no criteria
	// MaxIterations bounds the evaluator's revision loop; 1 makes a failed evaluation
	// final (a run without an agent: nobody can revise).
	MaxIterations int
	// Agent is what the judge may see of the agent's passes so far; nil in a checks-only
	// run, where the judge sees the prompt only.
	Agent func(iteration int) rubric.AgentRecord
	// Workspace is the run's host-side workspace record (nil in a checks-only run): the
	// judge's diff and the protected-path comparison come from it, never from the sandbox.
	Workspace *changeset.Recorder
}

// Gate is the rubric of one run (runner.Rubric).
type Gate struct{ opts Options }

var _ runner.Rubric = (*Gate)(nil)

// New builds the gate.
func New(opts Options) *Gate { return &Gate{opts: opts} }

// Describe is the rubric as result.json lists it before any evaluation.
func (g *Gate) Describe() result.Rubric {
	rec := g.opts.Rubric.Record(nil)
	rec.Status = ""
	return *rec
}

// Evaluate runs one iteration of the rubric in sb.
func (g *Gate) Evaluate(ctx context.Context, sb providers.Sandbox, in runner.EvalInput) (runner.Evaluation, error) {
	ev := &rubric.Evaluator{
		Rubric: g.opts.Rubric, Sandbox: sb, Sink: in.Sink, Checker: g.opts.Checker, Judge: g.opts.Judge,
		MaxIterations: g.opts.MaxIterations, Agent: g.opts.Agent,
	}
	if ev.Agent == nil {
		ev.Agent = func(int) rubric.AgentRecord { return rubric.AgentRecord{Prompt: in.Prompt} }
	}
	if host := g.opts.Workspace; host != nil {
		ev.Workspace = host
		ev.Baseline = host.BaselineDigests()
		ev.ProtectedNow = host.LatestDigests
		if ev.Baseline == nil { // the runner stops before the rubric when it could not record one
			ev.Baseline = map[string]string{}
			ev.ProtectedNow = func(context.Context) (map[string]string, error) {
				return nil, errors.New("the runner recorded no baseline of the workspace")
			}
		}
	}
	it := ev.Evaluate(ctx, in.Iteration)
	if in.Sync != nil {
		warnLeftOut(&it, in.Sync.LeftOut, in.Sink)
	}
	out := runner.Evaluation{Iteration: it}
	for _, item := range it.Items {
		out.Findings = append(out.Findings, item.Findings...)
	}
	if it.Status == result.RubricNeedsRevision {
		out.Revision = rubric.RevisionMessage(g.opts.Rubric, it)
	}
	return out, nil
}

// warnLeftOut flags failing checks whose output names a path the workspace sync left
// out: the likely cause of the failure is the sync, not the project. The note goes into
// the item's reason (result.json and every report) and a warning event.
func warnLeftOut(it *result.Iteration, leftOut []result.LeftOut, sink events.Sink) {
	if len(leftOut) == 0 || it == nil {
		return
	}
	paths := make([]string, len(leftOut))
	reasons := map[string]string{}
	for i, l := range leftOut {
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
