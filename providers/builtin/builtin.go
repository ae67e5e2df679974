// Package builtin maps the provider names users type (--sandbox NAME,
// [sandboxes.providers.NAME]) to providers built from the resolved configuration: the
// built-in providers and the custom ones (plugins) of the user's config.
//
// A provider's table decodes straight into its Options (its toml tags are the keys users
// write; transport hooks are toml:"-"), and each provider states its own capabilities
// (providers.Capabilities), so nothing here knows what a provider can do.
package builtin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/agentcore"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/docker"
	"github.com/talkops/talkops/providers/langsmith"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/providers/modal"
	"github.com/talkops/talkops/providers/runloop"
	"github.com/talkops/talkops/providers/state"
	"github.com/talkops/talkops/providers/vercel"
	"github.com/talkops/talkops/runner"
)

// Maker builds a provider from the resolved configuration. A mistake in its table is an
// error naming the file and line; nothing is created.
type Maker func(cfg *config.Config, getenv func(string) string) (providers.Provider, error)

// Registry maps provider names to their makers.
type Registry map[string]Maker

// Providers is the release set: every provider talkops ships.
func Providers() Registry {
	return Registry{
		local.Name:     newLocal,
		docker.Name:    newDocker,
		bwrap.Name:     newBwrap,
		agentcore.Name: newAgentCore,
		daytona.Name:   cloud(daytona.Name, daytona.New),
		vercel.Name:    cloud(vercel.Name, vercel.New),
		runloop.Name:   cloud(runloop.Name, runloop.New),
		langsmith.Name: newLangSmith,
		modal.Name:     newModal,
	}
}

// With returns a copy of r with more providers (tests add their fakes).
func (r Registry) With(more Registry) Registry {
	out := maps.Clone(r)
	maps.Copy(out, more)
	return out
}

// Names lists the registry's providers, sorted.
func (r Registry) Names() []string {
	return slices.Sorted(maps.Keys(r))
}

// Has reports whether name is one of the registry's providers.
func (r Registry) Has(name string) bool {
	_, ok := r[name]
	return ok
}

// Lookup finds the maker for name: a custom provider of the configuration, or one of the
// registry's. An unknown name is a usage error listing the valid ones.
func (r Registry) Lookup(cfg *config.Config, name string) (Maker, error) {
	if t, ok := cfg.Providers[name]; ok && t.Plugin {
		return pluginMaker(name), nil
	}
	if mk, ok := r[name]; ok {
		return mk, nil
	}
	valid := append(r.Names(), configuredPlugins(cfg)...)
	if near := config.Suggest(name, valid); near != "" {
		return nil, runner.Usagef("unknown sandbox provider %q, did you mean %s? (valid: %s)", name, near, strings.Join(valid, ", "))
	}
	return nil, runner.Usagef("unknown sandbox provider %q (valid: %s)", name, strings.Join(valid, ", "))
}

// Build looks name up and builds its provider.
func (r Registry) Build(cfg *config.Config, name string, getenv func(string) string) (providers.Provider, error) {
	mk, err := r.Lookup(cfg, name)
	if err != nil {
		return nil, err
	}
	return mk(cfg, getenv)
}

// Listers builds the providers that can list what talkops created, for `talkops sandbox
// ls|gc`: the named ones (one that cannot list is an error), or, when names is empty, the
// configured provider and the ledger's (the providers the caller's sandbox ledger records
// sandboxes of), skipping those that cannot list.
func (r Registry) Listers(ctx context.Context, cfg *config.Config, names, ledger []string, getenv func(string) string) (map[string]providers.Lister, error) {
	all := len(names) == 0
	if all {
		// Asking an engine this machine never used (a Docker daemon that is not there)
		// is only noise.
		names = []string{cfg.Sandbox.Provider}
		for _, name := range ledger {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	out := map[string]providers.Lister{}
	for _, name := range names {
		p, err := r.Build(cfg, name, getenv)
		if err != nil {
			return nil, err
		}
		l, ok := p.(providers.Lister)
		if pr, isProber := p.(providers.Prober); ok && isProber {
			// A plugin says whether it can list only once it runs.
			caps, err := pr.Probe(ctx)
			if err != nil {
				return nil, err
			}
			ok = caps.List
		}
		if !ok {
			if !all {
				return nil, fmt.Errorf("the %s provider cannot list its sandboxes", name)
			}
			continue
		}
		out[name] = l
	}
	return out, nil
}

// configuredPlugins lists the custom providers of the configuration, sorted.
func configuredPlugins(cfg *config.Config) []string {
	var names []string
	for name, t := range cfg.Providers {
		if t.Plugin {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// decode decodes [sandboxes.providers.NAME] into opts; unknown keys are errors naming the
// file and line. working_dir, common to every provider, is returned apart: it reaches
// the provider through Spec.WorkDir, and its options where they have the field.
func decode(cfg *config.Config, name string, opts any) (workingDir string, err error) {
	t, ok := cfg.Providers[name]
	if !ok {
		return "", nil
	}
	return t.WorkingDir, t.Decode(opts)
}

// usage marks a provider's own validation error as a usage error (exit 2).
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &runner.UsageError{Err: err}
}

func newLocal(cfg *config.Config, getenv func(string) string) (providers.Provider, error) {
	var opts struct{}
	if _, err := decode(cfg, local.Name, &opts); err != nil {
		return nil, err
	}
	// The agent's commands run as this user: they must not read our environment
	// through /proc. Failing to is no reason to stop; local is for trusted code.
	_ = local.MarkNonDumpable()
	// Recorded process groups let `sandbox gc` kill what a SIGKILLed run left.
	return local.New(local.Options{Getenv: getenv, StateDir: local.DefaultStateDir(getenv)}), nil
}

func newDocker(cfg *config.Config, _ func(string) string) (providers.Provider, error) {
	var opts docker.Options
	wd, err := decode(cfg, docker.Name, &opts)
	if err != nil {
		return nil, err
	}
	opts.WorkingDir = wd
	if opts.Image == "" && cfg.IsSet(config.KeyImage) {
		opts.Image = cfg.Sandbox.Image // TALKOPS_SANDBOX_IMAGE or [sandboxes] image, set on purpose
	}
	if err := opts.Validate(); err != nil {
		return nil, usage(err)
	}
	return docker.New(opts), nil
}

func newBwrap(cfg *config.Config, getenv func(string) string) (providers.Provider, error) {
	var opts bwrap.Options
	wd, err := decode(cfg, bwrap.Name, &opts)
	if err != nil {
		return nil, err
	}
	opts.WorkingDir = wd
	// Sandboxes live next to the ledger: per user and per state root, so ls and gc see
	// this user's sandboxes and never another user's or another root's.
	opts.StateDir = state.ProviderDir(getenv, bwrap.Name)
	if err := opts.Validate(); err != nil {
		return nil, usage(err)
	}
	return bwrap.New(opts), nil
}

// cloud makes the maker of a cloud provider whose options need nothing but its table.
// working_dir reaches it through Spec.WorkDir.
func cloud[O any, P providers.Provider](name string, newProvider func(O, func(string) string) (P, error)) Maker {
	return func(cfg *config.Config, getenv func(string) string) (providers.Provider, error) {
		var opts O
		if _, err := decode(cfg, name, &opts); err != nil {
			return nil, err
		}
		return built(newProvider(opts, getenv))
	}
}

// built keeps a failed constructor's nil provider a nil interface.
func built[P providers.Provider](p P, err error) (providers.Provider, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

func newLangSmith(cfg *config.Config, getenv func(string) string) (providers.Provider, error) {
	var opts langsmith.Options
	if _, err := decode(cfg, langsmith.Name, &opts); err != nil {
		return nil, err
	}
	// The seeds' default snapshot is built from [sandboxes] image when it is missing.
	opts.SnapshotImage = cfg.Sandbox.Image
	return built(langsmith.New(opts, getenv))
}

func newAgentCore(cfg *config.Config, getenv func(string) string) (providers.Provider, error) {
	var opts agentcore.Options
	wd, err := decode(cfg, agentcore.Name, &opts)
	if err != nil {
		return nil, err
	}
	opts.WorkingDir = wd
	return built(agentcore.New(opts, getenv))
}

func newModal(cfg *config.Config, getenv func(string) string) (providers.Provider, error) {
	var opts modal.Options
	wd, err := decode(cfg, modal.Name, &opts)
	if err != nil {
		return nil, err
	}
	opts.WorkingDir = wd
	return built(modal.New(opts, getenv))
}

// Snapshot checks the sandbox flags against what the configured provider can do, before
// anything is provisioned, and returns the snapshot a new sandbox starts from ("": the
// provider's default). The seeds' default snapshot name only applies to providers that
// have one; a snapshot or an attach id the provider cannot honour is a usage error.
func Snapshot(cfg *config.Config, caps providers.Capabilities) (string, error) {
	name, snapshot := cfg.Sandbox.Provider, cfg.Sandbox.Snapshot
	if !cfg.IsSet(config.KeySnapshotName) && !caps.DefaultSnapshot {
		snapshot = ""
	}
	if snapshot != "" && !caps.Snapshot {
		return "", runner.Usagef("--sandbox-snapshot-name: the %s provider cannot start from a snapshot (from %s)",
			name, cfg.Source(config.KeySnapshotName))
	}
	if cfg.Sandbox.ID != "" && !caps.Attach {
		return "", runner.Usagef("--sandbox-id: the %s provider cannot attach to a running sandbox (from %s)",
			name, cfg.Source(config.KeySandboxID))
	}
	return snapshot, nil
}
