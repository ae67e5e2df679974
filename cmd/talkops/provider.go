package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/contract"
	"github.com/talkops/talkops/runner"
)

// ProviderCmd is `talkops provider test NAME`: check a provider against the sandbox
// contract, for plugin authors and for anyone configuring a built-in.
type ProviderCmd struct {
	Test providerTestCmd `cmd:"" help:"Run the sandbox contract checks against a configured provider (built-in or custom) and print which guarantees hold. Creates and deletes real sandboxes. Exit 0 when all hold, 1 when one does not."`
}

type providerTestCmd struct {
	Name string   `arg:"" help:"Provider: a built-in or a custom [sandboxes.providers.NAME] from ~/.talkops/config.toml."`
	Only []string `name:"only" sep:"," placeholder:"CHECK" help:"Only these checks (repeatable or comma-separated)."`
}

// Run runs the checks one after the other and prints a line per guarantee.
func (c *providerTestCmd) Run(ctx context.Context, a *app) error {
	// The name is checked like --sandbox NAME, entry points included.
	cfg, err := a.providers.LoadConfig(ctx, a.configOptions(
		map[string]string{"sandboxes.default": c.Name}, map[string]string{"sandboxes.default": "provider test NAME"}))
	if err != nil {
		return err
	}
	newProvider, err := a.providers.Lookup(cfg, c.Name)
	if err != nil {
		return err
	}
	var names []string
	for _, cs := range contract.Cases() {
		names = append(names, cs.Name)
	}
	for _, o := range c.Only {
		if !slices.Contains(names, o) {
			return runner.Usagef("--only: unknown check %q (valid: %s)", o, strings.Join(names, ", "))
		}
	}
	build := func() (providers.Provider, error) { return newProvider(cfg, a.getenv) }
	if _, err := build(); err != nil {
		return err // a configuration mistake, before any check runs
	}
	maker := func(context.Context, contract.T) (contract.Harness, error) {
		return &contract.Configured{Name: c.Name, WorkingDir: cfg.Providers[c.Name].WorkingDir, New: build}, nil
	}
	fmt.Fprintf(a.stdout, "Checking the %s provider against the sandbox contract (this creates and deletes sandboxes)\n", c.Name)
	results := contract.Check(ctx, maker, c.Only...)
	failed := contract.Report(a.stdout, c.Name, results)
	if in, ok := errors.AsType[*runner.Interrupted](context.Cause(ctx)); ok {
		return exit.Reported(in.ExitCode(), in)
	}
	if failed > 0 {
		return exit.Reported(1, fmt.Errorf("%d of %d contract checks failed for %s", failed, len(results), c.Name))
	}
	return nil
}
