package session_test

import (
	"errors"
	"testing"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/agent/session"
	"github.com/talkops/talkops/runner"
)

// New rejects what the agent would reject, before any sandbox exists, as a usage error;
// Record before any pass shows the judge the prompt alone.
func TestNewValidatesWithoutASandbox(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(modeltest.Script{})
	defer srv.Close()
	m, err := model.New("openai:my-finetune", srv.OpenAIURL(), func(string) string { return "k" })
	if err != nil {
		t.Fatal(err)
	}
	bad := agent.Options{Model: m, Approval: agent.Approval{Mode: agent.ModeSmart, Deny: []string{" "}}}
	var ue *runner.UsageError
	if _, err := session.New(session.Options{Prompt: "p", Agent: bad}); !errors.As(err, &ue) || !errors.Is(err, agent.ErrConfig) {
		t.Errorf("empty deny pattern: err = %v, want a usage error wrapping agent.ErrConfig", err)
	}
	if _, err := session.New(session.Options{Prompt: "p", Agent: agent.Options{Model: m, MaxCostUSD: 3}}); !errors.As(err, &ue) {
		t.Errorf("cost cap on an unpriced model: err = %v, want a usage error", err)
	}
	s, err := session.New(session.Options{Prompt: "fix the build", Agent: agent.Options{Model: m}})
	if err != nil {
		t.Fatal(err)
	}
	if rec := s.Record(1); rec.Prompt != "fix the build" || rec.FinalMessage != "" || len(rec.Commands) != 0 {
		t.Errorf("Record before a pass = %+v, want the prompt only", rec)
	}
}
