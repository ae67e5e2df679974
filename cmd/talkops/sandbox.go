package main

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/reaper"
	"github.com/talkops/talkops/runner"
)

// SandboxCmd is `talkops sandbox ls|gc`: find and delete the sandboxes that killed runs
// left behind, through the reaper.ListerFunc the app binds.
type SandboxCmd struct {
	Ls sandboxLsCmd `cmd:"" help:"List sandboxes talkops created: the local ledger merged with what each provider reports."`
	Gc sandboxGcCmd `cmd:"" help:"Delete sandboxes left behind by killed runs (past their expiry, or older than --older-than with their talkops process gone)."`
}

// sandboxFlags are shared by ls and gc.
type sandboxFlags struct {
	Provider []string `name:"provider" short:"p" sep:"," placeholder:"NAME" help:"Only these providers (repeatable or comma-separated); default: the configured provider and those the ledger records sandboxes of (with --run-id, of that run only)."`
	JSON     bool     `name:"json" help:"Print JSON instead of a table."`
	StateDir string   `name:"state-dir" type:"path" placeholder:"DIR" help:"Ledger of created sandboxes (default: $XDG_STATE_HOME/talkops/sandboxes or ~/.local/state/talkops/sandboxes)."`
	RunID    string   `name:"run-id" placeholder:"ID" help:"Only the sandboxes of this run (result.json run.id)."`
}

type sandboxLsCmd struct {
	sandboxFlags
}

type sandboxGcCmd struct {
	sandboxFlags
	OlderThan time.Duration `name:"older-than" default:"1h" help:"Delete sandboxes at least this old whose talkops process is gone or that carry no expiry (sandboxes past their expiry go regardless). Default ${default}."`
	DryRun    bool          `name:"dry-run" help:"Report what would be deleted; delete nothing."`
}

func (f sandboxFlags) stateDir(a *app) string {
	return cmp.Or(f.StateDir, reaper.DefaultStateDir(a.getenv))
}

// listers builds the providers to ask: --provider's, or the configured one and those the
// ledger names (for --run-id, that run's only).
func (f sandboxFlags) listers(ctx context.Context, a *app, listers reaper.ListerFunc) (map[string]providers.Lister, error) {
	var ledger []string
	if len(f.Provider) == 0 {
		// A ledger that cannot be read is reported by the listing itself.
		ledger, _ = reaper.LedgerProviders(f.stateDir(a), f.RunID)
	}
	return listers(ctx, f.Provider, ledger)
}

// Run lists sandboxes. A provider that cannot be asked is reported after the table and
// makes the exit code 3; the other providers are still listed.
func (c *sandboxLsCmd) Run(ctx context.Context, a *app, listers reaper.ListerFunc) error {
	ls, err := c.listers(ctx, a, listers)
	if err != nil {
		return runner.Usagef("sandbox ls: %w", err)
	}
	defer func() { _ = reaper.CloseListers(ls) }() // only releases idle API connections once the work is done
	if err := reaper.PrintList(ctx, a.stdout, ls, c.stateDir(a), c.JSON, reaper.Options{RunID: c.RunID}); err != nil {
		return fmt.Errorf("sandbox ls: %w", err)
	}
	return nil
}

// Run deletes orphaned sandboxes and prints what it did.
func (c *sandboxGcCmd) Run(ctx context.Context, a *app, listers reaper.ListerFunc) error {
	if c.OlderThan < 0 {
		return runner.Usagef("sandbox gc: --older-than=%s: want a duration of 0 or more, such as 1h or 30m", c.OlderThan)
	}
	ls, err := c.listers(ctx, a, listers)
	if err != nil {
		return runner.Usagef("sandbox gc: %w", err)
	}
	defer func() { _ = reaper.CloseListers(ls) }() // only releases idle API connections once the work is done
	if err := reaper.PrintGC(ctx, a.stdout, ls, c.stateDir(a), c.OlderThan, c.DryRun, c.JSON, reaper.Options{RunID: c.RunID}); err != nil {
		return fmt.Errorf("sandbox gc: %w", err)
	}
	return nil
}
