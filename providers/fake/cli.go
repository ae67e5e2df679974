package fake

import (
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/builtin"
	"github.com/talkops/talkops/runner"
)

// CLIProviders is what a test build of the CLI adds to its providers: the fake, built
// from the environment (EnvDir, EnvLedger, EnvFaults), when EnvEnable is "1"; nothing
// otherwise. Release builds never link this package.
func CLIProviders(getenv func(string) string) builtin.Registry {
	if getenv(EnvEnable) != "1" {
		return nil
	}
	return builtin.Registry{Name: func(_ *config.Config, getenv func(string) string) (providers.Provider, error) {
		p, err := FromEnv(getenv)
		if err != nil {
			return nil, &runner.UsageError{Err: err}
		}
		return p, nil
	}}
}
