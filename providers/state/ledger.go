package state

import (
	"os"
	"time"

	"github.com/talkops/talkops/providers"
)

// Ledger records the sandboxes one run creates, so that `talkops sandbox gc` finds what a
// SIGKILLed run left behind, and forgets each once it is deleted (the runner's Ledger).
type Ledger struct {
	Dir        string // the state directory (DefaultDir)
	Provider   string
	ProjectDir string
}

// Record notes a created sandbox with this process's pid and the spec's expiry label.
func (l *Ledger) Record(sb providers.Sandbox, spec providers.Spec) error {
	e := Entry{
		Provider:   l.Provider,
		ID:         sb.ID(),
		RunID:      spec.RunID,
		CreatedAt:  time.Now().UTC(),
		ProjectDir: l.ProjectDir,
		PID:        os.Getpid(),
	}
	if exp, err := time.Parse(time.RFC3339, spec.Labels[providers.LabelExpiresAt]); err == nil {
		e.ExpiresAt = exp
	}
	return Record(l.Dir, e)
}

// Forget removes a deleted sandbox's entry.
func (l *Ledger) Forget(sb providers.Sandbox) error {
	return Remove(l.Dir, l.Provider, sb.ID())
}
