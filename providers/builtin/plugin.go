package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/plugin"
)

// pluginTable is a custom provider's [sandboxes.providers.NAME] table (besides
// working_dir). The config package only accepts it from the user's own config file.
type pluginTable struct {
	Command []string       `toml:"command"`
	Backend string         `toml:"backend"`
	Options map[string]any `toml:"options"`
	// CreateTimeout and CallTimeout bound create/attach and every other call but exec;
	// left out, they keep the defaults (5 min, 2 min); set, they must be positive.
	CreateTimeout time.Duration `toml:"create_timeout"`
	CallTimeout   time.Duration `toml:"call_timeout"`
}

// pluginMaker builds the custom provider name from its table: an executable (command), a
// Python SandboxBackendProtocol class served by the bridge (backend), or a Python
// provider registered by entry point under that name (neither).
func pluginMaker(name string) Maker {
	return func(cfg *config.Config, getenv func(string) string) (providers.Provider, error) {
		t := cfg.Providers[name]
		var tbl pluginTable
		if err := t.Decode(&tbl); err != nil {
			return nil, err
		}
		// 0 would silently mean the default: a timeout written down must be one.
		for _, timeout := range []struct {
			key string
			d   time.Duration
		}{{"create_timeout", tbl.CreateTimeout}, {"call_timeout", tbl.CallTimeout}} {
			if timeout.d <= 0 && t.Source(timeout.key) != "" {
				return nil, t.Errorf(timeout.key, "is %s: want a positive duration like \"5m\", or leave it out for the default", timeout.d)
			}
		}
		opts := plugin.Options{Name: name, WorkingDir: t.WorkingDir, Options: tbl.Options, Env: PluginEnv(getenv),
			CreateTimeout: tbl.CreateTimeout, CallTimeout: tbl.CallTimeout}
		switch {
		case tbl.Command != nil && tbl.Backend != "":
			return nil, t.Errorf("backend", "set command (a plugin executable) or backend (a Python class), not both")
		case tbl.Command != nil:
			if len(tbl.Command) == 0 || tbl.Command[0] == "" {
				return nil, t.Errorf("command", `want the plugin's path and its arguments, like ["/usr/local/bin/acme-plugin", "--region", "eu"]`)
			}
			// A relative path would resolve against the project, which a pull request controls.
			if strings.Contains(tbl.Command[0], "/") && !filepath.IsAbs(tbl.Command[0]) {
				return nil, t.Errorf("command", "%q is a relative path: want an absolute path or a program name found on PATH", tbl.Command[0])
			}
			opts.Command = tbl.Command
		case tbl.Backend != "":
			module, class, ok := strings.Cut(tbl.Backend, ":")
			if !ok || module == "" || class == "" {
				return nil, t.Errorf("backend", `want "module:Class", like "my_org_sandbox.backend:AcmeSandboxBackend", got %q`, tbl.Backend)
			}
			opts.BridgeArgs = plugin.BackendArgs(tbl.Backend)
		default:
			opts.BridgeArgs = plugin.EntryPointArgs(name)
		}
		p, err := plugin.New(opts)
		if err != nil {
			return nil, usage(err)
		}
		return p, nil
	}
}

// PluginEnv is a plugin's environment: talkops' own, as for a built-in provider (a plugin
// is a trusted program that may need credentials), with the variables that locate
// programs and files taken from getenv.
func PluginEnv(getenv func(string) string) []string {
	env := os.Environ()
	for _, k := range []string{"PATH", "HOME", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "TMPDIR"} {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v) // a later entry wins
		}
	}
	return env
}

// LoadConfig loads the configuration with the registry's names valid for providers.
// When it names a provider that is neither in the registry nor configured, it asks the
// Python bridge whether an installed package registers that name by entry point (the
// seeds' talkops.sandbox_providers), and if so loads again with those names valid.
// Python only runs on this path, never for a known provider.
func (r Registry) LoadConfig(ctx context.Context, opts config.Options) (*config.Config, error) {
	opts.Providers = r.Names()
	cfg, err := config.Load(opts)
	var ce *config.Error
	if err == nil || !errors.As(err, &ce) || ce.ValidWhat != "providers" {
		return cfg, err
	}
	names, lerr := plugin.EntryPoints(ctx, "", PluginEnv(opts.Getenv))
	if lerr != nil || len(names) == 0 {
		return nil, err
	}
	opts.Providers = append(slices.Clone(opts.Providers), names...)
	cfg, err = config.Load(opts)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, ok := cfg.Providers[name]; !ok && !r.Has(name) {
			cfg.Providers[name] = config.ProviderTable{Name: name, Plugin: true}
		}
	}
	return cfg, nil
}
