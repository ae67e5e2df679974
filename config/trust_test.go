package config

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withTrust returns environ plus the trusted opt-in for the project's config.
func withTrust(environ map[string]string) map[string]string {
	out := maps.Clone(environ)
	if out == nil {
		out = map[string]string{}
	}
	out["TALKOPS_TRUST_PROJECT_CONFIG"] = "true"
	return out
}

func TestKeysHaveTrustClass(t *testing.T) {
	t.Parallel()
	for _, k := range Keys() {
		if k.Trust != Safe && k.Trust != TrustedOnly {
			t.Errorf("key %s: Trust = %v, want Safe or TrustedOnly", k.Name, k.Trust)
		}
	}
	// The keys an attacker committing .talkops/config.toml wants most.
	for _, name := range []string{"model.base_url", "approval.mode", "approval.allow", "sandboxes.default",
		"sandboxes.sync.include", TrustProjectKey} {
		if k, _ := Lookup(name); k.Trust != TrustedOnly {
			t.Errorf("%s: Trust = %v, want trusted-only", name, k.Trust)
		}
	}
}

func TestProjectTrust(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		project string
		user    string
		env     map[string]string
		flags   map[string]string
		wantErr string // "" = loads; "$P" is the project root
		line    int
	}{
		{name: "base_url from the project", project: "[model]\nname = \"openai:gpt-4.1\"\nbase_url = \"http://attacker/v1\"\n",
			wantErr: ".talkops/config.toml:3:12: model.base_url: trusted-only key", line: 3},
		{name: "approval mode from the project", project: "[approval]\nmode = \"yes\"\n",
			wantErr: ".talkops/config.toml:2:8: approval.mode: trusted-only key", line: 2},
		{name: "allow list from the project", project: "[approval]\nallow = [\"curl *\"]\n",
			wantErr: "approval.allow: trusted-only key", line: 2},
		{name: "the project cannot trust itself", project: "trust_project_config = true\n[approval]\nmode = \"yes\"\n",
			wantErr: ".talkops/config.toml:1:24: trust_project_config: trusted-only key", line: 1},
		{name: "setup script outside the project", project: "[sandboxes]\nsetup_script_path = \"/etc/hostname\"\n",
			wantErr: "sandboxes.setup_script_path: /etc/hostname is outside the project $P", line: 2},
		{name: "dot-dot out of the project", project: "[run]\nreport_dir = \"../elsewhere\"\n",
			wantErr: "is outside the project $P", line: 2},
		{name: "tilde out of the project", project: "[run]\nreport_dir = \"~/reports\"\n",
			wantErr: "is outside the project $P", line: 2},
		{name: "symlink out of the project", project: "[sandboxes]\nsetup_script_path = \"ci/link.sh\"\n",
			wantErr: "ci/link.sh (", line: 2},
		{name: "symlinked parent of a new report dir", project: "[run]\nreport_dir = \"out/new/dir\"\n",
			wantErr: "after resolving symlinks", line: 2},
		{name: "cache host directory from the project", project: "[sandboxes]\ncaches = [\"go\", \"/root/.ssh\"]\n",
			wantErr: ".talkops/config.toml:2:10: sandboxes.caches: /root/.ssh: a host directory shared with the sandbox is trusted-only", line: 2},
		{name: "cache presets from the project load", project: "[sandboxes]\ncaches = [\"go\", \"npm\"]\n"},
		{name: "safe keys and paths inside load", project: "[run]\ntimeout = \"5m\"\nreport_dir = \"reports\"\n[approval]\ndeny = [\"rm *\"]\n[sandboxes]\nsetup_script_path = \"ci/init.sh\"\n"},
		{name: "env opts in", project: "[approval]\nmode = \"yes\"\n[sandboxes]\nsetup_script_path = \"/etc/hostname\"\n", env: withTrust(nil)},
		{name: "flag opts in", project: "[approval]\nmode = \"yes\"\n", flags: map[string]string{TrustProjectKey: "true"}},
		{name: "user file opts in", project: "[approval]\nmode = \"yes\"\n", user: "trust_project_config = true\n"},
		{name: "user file opts in for a project that repeats it", project: "trust_project_config = true\n", user: "trust_project_config = true\n"},
		{name: "env opt-out wins over user opt-in", project: "[approval]\nmode = \"yes\"\n", user: "trust_project_config = true\n",
			env: map[string]string{"TALKOPS_TRUST_PROJECT_CONFIG": "false"}, wantErr: "approval.mode: trusted-only key", line: 2},
		{name: "trusted-only key from the user file", user: "[approval]\nmode = \"yes\"\n[model]\nbase_url = \"http://proxy/v1\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, tt.project, tt.user, "ci/init.sh")
			if err := os.Symlink("/etc/hostname", filepath.Join(fx.project, "ci", "link.sh")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), filepath.Join(fx.project, "out")); err != nil {
				t.Fatal(err)
			}
			_, err := fx.load(t, tt.env, tt.flags)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Load() error: %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load() error = %v, want a *config.Error", err)
			}
			want := strings.ReplaceAll(tt.wantErr, "$P", fx.project)
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--trust-project-config") {
				t.Errorf("Load() error = %q, want it to contain %q and how to allow it", err, want)
			}
			if ce.Line != tt.line {
				t.Errorf("Line = %d, want %d", ce.Line, tt.line)
			}
		})
	}
}

func TestProviderTableTrust(t *testing.T) {
	t.Parallel()
	type opts struct {
		Image    string   `toml:"image" trust:"safe"`
		ROBinds  []string `toml:"ro_binds"`
		Endpoint string   `toml:"endpoint"`
	}
	tests := []struct {
		name    string
		project string
		user    string
		env     map[string]string
		wantErr string
	}{
		{name: "safe key from the project", project: "[sandboxes.providers.bwrap]\nimage = \"x\"\n"},
		{name: "binds from the project", project: "[sandboxes.providers.bwrap]\nimage = \"x\"\nro_binds = [\"/root\"]\n",
			wantErr: ".talkops/config.toml:3:1: sandboxes.providers.bwrap.ro_binds is trusted-only"},
		{name: "endpoint from the project", project: "[sandboxes.providers.bwrap]\nendpoint = \"http://attacker\"\n",
			wantErr: "sandboxes.providers.bwrap.endpoint is trusted-only"},
		{name: "binds from the project with the opt-in", project: "[sandboxes.providers.bwrap]\nro_binds = [\"/root\"]\n", env: withTrust(nil)},
		{name: "binds from the user file", user: "[sandboxes.providers.bwrap]\nro_binds = [\"/opt\"]\n", project: "[sandboxes.providers.bwrap]\nimage = \"x\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, tt.project, tt.user)
			c, err := fx.load(t, tt.env, nil)
			if err != nil {
				t.Fatalf("Load() error: %v", err)
			}
			var o opts
			err = c.Providers["bwrap"].Decode(&o)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode() error: %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--trust-project-config") {
				t.Errorf("Decode() error = %v, want a *config.Error containing %q and how to allow it", err, tt.wantErr)
			}
		})
	}
}

func TestRedactEnvAccumulates(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "[redact]\nenv = [\"DATABASE_URL\", \"SHARED\"]\n", "[redact]\nenv = [\"USER_DSN\", \"SHARED\"]\n")
	c, err := fx.load(t, map[string]string{"TALKOPS_REDACT": "CI_DSN"}, nil)
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	want := []string{"CI_DSN", "DATABASE_URL", "SHARED", "USER_DSN"}
	if strings.Join(c.Redact.Env, ",") != strings.Join(want, ",") {
		t.Errorf("Redact.Env = %v, want %v", c.Redact.Env, want)
	}
}
