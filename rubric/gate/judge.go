package gate

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/judge"
	"github.com/talkops/talkops/runner"
)

// ModelBuilder builds the model client for a spec and says how it is recorded; the
// composition root supplies it, so the gate does not decide how models are made.
type ModelBuilder func(spec string) (m model.Model, name string, err error)

// NewJudge builds the judge for a rubric's criteria. Its model is --rubric-model (or
// rubric.model), else the rubric's [judge] model, else the agent's model (agentModel, nil
// without an agent), with a warning. Its votes are the user's, else the rubric's.
// Mistakes are usage errors.
func NewJudge(cfg *config.Config, rb *rubric.Rubric, agentModel model.Model, agentSpec string,
	newModel ModelBuilder, redact func(string) string, sink events.Sink) (rubric.Judge, error) {
	spec := cmp.Or(cfg.Rubric.Model, rb.Judge.Model)
	m := agentModel
	if spec != "" || m == nil {
		var err error
		if m, spec, err = newModel(spec); err != nil {
			return nil, fmt.Errorf("judge model: %w", err)
		}
	} else {
		spec = agentSpec
		sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageRubric,
			Message: "the judge uses the agent's own model; a judge from another model family (--rubric-model) is less biased"})
	}
	votes := 0 // the rubric's [judge] votes, unless the user set one
	if cfg.IsSet(config.KeyRubricVotes) {
		votes = int(cfg.Rubric.Votes)
	}
	j, err := judge.New(judge.Options{Model: m, ModelName: spec, Votes: votes, Redact: redact, Sink: sink})
	if errors.Is(err, judge.ErrOptions) {
		return nil, &runner.UsageError{Err: err}
	}
	return j, err
}
