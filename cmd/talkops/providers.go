package main

import (
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/providers/local"
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
		return local.New(local.Options{Getenv: getenv}), capabilities{}, nil
	},
	fakeProviderName: func(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
		p, err := fake.FromEnv(getenv)
		if err != nil {
			return nil, capabilities{}, usageErr(err)
		}
		return p, capabilities{attach: true, ownFilesystem: true}, nil
	},
	bwrap.Name: func(cfg *config.Config, getenv func(string) string) (providers.Provider, capabilities, error) {
		var opts bwrap.Options
		if err := decodeProviderTable(cfg, bwrap.Name, &opts); err != nil {
			return nil, capabilities{}, err
		}
		if err := opts.Validate(); err != nil {
			return nil, capabilities{}, usageErr(err)
		}
		return bwrap.New(opts), capabilities{attach: true, ownFilesystem: true}, nil
	},
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
