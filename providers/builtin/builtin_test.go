package builtin_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/builtin"
	"github.com/talkops/talkops/runner"
)

// load resolves the configuration of a project whose user config is userTOML.
func load(t *testing.T, userTOML string) *config.Config {
	t.Helper()
	home, project := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".talkops"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".talkops", "config.toml"), []byte(userTOML), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(project, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "XDG_STATE_HOME": filepath.Join(home, "state")}
	cfg, err := config.Load(config.Options{Getenv: func(k string) string { return env[k] }, WorkDir: project, HomeDir: home,
		Providers: builtin.Providers().Names()})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The keys of each cloud provider's table are the ones users wrote before the table
// decoded straight into the provider's Options: a transport hook is not a key, and an
// unknown key names the file and line and lists exactly these.
func TestTableKeysUnchanged(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"daytona":   {"api_url", "target", "image", "cpu", "memory_gb", "disk_gb", "auto_stop_minutes", "ready_timeout"},
		"vercel":    {"api_url", "runtime", "image", "vcpus", "region", "timeout", "ready_timeout"},
		"runloop":   {"api_url", "resource_size", "architecture", "keep_alive", "ready_timeout"},
		"langsmith": {"api_url", "vcpus", "memory_bytes", "disk_bytes", "command_limit", "ready_timeout", "build_timeout"},
		"modal":     {"server_url", "environment", "app_name", "image", "ready_timeout"},
	}
	for name, keys := range want {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := load(t, "[sandboxes.providers."+name+"]\n"+keys[0]+" = \"http://127.0.0.1:1\"\nhttpclient = 1\n")
			_, err := builtin.Providers()[name](cfg, func(string) string { return "" })
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("httpclient key: err = %v, want a *config.Error", err)
			}
			if !slices.Equal(ce.Valid, keys) || !strings.Contains(err.Error(), "config.toml:3") {
				t.Errorf("error %q lists %q, want the file and line 3 and %q", err, ce.Valid, keys)
			}
		})
	}
}

// Each provider states what it can do; the CLI's flag checks and clean-room choice rely
// on these.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	cfg := load(t, "")
	env := map[string]string{
		"DAYTONA_API_KEY": "k", "VERCEL_TOKEN": "t", "VERCEL_TEAM_ID": "team", "VERCEL_PROJECT_ID": "p",
		"RUNLOOP_API_KEY": "k", "LANGSMITH_API_KEY": "k", "MODAL_TOKEN_ID": "i", "MODAL_TOKEN_SECRET": "s",
	}
	getenv := func(k string) string { return env[k] }
	want := map[string]providers.Capabilities{
		"local":     {List: true, BinaryOutput: true},
		"bwrap":     {Attach: true, OwnFilesystem: true, List: true, BinaryOutput: true},
		"docker":    {Attach: true, Snapshot: true, OwnFilesystem: true, List: true, BinaryOutput: true},
		"daytona":   {Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true},
		"vercel":    {Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true},
		"runloop":   {Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true},
		"langsmith": {Attach: true, Snapshot: true, DefaultSnapshot: true, OwnFilesystem: true, List: true, TTL: true},
		"modal":     {Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true},
	}
	for name, caps := range want {
		p, err := builtin.Providers().Build(cfg, name, getenv)
		if err != nil {
			t.Errorf("build %s: %v", name, err)
			continue
		}
		if got := providers.CapabilitiesOf(p); got != caps {
			t.Errorf("%s capabilities = %+v, want %+v", name, got, caps)
		}
	}
}

// An unknown provider is a usage error with a did-you-mean and the valid names.
func TestLookupUnknown(t *testing.T) {
	t.Parallel()
	_, err := builtin.Providers().Lookup(load(t, ""), "dokcer")
	var ue *runner.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `unknown sandbox provider "dokcer", did you mean docker?`) {
		t.Errorf("err = %v, want a usage error suggesting docker", err)
	}
	if builtin.Providers().Has("fake") {
		t.Errorf("the release registry has the fake provider")
	}
}

// A plugin timeout that is zero or negative would silently mean the default; it is an
// error naming the file, the line and the key instead.
func TestPluginTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, value string }{
		{"create_timeout", "0s"},
		{"call_timeout", "-5s"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Parallel()
			cfg := load(t, "[sandboxes.providers.acme]\ncommand = [\"/bin/true\"]\n"+tc.key+" = \""+tc.value+"\"\n")
			_, err := builtin.Providers().Build(cfg, "acme", func(string) string { return "" })
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *config.Error", err)
			}
			for _, want := range []string{"config.toml:3", "sandboxes.providers.acme." + tc.key, "want a positive duration"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", err, want)
				}
			}
		})
	}
	cfg := load(t, "[sandboxes.providers.acme]\ncommand = [\"/bin/true\"]\ncreate_timeout = \"5s\"\n")
	if _, err := builtin.Providers().Build(cfg, "acme", func(string) string { return "" }); err != nil {
		t.Errorf("a positive create_timeout: %v", err)
	}
}

// A negative size or timeout is refused with the key the user wrote in the provider's
// table, not silently replaced by the default.
func TestNegativeSettingNamesTheKey(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DAYTONA_API_KEY": "k", "LANGSMITH_API_KEY": "k", "VERCEL_TOKEN": "t", "VERCEL_TEAM_ID": "team", "VERCEL_PROJECT_ID": "p",
		"RUNLOOP_API_KEY": "k", "MODAL_TOKEN_ID": "i", "MODAL_TOKEN_SECRET": "s", "MODAL_CONFIG_PATH": "/nonexistent/.modal.toml"}
	for _, tc := range []struct{ provider, key, value string }{
		{"daytona", "memory_gb", "-1"},
		{"daytona", "auto_stop_minutes", "-1"},
		{"langsmith", "memory_bytes", "-1"},
		{"vercel", "vcpus", "-1"},
		{"daytona", "ready_timeout", `"-1s"`},
		{"runloop", "ready_timeout", `"-1s"`},
		{"vercel", "ready_timeout", `"-1s"`},
		{"langsmith", "ready_timeout", `"-1s"`},
		{"langsmith", "build_timeout", `"-1s"`},
		{"modal", "ready_timeout", `"-1s"`},
	} {
		t.Run(tc.provider+"/"+tc.key, func(t *testing.T) {
			t.Parallel()
			cfg := load(t, "[sandboxes.providers."+tc.provider+"]\n"+tc.key+" = "+tc.value+"\n")
			_, err := builtin.Providers().Build(cfg, tc.provider, func(k string) string { return env[k] })
			if !errors.Is(err, providers.ErrConfig) || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), "must not be negative") {
				t.Errorf("%s = %s: err = %v, want a config error naming %s", tc.key, tc.value, err, tc.key)
			}
		})
	}
}
