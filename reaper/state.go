package reaper

import (
	"context"
	"slices"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
)

// DefaultStateDir is the ledger directory talkops runs record their sandboxes in.
func DefaultStateDir(getenv func(string) string) string { return state.DefaultDir(getenv) }

// StateLedger is the on-disk ledger in dir (providers/state).
func StateLedger(dir string) Ledger { return stateLedger(dir) }

type stateLedger string

func (d stateLedger) Entries() ([]state.Entry, error) { return state.List(string(d)) }

func (d stateLedger) Forget(provider, id string) error { return state.Remove(string(d), provider, id) }

func (d stateLedger) ForgetPending(provider, runID string, pid int) error {
	return state.RemovePending(string(d), provider, runID, pid)
}

// LedgerProviders lists, sorted, the providers the ledger in stateDir records sandboxes
// of: with runID, only those of that run. `sandbox gc --run-id` without --provider asks
// these, so it reaps a run's sandboxes whichever provider created them (a --sandbox the
// caller did not know about) and builds no provider the run never used (one that may
// need credentials the caller lacks).
func LedgerProviders(stateDir, runID string) ([]string, error) {
	entries, err := state.List(stateDir)
	var names []string
	for _, e := range entries {
		if (runID == "" || e.RunID == runID) && !slices.Contains(names, e.Provider) {
			names = append(names, e.Provider)
		}
	}
	slices.Sort(names)
	return names, err
}

// List merges the ledger in stateDir with what each lister reports; see ListLedger.
func List(ctx context.Context, listers map[string]providers.Lister, stateDir string, opts ...Options) ([]Entry, error) {
	return ListLedger(ctx, listers, StateLedger(stateDir), firstOptions(opts))
}

// GC deletes orphaned sandboxes and forgets ledger entries of sandboxes that are gone;
// see GCLedger and Decide.
func GC(ctx context.Context, listers map[string]providers.Lister, stateDir string, olderThan time.Duration, dryRun bool, opts ...Options) (Report, error) {
	return GCLedger(ctx, listers, StateLedger(stateDir), olderThan, dryRun, firstOptions(opts))
}

func firstOptions(opts []Options) Options {
	if len(opts) > 0 {
		return opts[0]
	}
	return Options{}
}
