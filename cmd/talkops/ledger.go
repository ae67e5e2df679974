package main

import (
	"os"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
	"github.com/talkops/talkops/runner"
)

// stateLedger records created sandboxes in the local state directory, so that
// `talkops sandbox gc` finds what a SIGKILLed run left behind.
type stateLedger struct {
	dir, provider, projectDir string
}

var _ runner.Ledger = (*stateLedger)(nil)

func newLedger(provider string, getenv func(string) string, projectDir string) *stateLedger {
	return &stateLedger{dir: state.DefaultDir(getenv), provider: provider, projectDir: projectDir}
}

func (l *stateLedger) Record(sb providers.Sandbox, spec providers.Spec) error {
	e := state.Entry{
		Provider:   l.provider,
		ID:         sb.ID(),
		RunID:      spec.RunID,
		CreatedAt:  time.Now().UTC(),
		ProjectDir: l.projectDir,
		PID:        os.Getpid(),
	}
	if exp, err := time.Parse(time.RFC3339, spec.Labels[providers.LabelExpiresAt]); err == nil {
		e.ExpiresAt = exp
	}
	return state.Record(l.dir, e)
}

func (l *stateLedger) Forget(sb providers.Sandbox) error {
	return state.Remove(l.dir, l.provider, sb.ID())
}
