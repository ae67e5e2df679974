package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/agentcore"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/docker"
	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/providers/langsmith"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/providers/modal"
	"github.com/talkops/talkops/providers/plugin"
	"github.com/talkops/talkops/providers/runloop"
	"github.com/talkops/talkops/providers/state"
	"github.com/talkops/talkops/providers/vercel"
)

// capabilities say which flags make sense for a provider, so they are rejected before
// anything is provisioned.
type capabilities struct {
	attach          bool // --sandbox-id
	snapshot        bool // --sandbox-snapshot-name
	defaultSnapshot bool // the seeds' default snapshot name applies
	ownFilesystem   bool // the workspace must be synced in
}

// providerMaker builds a provider from the resolved configuration.
type providerMaker func(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error)

// fakeProviderName is the test-only provider: accepted only when
// TALKOPS_TEST_FAKE_PROVIDER=1, never listed in help.
const fakeProviderName = "fake"

// providerNamesFor lists the providers this environment may use.
func providerNamesFor(getenv func(string) string) []string {
	names := providerNames()
	if getenv(fake.EnvEnable) == "1" {
		names = append(names, fakeProviderName)
	}
	return names
}

// providerMakers is the one place that maps --sandbox names to providers.
var providerMakers = map[string]providerMaker{
	local.Name: func(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
		var opts struct{}
		if err := decodeProviderTable(cfg, local.Name, &opts); err != nil {
			return nil, capabilities{}, err
		}
		// The agent's commands run as this user: they must not read our environment
		// through /proc. Failing to is no reason to stop; local is for trusted code.
		_ = local.MarkNonDumpable()
		// Recorded process groups let `sandbox gc` kill what a SIGKILLed run left.
		return local.New(local.Options{Getenv: getenv, StateDir: local.DefaultStateDir(getenv)}), capabilities{}, nil
	},
	fakeProviderName: func(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
		p, err := fake.FromEnv(getenv)
		if err != nil {
			return nil, capabilities{}, usageErr(err)
		}
		return p, capabilities{attach: true, ownFilesystem: true}, nil
	},
	docker.Name: func(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
		var opts docker.Options
		if err := decodeProviderTable(cfg, docker.Name, &opts); err != nil {
			return nil, capabilities{}, err
		}
		opts.WorkingDir = workingDir(cfg, docker.Name)
		if opts.Image == "" && cfg.IsSet(config.KeyImage) {
			opts.Image = cfg.Sandbox.Image // TALKOPS_SANDBOX_IMAGE or [sandboxes] image, set on purpose
		}
		if err := opts.Validate(); err != nil {
			return nil, capabilities{}, usageErr(err)
		}
		return docker.New(opts), capabilities{attach: true, snapshot: true, ownFilesystem: true}, nil
	},
	agentcore.Name: newAgentCore,
	daytona.Name:   newDaytona,
	vercel.Name:    newVercel,
	runloop.Name:   newRunloop,
	langsmith.Name: newLangSmith,
	modal.Name:     newModal,
	bwrap.Name: func(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
		var opts bwrap.Options
		if err := decodeProviderTable(cfg, bwrap.Name, &opts); err != nil {
			return nil, capabilities{}, err
		}
		opts.WorkingDir = workingDir(cfg, bwrap.Name)
		// Sandboxes live next to the ledger: per user and per state root, so ls and gc
		// see this user's sandboxes and never another user's or another root's.
		opts.StateDir = state.ProviderDir(getenv, bwrap.Name)
		if err := opts.Validate(); err != nil {
			return nil, capabilities{}, usageErr(err)
		}
		return bwrap.New(opts), capabilities{attach: true, ownFilesystem: true}, nil
	},
}

// lookupProvider finds a provider's constructor; an unknown name (or the test-only fake
// outside tests) is a usage error listing the valid ones.
func lookupProvider(cfg *config.Config, name string, getenv func(string) string) (providerMaker, error) {
	valid := providerNamesFor(getenv)
	if t, ok := cfg.Providers[name]; ok && t.Plugin {
		return newPluginProvider(name), nil
	}
	valid = append(valid, configuredPlugins(cfg)...)
	newProvider, ok := providerMakers[name]
	if !ok || !slices.Contains(valid, name) {
		if near := config.Suggest(name, valid); near != "" {
			return nil, usagef("unknown sandbox provider %q, did you mean %s? (valid: %s)", name, near, strings.Join(valid, ", "))
		}
		return nil, usagef("unknown sandbox provider %q (valid: %s)", name, strings.Join(valid, ", "))
	}
	return newProvider, nil
}

// configuredPlugins lists the custom providers of the user config, sorted.
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

// workingDir is [sandboxes.providers.NAME] working_dir, or "" for the provider's default.
func workingDir(cfg *config.Config, name string) string {
	return cfg.Providers[name].WorkingDir
}

// decodeProviderTable decodes [sandboxes.providers.NAME] into v; unknown keys are
// errors naming the file and line.
func decodeProviderTable(cfg *config.Config, name string, v any) error {
	t, ok := cfg.Providers[name]
	if !ok {
		return nil
	}
	return t.Decode(v)
}

// listers builds the providers that can list what talkops created, for
// `talkops sandbox ls|gc`: the named ones, or every one that can list.
func (a *app) listers(ctx context.Context, names []string) (map[string]providers.Lister, error) {
	cfg, err := config.Load(config.Options{Getenv: a.getenv, WorkDir: a.workDir, HomeDir: a.getenv("HOME"),
		Providers: providerNamesFor(a.getenv)})
	if err != nil {
		return nil, err
	}
	all := len(names) == 0
	if all {
		// The configured provider and every provider the ledger names: asking an engine
		// this machine never used (a Docker daemon that is not there) is only noise.
		names = []string{cfg.Sandbox.Provider}
		entries, _ := state.List(state.DefaultDir(a.getenv))
		for _, e := range entries {
			if !slices.Contains(names, e.Provider) {
				names = append(names, e.Provider)
			}
		}
	}
	out := map[string]providers.Lister{}
	for _, name := range names {
		newProvider, err := lookupProvider(cfg, name, a.getenv)
		if err != nil {
			return nil, err
		}
		p, _, err := newProvider(cfg, a.getenv)
		if err != nil {
			return nil, err
		}
		l, ok := p.(providers.Lister)
		if pp, isPlugin := p.(*plugin.Provider); isPlugin {
			// A plugin says whether it can list only once it runs.
			caps, err := pp.Capabilities(ctx)
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
