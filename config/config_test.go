package config

import (
	"errors"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/result"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

var testProviders = []string{"local", "bwrap", "docker", "modal", "daytona"}

var testFlagNames = map[string]string{
	"sandboxes.default":           "--sandbox",
	"sandboxes.sandbox_id":        "--sandbox-id",
	"sandboxes.snapshot_name":     "--sandbox-snapshot-name",
	"sandboxes.setup_script_path": "--sandbox-setup",
	"run.timeout":                 "--timeout",
	"run.output_format":           "--output-format",
}

// env is a Getenv over a map.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// fixture is a project (with .git) and a home directory on disk.
type fixture struct {
	project string // project root
	home    string
}

// newFixture writes the project and user config files ("" = no file) and the files in
// extra (paths relative to the project root).
func newFixture(t *testing.T, project, user string, extra ...string) fixture {
	t.Helper()
	base := t.TempDir()
	fx := fixture{project: filepath.Join(base, "repo"), home: filepath.Join(base, "home")}
	mustWrite(t, filepath.Join(fx.project, ".git", "HEAD"), "ref: refs/heads/main\n")
	if err := os.MkdirAll(fx.home, 0o755); err != nil {
		t.Fatal(err)
	}
	if project != "" {
		mustWrite(t, filepath.Join(fx.project, ".talkops", "config.toml"), project)
	}
	if user != "" {
		mustWrite(t, filepath.Join(fx.home, ".talkops", "config.toml"), user)
	}
	for _, p := range extra {
		mustWrite(t, filepath.Join(fx.project, p), "#!/bin/sh\n")
	}
	return fx
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (fx fixture) load(t *testing.T, environ, flags map[string]string) (*Config, error) {
	t.Helper()
	return Load(Options{
		Flags:     flags,
		FlagNames: testFlagNames,
		Getenv:    env(environ),
		WorkDir:   fx.project,
		HomeDir:   fx.home,
		Providers: testProviders,
	})
}

// lookupValue finds key in c.Values().
func lookupValue(c *Config, key string) result.ConfigValue {
	for _, v := range c.Values() {
		if v.Key == key {
			return v
		}
	}
	return result.ConfigValue{Key: key, Value: "<missing>"}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	const (
		user    = "[sandboxes]\ndefault = \"modal\"\n\n[run]\ntimeout = \"1h\"\n"
		project = "[sandboxes]\ndefault = \"daytona\"\n\n[run]\ntimeout = \"45m\"\n"
		// projectAlias spells the provider key the other documented way.
		projectAlias = "[sandboxes]\nprovider = \"bwrap\"\n"
	)
	tests := []struct {
		name    string
		user    string
		project string
		env     map[string]string
		flags   map[string]string
		key     string
		want    string // value
		source  string // "$P" is the project root, for the project file's path
	}{
		{name: "default", key: "sandboxes.default", want: "local", source: "default"},
		{name: "user file over default", user: user, key: "sandboxes.default", want: "modal", source: "~/.talkops/config.toml:2"},
		{name: "project file over user file", user: user, project: project, key: "sandboxes.default", want: "daytona", source: "$P/.talkops/config.toml:2"},
		{name: "provider alias in project file", user: user, project: projectAlias, key: "sandboxes.default", want: "bwrap", source: "$P/.talkops/config.toml:2"},
		{
			name: "unprefixed env over project file", user: user, project: project,
			env: map[string]string{"SANDBOX_PROVIDER": "docker"},
			key: "sandboxes.default", want: "docker", source: "env SANDBOX_PROVIDER",
		},
		{
			name: "TALKOPS env over unprefixed env", user: user, project: project,
			env: map[string]string{"SANDBOX_PROVIDER": "docker", "TALKOPS_SANDBOX_PROVIDER": "bwrap"},
			key: "sandboxes.default", want: "bwrap", source: "env TALKOPS_SANDBOX_PROVIDER",
		},
		{
			name: "flag over TALKOPS env", user: user, project: project,
			env:   map[string]string{"TALKOPS_SANDBOX_PROVIDER": "bwrap"},
			flags: map[string]string{"sandboxes.default": "local"},
			key:   "sandboxes.default", want: "local", source: "flag --sandbox",
		},
		{
			name: "empty env is unset", user: user,
			env: map[string]string{"TALKOPS_SANDBOX_PROVIDER": "", "SANDBOX_PROVIDER": ""},
			key: "sandboxes.default", want: "modal", source: "~/.talkops/config.toml:2",
		},
		{
			name: "bare --sandbox takes the configured default", user: user, project: project,
			flags: map[string]string{"sandboxes.default": ""},
			key:   "sandboxes.default", want: "daytona", source: "$P/.talkops/config.toml:2",
		},
		{
			name: "bare --sandbox takes the env default", user: user,
			env:   map[string]string{"SANDBOX_PROVIDER": "docker"},
			flags: map[string]string{"sandboxes.default": ""},
			key:   "sandboxes.default", want: "docker", source: "env SANDBOX_PROVIDER",
		},
		{name: "run key from user file", user: user, key: "run.timeout", want: "1h", source: "~/.talkops/config.toml:5"},
		{name: "run key from project file", user: user, project: project, key: "run.timeout", want: "45m", source: "$P/.talkops/config.toml:5"},
		{
			name: "run key from env", user: user, project: project,
			env: map[string]string{"TALKOPS_TIMEOUT": "90s"},
			key: "run.timeout", want: "1m30s", source: "env TALKOPS_TIMEOUT",
		},
		{
			name: "run key from flag", user: user, project: project,
			env:   map[string]string{"TALKOPS_TIMEOUT": "90s"},
			flags: map[string]string{"run.timeout": "2h"},
			key:   "run.timeout", want: "2h", source: "flag --timeout",
		},
		{
			name: "flag without a spelling shows the key", flags: map[string]string{"run.log_level": "warn"},
			key: "run.log_level", want: "warn", source: "flag --run.log_level",
		},
		{
			name: "sync_workspace from unprefixed env", env: map[string]string{"SANDBOX_SYNC_WORKSPACE": "no"},
			key: "sandboxes.sync_workspace", want: "false", source: "env SANDBOX_SYNC_WORKSPACE",
		},
		{name: "size default", key: "sandboxes.sync.max_file_size", want: "10MiB", source: "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, tt.project, tt.user)
			env := maps.Clone(tt.env)
			if tt.project != "" {
				// Precedence is what is tested here; trust has its own tests.
				env = withTrust(env)
			}
			c, err := fx.load(t, env, tt.flags)
			if err != nil {
				t.Fatalf("Load() error: %v", err)
			}
			want := result.ConfigValue{Key: tt.key, Value: tt.want, Source: strings.ReplaceAll(tt.source, "$P", fx.project)}
			if diff := cmp.Diff(want, lookupValue(c, tt.key)); diff != "" {
				t.Errorf("Values() entry mismatch (-want +got):\n%s", diff)
			}
			if got := c.Source(tt.key); got != want.Source {
				t.Errorf("Source(%q) = %q, want %q", tt.key, got, want.Source)
			}
		})
	}
}

// TestTyped checks that resolved values land in the typed fields, paths made absolute.
func TestTyped(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/project.toml")
	if err != nil {
		t.Fatal(err)
	}
	user, err := os.ReadFile("testdata/user.toml")
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, string(data), string(user), "scripts/init.sh")
	c, err := fx.load(t, withTrust(nil), nil)
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	want := Sandbox{
		Provider:      "docker",
		Snapshot:      "tf-base",
		SetupScript:   filepath.Join(fx.project, "scripts", "init.sh"),
		SyncWorkspace: true,
		Image:         "ghcr.io/acme/ci:1.4",
		Sync: Sync{
			Include:     []string{".env.ci", "secrets/ci-only.pem"},
			Exclude:     []string{"*.tfstate", "fixtures/large/**"},
			MaxFileSize: 25 << 20,
		},
	}
	if diff := cmp.Diff(want, c.Sandbox); diff != "" {
		t.Errorf("Sandbox mismatch (-want +got):\n%s", diff)
	}
	wantRun := Run{Timeout: 45 * time.Minute, ReportDir: filepath.Join(fx.project, "out", "talkops"), OutputFormat: "stream-json", LogLevel: "debug"}
	if diff := cmp.Diff(wantRun, c.Run); diff != "" {
		t.Errorf("Run mismatch (-want +got):\n%s", diff)
	}
	if c.ProjectDir != fx.project {
		t.Errorf("ProjectDir = %q, want %q", c.ProjectDir, fx.project)
	}
	if c.ProjectFile != filepath.Join(fx.project, ".talkops", "config.toml") || c.UserFile != filepath.Join(fx.home, ".talkops", "config.toml") {
		t.Errorf("ProjectFile, UserFile = %q, %q", c.ProjectFile, c.UserFile)
	}
}

func TestPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		project string
		user    string
		env     map[string]string
		flags   map[string]string
		workSub string // working directory below the project root
		files   []string
		want    string // SetupScript relative to $P (project) or $H (home)
	}{
		{name: "project file is relative to the project root", project: "[sandboxes]\nsetup_script_path = \"ci/init.sh\"\n", workSub: "deep/er", files: []string{"ci/init.sh"}, want: "$P/ci/init.sh"},
		{name: "user file is relative to the home directory", user: "[sandboxes]\nsetup_script_path = \"bin/init.sh\"\n", want: "$H/bin/init.sh"},
		{name: "tilde in a file is the home directory", project: "[sandboxes]\nsetup_script_path = \"~/bin/init.sh\"\n", env: withTrust(nil), want: "$H/bin/init.sh"},
		{name: "flag is relative to the working directory", flags: map[string]string{"sandboxes.setup_script_path": "init.sh"}, workSub: "sub", files: []string{"sub/init.sh"}, want: "$P/sub/init.sh"},
		{name: "env is relative to the working directory", env: map[string]string{"SANDBOX_SETUP_SCRIPT": "./x/../init.sh"}, files: []string{"init.sh"}, want: "$P/init.sh"},
		{name: "empty flag clears a configured script", project: "[sandboxes]\nsetup_script_path = \"ci/init.sh\"\n", files: []string{"ci/init.sh"}, flags: map[string]string{"sandboxes.setup_script_path": ""}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, tt.project, tt.user, tt.files...)
			mustWrite(t, filepath.Join(fx.home, "bin", "init.sh"), "#!/bin/sh\n")
			wd := filepath.Join(fx.project, tt.workSub)
			if err := os.MkdirAll(wd, 0o755); err != nil {
				t.Fatal(err)
			}
			c, err := Load(Options{Flags: tt.flags, Getenv: env(tt.env), WorkDir: wd, HomeDir: fx.home, Providers: testProviders})
			if err != nil {
				t.Fatalf("Load() error: %v", err)
			}
			want := strings.NewReplacer("$P", fx.project, "$H", fx.home).Replace(tt.want)
			if c.Sandbox.SetupScript != want {
				t.Errorf("SetupScript = %q, want %q", c.Sandbox.SetupScript, want)
			}
		})
	}
}

func TestSnapshotWithID(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "[sandboxes]\nsnapshot_name = \"base\"\n", "")
	c, err := fx.load(t, nil, map[string]string{"sandboxes.sandbox_id": "sb-123"})
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	if c.Sandbox.ID != "sb-123" || c.Sandbox.Snapshot != "" {
		t.Errorf("ID, Snapshot = %q, %q; want sb-123 and no snapshot", c.Sandbox.ID, c.Sandbox.Snapshot)
	}
	want := result.ConfigValue{Key: "sandboxes.snapshot_name", Value: "base",
		Source: fx.project + "/.talkops/config.toml:2 (ignored: sandboxes.sandbox_id is set)"}
	if diff := cmp.Diff(want, lookupValue(c, "sandboxes.snapshot_name")); diff != "" {
		t.Errorf("snapshot entry mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		project string
		user    string
		env     map[string]string
		flags   map[string]string
		want    string // the whole message
		line    int
	}{
		{
			name:    "unknown key",
			project: "# comment\n\n[sandboxes]\ndefualt = \"docker\"\n",
			want:    `.talkops/config.toml:4:1: unknown key "sandboxes.defualt" (valid keys: default, provider, sandbox_id, snapshot_name, snapshot, setup_script_path, sync_workspace, sync, image, env, pass_env, caches, providers)`,
			line:    4,
		},
		{
			name:    "unknown section",
			project: "[sandboxes]\ndefault = \"docker\"\n\n[modle]\nname = \"x\"\n",
			want:    `.talkops/config.toml:4:2: unknown section "modle" (valid sections: sandboxes, run, model, agent, approval, rubric, redact, trust_project_config, mcp)`,
			line:    4,
		},
		{
			name:    "unknown key in a sub-table",
			project: "[sandboxes.sync]\nexclud = [\"a\"]\n",
			want:    `.talkops/config.toml:2:1: unknown key "sandboxes.sync.exclud" (valid keys: include, exclude, max_file_size)`,
			line:    2,
		},
		{
			name:    "wrong type",
			project: "[sandboxes]\nsync_workspace = 3\n",
			want:    `.talkops/config.toml:2:18: sandboxes.sync_workspace: want a boolean, got integer 3 (valid values: true, false, yes, no, 1, 0)`,
			line:    2,
		},
		{
			name:    "bad boolean string",
			project: "[sandboxes]\nsync_workspace = \"maybe\"\n",
			want:    `.talkops/config.toml:2:18: sandboxes.sync_workspace: invalid boolean "maybe" (valid values: true, false, yes, no, 1, 0)`,
			line:    2,
		},
		{
			name:    "quoted key and dotted key positions",
			project: "[sandboxes]\n\"sync_workspace\" = \"maybe\"\n",
			want:    `.talkops/config.toml:2:20: sandboxes.sync_workspace: invalid boolean "maybe" (valid values: true, false, yes, no, 1, 0)`,
			line:    2,
		},
		{
			name:    "dotted key at the top level",
			project: "run.log_level = \"loud\"\n",
			want:    `.talkops/config.toml:1:17: run.log_level: invalid value "loud" (valid values: debug, info, warn, error)`,
			line:    1,
		},
		{
			name:    "inline table value",
			project: "run = { timeout = \"1m\", log_lvl = \"info\" }\n",
			want:    `.talkops/config.toml:1:25: unknown key "run.log_lvl" (valid keys: timeout, report_dir, output_format, log_level)`,
			line:    1,
		},
		{
			name:    "section given as a value",
			project: "sandboxes = \"docker\"\n",
			want:    `.talkops/config.toml:1:13: sandboxes: want a table [sandboxes], got string "docker"`,
			line:    1,
		},
		{
			name:    "key given as a table",
			project: "[sandboxes.image]\nname = \"x\"\n",
			want:    `.talkops/config.toml:1:12: sandboxes.image: want a string, got a table`,
			line:    1,
		},
		{
			name:    "malformed TOML",
			project: "[sandboxes]\ndefault = \"docker\n",
			want:    `.talkops/config.toml:2:18: invalid TOML: basic strings cannot have new lines`,
			line:    2,
		},
		{
			name:    "duplicate key",
			project: "[run]\ntimeout = \"1m\"\ntimeout = \"2m\"\n",
			want:    `.talkops/config.toml:3:1: invalid TOML: key timeout is already defined`,
			line:    3,
		},
		{
			name:    "default and provider both set",
			project: "[sandboxes]\ndefault = \"docker\"\nprovider = \"modal\"\n",
			want:    `.talkops/config.toml:3:1: sandboxes.default and sandboxes.provider are the same setting; set only sandboxes.default`,
			line:    3,
		},
		{
			name:    "snapshot and snapshot_name both set",
			project: "[sandboxes]\nsnapshot = \"a\"\nsnapshot_name = \"b\"\n",
			want:    `.talkops/config.toml:3:1: sandboxes.snapshot and sandboxes.snapshot_name are the same setting; set only sandboxes.snapshot_name`,
			line:    3,
		},
		{
			name:    "unknown provider",
			project: "[sandboxes]\ndefault = \"dokcer\"\n",
			want:    `.talkops/config.toml:2:11: sandboxes.default: unknown provider "dokcer", did you mean docker? (valid providers: local, bwrap, docker, modal, daytona)`,
			line:    2,
		},
		{
			name:    "unknown provider table",
			project: "[sandboxes.providers.vercel]\nworking_dir = \"/x\"\n",
			want:    `.talkops/config.toml:1:22: unknown provider "vercel" in [sandboxes.providers.vercel]; a custom provider is a table with command or backend in ~/.talkops/config.toml (valid providers: local, bwrap, docker, modal, daytona)`,
			line:    1,
		},
		{
			name:    "working_dir not a string",
			project: "[sandboxes.providers.docker]\nworking_dir = 1\n",
			want:    `.talkops/config.toml:2:15: sandboxes.providers.docker.working_dir: want a non-empty path inside the sandbox, got integer 1`,
			line:    2,
		},
		{
			name:    "bad duration",
			project: "[run]\ntimeout = \"30 minutes\"\n",
			want:    `.talkops/config.toml:2:11: run.timeout: invalid duration "30 minutes": want a number with a unit, like "90s", "30m" or "1h30m"`,
			line:    2,
		},
		{
			name:    "duration as integer",
			project: "[run]\ntimeout = 30\n",
			want:    `.talkops/config.toml:2:11: run.timeout: want a duration string like "30m", got integer 30`,
			line:    2,
		},
		{
			name:    "negative duration",
			project: "[run]\ntimeout = \"-5m\"\n",
			want:    `.talkops/config.toml:2:11: run.timeout: duration "-5m" is negative`,
			line:    2,
		},
		{
			name:    "bad enum",
			project: "[run]\n  output_format = \"yaml\"\n",
			want:    `.talkops/config.toml:2:19: run.output_format: invalid value "yaml" (valid values: text, json, stream-json)`,
			line:    2,
		},
		{
			name:    "bad size",
			project: "[sandboxes.sync]\nmax_file_size = \"10 megs\"\n",
			want:    `.talkops/config.toml:2:17: sandboxes.sync.max_file_size: invalid size "10 megs": want a byte count, optionally with a unit, like "10MiB" (valid units: KiB, MiB, GiB, KB, MB, GB, B)`,
			line:    2,
		},
		{
			name:    "zero size",
			project: "[sandboxes.sync]\nmax_file_size = 0\n",
			want:    `.talkops/config.toml:2:17: sandboxes.sync.max_file_size: size must be positive, got 0`,
			line:    2,
		},
		{
			name:    "list with a number",
			project: "[sandboxes.sync]\ninclude = [\".env\", 3]\n",
			want:    `.talkops/config.toml:2:11: sandboxes.sync.include: want an array of strings, element 1 is integer 3`,
			line:    2,
		},
		{
			name:    "missing setup script",
			project: "\n[sandboxes]\nsetup_script_path = \"scripts/missing.sh\"\n",
			want:    `.talkops/config.toml:3:21: sandboxes.setup_script_path: $P/scripts/missing.sh: no such file or directory (a relative path in .talkops/config.toml is resolved against $P)`,
			line:    3,
		},
		{
			name:    "missing absolute setup script",
			project: "[sandboxes]\nsetup_script_path = \"/nonexistent/init.sh\"\n",
			env:     withTrust(nil),
			want:    `.talkops/config.toml:2:21: sandboxes.setup_script_path: /nonexistent/init.sh: no such file or directory`,
			line:    2,
		},
		{
			name: "error in the user file",
			user: "[sandboxes]\nimage = 3\n",
			want: `~/.talkops/config.toml:2:9: sandboxes.image: want a string, got integer 3`,
			line: 2,
		},
		{
			name:    "snapshot and id in one file",
			project: "[sandboxes]\nsandbox_id = \"sb-1\"\nsnapshot_name = \"base\"\n",
			env:     withTrust(nil),
			want:    `.talkops/config.toml:3:17: sandboxes.snapshot_name: snapshots only apply when creating a fresh sandbox, and sandboxes.sandbox_id ($P/.talkops/config.toml:2) attaches to an existing one: set only one of them`,
			line:    3,
		},
		{
			name: "bad boolean env",
			env:  map[string]string{"TALKOPS_SANDBOX_SYNC_WORKSPACE": "maybe"},
			want: `env TALKOPS_SANDBOX_SYNC_WORKSPACE: invalid boolean "maybe" (valid values: true, false, yes, no, 1, 0)`,
		},
		{
			name: "unknown provider env",
			env:  map[string]string{"SANDBOX_PROVIDER": "k8s"},
			want: `env SANDBOX_PROVIDER: unknown provider "k8s" (valid providers: local, bwrap, docker, modal, daytona)`,
		},
		{
			name: "bad duration env",
			env:  map[string]string{"TALKOPS_TIMEOUT": "soon"},
			want: `env TALKOPS_TIMEOUT: invalid duration "soon": want a number with a unit, like "90s", "30m" or "1h30m"`,
		},
		{
			name:  "unknown provider flag",
			flags: map[string]string{"sandboxes.default": "k8s"},
			want:  `flag --sandbox: unknown provider "k8s" (valid providers: local, bwrap, docker, modal, daytona)`,
		},
		{
			name:  "snapshot and id flags",
			flags: map[string]string{"sandboxes.sandbox_id": "sb-1", "sandboxes.snapshot_name": "base"},
			want:  `flag --sandbox-snapshot-name: snapshots only apply when creating a fresh sandbox, and sandboxes.sandbox_id (flag --sandbox-id) attaches to an existing one: set only one of them`,
		},
		{
			name:  "snapshot flag and id env",
			env:   map[string]string{"TALKOPS_SANDBOX_ID": "sb-1"},
			flags: map[string]string{"sandboxes.snapshot_name": "base"},
			want:  `flag --sandbox-snapshot-name: snapshots only apply when creating a fresh sandbox, and sandboxes.sandbox_id (env TALKOPS_SANDBOX_ID) attaches to an existing one: set only one of them`,
		},
		{
			name:  "missing setup script flag",
			flags: map[string]string{"sandboxes.setup_script_path": "nope.sh"},
			want:  `flag --sandbox-setup: $P/nope.sh: no such file or directory`,
		},
		{
			name:  "setup script is a directory",
			flags: map[string]string{"sandboxes.setup_script_path": ".git"},
			want:  `flag --sandbox-setup: $P/.git is not a regular file`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, tt.project, tt.user)
			_, err := fx.load(t, tt.env, tt.flags)
			if err == nil {
				t.Fatalf("Load() = nil error, want %q", tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load() error %T %q is not a *config.Error", err, err)
			}
			want := strings.ReplaceAll(tt.want, "$P", fx.project)
			if got := err.Error(); got != want {
				t.Errorf("Load() error:\n got %s\nwant %s", got, want)
			}
			if ce.Line != tt.line {
				t.Errorf("Line = %d, want %d", ce.Line, tt.line)
			}
		})
	}
}

func TestParseBool(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{in: "true", want: true},
		{in: "TRUE", want: true},
		{in: "yes", want: true},
		{in: "Yes", want: true},
		{in: "1", want: true},
		{in: " true ", want: true},
		{in: "false", want: false},
		{in: "False", want: false},
		{in: "no", want: false},
		{in: "NO", want: false},
		{in: "0", want: false},
		{in: "maybe", wantErr: true},
		{in: "on", wantErr: true},
		{in: "2", wantErr: true},
		{in: "t", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			// Through the real path: an environment variable read by Load.
			fx := newFixture(t, "[sandboxes]\nsync_workspace = "+map[bool]string{true: "false", false: "true"}[tt.want]+"\n", "")
			c, err := fx.load(t, map[string]string{"TALKOPS_SANDBOX_SYNC_WORKSPACE": tt.in}, nil)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Load(TALKOPS_SANDBOX_SYNC_WORKSPACE=%q) = nil error, want one", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(TALKOPS_SANDBOX_SYNC_WORKSPACE=%q) error: %v", tt.in, err)
			}
			if c.Sandbox.SyncWorkspace != tt.want {
				t.Errorf("Load(TALKOPS_SANDBOX_SYNC_WORKSPACE=%q).SyncWorkspace = %v, want %v", tt.in, c.Sandbox.SyncWorkspace, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "2048", want: 2048},
		{in: "10MiB", want: 10 << 20},
		{in: "10mib", want: 10 << 20},
		{in: "512 KiB", want: 512 << 10},
		{in: "1.5GiB", want: 3 << 29},
		{in: "1GB", want: 1e9},
		{in: "3kb", want: 3000},
		{in: "7B", want: 7},
		{in: "0", wantErr: true},
		{in: "-1MiB", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "10 megs", wantErr: true},
		{in: "1e30GiB", wantErr: true},
		{in: "NaN", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseSize(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseSize(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseSize(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestFindProject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		files    []string // created below the temp root; a trailing / makes a directory
		home     string
		workDir  string
		wantRoot string
		wantFile string
	}{
		{name: "git root from a subdirectory", files: []string{"repo/.git/", "repo/a/b/"}, workDir: "repo/a/b", wantRoot: "repo"},
		{name: "git file (worktree)", files: []string{"wt/.git", "wt/src/"}, workDir: "wt/src", wantRoot: "wt"},
		{name: "config at the git root", files: []string{"repo/.git/", "repo/.talkops/config.toml", "repo/a/"}, workDir: "repo/a", wantRoot: "repo", wantFile: "repo/.talkops/config.toml"},
		{
			name:    "nearest config wins over the git root",
			files:   []string{"repo/.git/", "repo/.talkops/config.toml", "repo/svc/.talkops/config.toml", "repo/svc/x/"},
			workDir: "repo/svc/x", wantRoot: "repo/svc", wantFile: "repo/svc/.talkops/config.toml",
		},
		{
			name:    "search stops at the git root",
			files:   []string{".talkops/config.toml", "repo/.git/", "repo/a/"},
			workDir: "repo/a", wantRoot: "repo",
		},
		{name: "a .talkops dir without config.toml is not a project", files: []string{"repo/.git/", "repo/a/.talkops/report/"}, workDir: "repo/a", wantRoot: "repo"},
		{name: "a file named .talkops is not a project", files: []string{"repo/.git/", "repo/a/.talkops"}, workDir: "repo/a", wantRoot: "repo"},
		{
			name:    "the home config is not a project config",
			files:   []string{"home/.talkops/config.toml", "home/scratch/"},
			home:    "home",
			workDir: "home/scratch", wantRoot: "home/scratch",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			for _, f := range tt.files {
				p := filepath.Join(base, f)
				if strings.HasSuffix(f, "/") {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				mustWrite(t, p, "")
			}
			home := ""
			if tt.home != "" {
				home = filepath.Join(base, tt.home)
			}
			root, file, err := FindProject(filepath.Join(base, tt.workDir), home)
			if err != nil {
				t.Fatalf("FindProject() error: %v", err)
			}
			wantFile := ""
			if tt.wantFile != "" {
				wantFile = filepath.Join(base, tt.wantFile)
			}
			if root != filepath.Join(base, tt.wantRoot) || file != wantFile {
				t.Errorf("FindProject(%s) = %q, %q; want %q, %q", tt.workDir, root, file, filepath.Join(base, tt.wantRoot), wantFile)
			}
		})
	}
}

func TestPrint(t *testing.T) {
	t.Parallel()
	project, err := os.ReadFile("testdata/project.toml")
	if err != nil {
		t.Fatal(err)
	}
	user, err := os.ReadFile("testdata/user.toml")
	if err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, string(project), string(user), "scripts/init.sh")
	c, err := fx.load(t,
		withTrust(map[string]string{"TALKOPS_LOG_LEVEL": "warn", "SANDBOX_IMAGE": "alpine:3"}),
		map[string]string{"run.output_format": "json"})
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	var direct strings.Builder
	if err := Print(&direct, c); err != nil {
		t.Fatalf("Print() error: %v", err)
	}
	if strings.Contains(direct.String(), "do-not-print-me") {
		t.Errorf("Print() shows a secret-looking provider value:\n%s", direct.String())
	}
	// The temporary project path differs in length between runs, and the columns with
	// it; print the same values with a fixed path for the golden file.
	values := c.Values()
	for i := range values {
		values[i].Value = strings.ReplaceAll(values[i].Value, fx.project, "/project")
		values[i].Source = strings.ReplaceAll(values[i].Source, fx.project, "/project")
	}
	var b strings.Builder
	if err := printValues(&b, values); err != nil {
		t.Fatalf("printValues() error: %v", err)
	}
	got := b.String()
	golden := filepath.Join("testdata", "print.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Print() mismatch (-want +got):\n%s", diff)
	}
}

func TestKeysTable(t *testing.T) {
	t.Parallel()
	seenEnv := map[string]string{}
	for _, k := range Keys() {
		if k.Help == "" || k.Type == 0 {
			t.Errorf("key %s: missing Help or Type", k.Name)
		}
		if k.field == nil {
			t.Errorf("key %s: no field to store the value in", k.Name)
		}
		if k.Default != "" {
			if _, err := parseText(&k, k.Default, nil); err != nil {
				t.Errorf("key %s: default %q does not parse: %v", k.Name, k.Default, err)
			}
		}
		for _, e := range k.Env {
			if prev, ok := seenEnv[e]; ok {
				t.Errorf("env %s sets both %s and %s", e, prev, k.Name)
			}
			seenEnv[e] = k.Name
		}
		if got, ok := Lookup(k.Name); !ok || got.Name != k.Name {
			t.Errorf("Lookup(%q) = %q, %v", k.Name, got.Name, ok)
		}
		for _, a := range k.Aliases {
			if got, ok := Lookup(a); !ok || got.Name != k.Name {
				t.Errorf("Lookup(%q) = %q, %v; want %s", a, got.Name, ok, k.Name)
			}
		}
	}
	// Keys returns a copy: changing it does not change the table.
	ks := Keys()
	ks[0].Env[0] = "CHANGED"
	if Keys()[0].Env[0] == "CHANGED" {
		t.Error("Keys() shares its slices with the table")
	}
}

func TestHelpText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want string
	}{
		{"sandboxes.default", `sandbox provider the agent's tools run in (default "local"; env TALKOPS_SANDBOX_PROVIDER, SANDBOX_PROVIDER; config [sandboxes] default; trusted-only)`},
		{"trust_project_config", `let the project's .talkops/config.toml set trusted-only keys and paths outside the project; only for repositories whose every change you trust (default "false"; env TALKOPS_TRUST_PROJECT_CONFIG; config trust_project_config; trusted-only)`},
		{"run.output_format", `what stdout carries: the answer as text, one JSON document, or JSON lines of events (default "text"; one of text, json, stream-json; env TALKOPS_OUTPUT_FORMAT; config [run] output_format)`},
		{"sandboxes.sync.exclude", `extra patterns never uploaded (config [sandboxes.sync] exclude)`},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			k, ok := Lookup(tt.key)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.key)
			}
			if got := k.HelpText(); got != tt.want {
				t.Errorf("HelpText() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestUnknownFlagKey(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "", "")
	_, err := fx.load(t, nil, map[string]string{"sandboxes.nope": "x"})
	if err == nil {
		t.Fatal("Load() with a flag for an unknown key = nil error")
	}
	var ce *Error
	if errors.As(err, &ce) {
		t.Errorf("Load() error %q is a *config.Error; a caller's bug is not a usage error", err)
	}
}

// A bare --sandbox with nothing configured is the default provider, as `talkops config`
// shows it.
func TestBareSandboxMeansDefault(t *testing.T) {
	t.Parallel()
	cfg, err := Load(Options{Flags: map[string]string{"sandboxes.default": ""}, FlagNames: map[string]string{"sandboxes.default": "--sandbox"},
		Getenv: func(string) string { return "" }, WorkDir: t.TempDir(), Providers: []string{"local", "docker"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sandbox.Provider != "local" {
		t.Errorf("bare --sandbox: provider %q, want the default local", cfg.Sandbox.Provider)
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	valid := []string{"local", "bwrap", "docker", "daytona", "vercel"}
	for in, want := range map[string]string{"dokcer": "docker", "Docker": "docker", "bwarp": "bwrap", "lcoal": "local", "kubernetes": "", "d": "", "run the tests": ""} {
		if got := Suggest(in, valid); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		project string
		env     map[string]string
		flags   map[string]string
		key     string
		want    bool
	}{
		{name: "default", key: KeyReportDir, want: false},
		{name: "project file", project: "[run]\nreport_dir = \"out\"\n", key: KeyReportDir, want: true},
		{name: "environment", env: map[string]string{"TALKOPS_RUBRIC_VOTES": "3"}, key: KeyRubricVotes, want: true},
		{name: "flag", flags: map[string]string{KeyMaxCostUSD: "2"}, key: KeyMaxCostUSD, want: true},
		{name: "another key set", flags: map[string]string{KeyMaxCostUSD: "2"}, key: KeyRubricVotes, want: false},
		{name: "unknown key", key: "run.nope", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := newFixture(t, tt.project, "").load(t, tt.env, tt.flags)
			if err != nil {
				t.Fatalf("Load() error: %v", err)
			}
			if got := c.IsSet(tt.key); got != tt.want {
				t.Errorf("IsSet(%q) = %v, want %v (source %q)", tt.key, got, tt.want, c.Source(tt.key))
			}
		})
	}
}
