package state

import (
	"os"
	"sync"
	"time"

	"github.com/talkops/talkops/providers"
)

// Ledger records the sandboxes one run creates, so that `talkops sandbox gc` finds what a
// SIGKILLed run left behind, and forgets each once it is deleted (the runner's Ledger).
type Ledger struct {
	Dir        string // the state directory (DefaultDir)
	Provider   string
	ProjectDir string

	mu sync.Mutex
	// pendingRun is the run id of the pending entry this process wrote and has not
	// dropped yet: one a failed Record leaves stays until the sandbox is forgotten.
	pendingRun string
}

// Pending notes, before the create is sent, that this process asks the provider for a
// sandbox of spec's run: if the process dies before Record, gc knows that the run's
// sandboxes (found by their run-id label) belong to a dead process. A spec without a run
// id has no label to be found by, so nothing is written.
func (l *Ledger) Pending(spec providers.Spec) error {
	if spec.RunID == "" {
		return nil
	}
	e := l.entry(spec)
	e.Pending = true
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := Record(l.Dir, e); err != nil {
		return err
	}
	l.pendingRun = spec.RunID
	return nil
}

// DropPending removes the pending entry of a create that failed.
func (l *Ledger) DropPending(spec providers.Spec) error {
	if spec.RunID == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropPending(spec.RunID)
}

func (l *Ledger) dropPending(runID string) error {
	if err := RemovePending(l.Dir, l.Provider, runID, os.Getpid()); err != nil {
		return err
	}
	if l.pendingRun == runID {
		l.pendingRun = ""
	}
	return nil
}

// Record notes a created sandbox with this process's pid and the spec's expiry label, and
// then drops the create's pending entry (in that order, so some entry always names the
// run).
func (l *Ledger) Record(sb providers.Sandbox, spec providers.Spec) error {
	e := l.entry(spec)
	e.ID = sb.ID()
	if err := Record(l.Dir, e); err != nil {
		return err
	}
	return l.DropPending(spec)
}

func (l *Ledger) entry(spec providers.Spec) Entry {
	e := Entry{
		Provider:   l.Provider,
		RunID:      spec.RunID,
		CreatedAt:  time.Now().UTC(),
		ProjectDir: l.ProjectDir,
		PID:        os.Getpid(),
		Host:       hostname(),
	}
	if exp, err := time.Parse(time.RFC3339, spec.Labels[providers.LabelExpiresAt]); err == nil {
		e.ExpiresAt = exp
	}
	return e
}

// Forget removes a deleted sandbox's entry, and the pending entry of its create if a
// failed Record left it.
func (l *Ledger) Forget(sb providers.Sandbox) error {
	if err := Remove(l.Dir, l.Provider, sb.ID()); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pendingRun == "" {
		return nil
	}
	return l.dropPending(l.pendingRun)
}

// hostname is this host's name, "" when unknown (the reader's host, then).
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}
