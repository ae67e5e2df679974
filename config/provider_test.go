package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/result"
)

type mount struct {
	Source   string `toml:"source"`
	Target   string `toml:"target"`
	ReadOnly bool   `toml:"read_only"`
}

type level string

func (l *level) UnmarshalText(b []byte) error {
	switch s := string(b); s {
	case "low", "high":
		*l = level(s)
		return nil
	default:
		return errors.New(`want "low" or "high"`)
	}
}

// dockerOptions is what a provider package might decode its table into.
type dockerOptions struct {
	Network string        `toml:"network"`
	CPUs    float64       `toml:"cpus"`
	Timeout time.Duration `toml:"timeout"`
	Limits  struct {
		PIDs int32 `toml:"pids"`
	} `toml:"limits"`
	Mounts   []mount           `toml:"mounts"`
	Labels   map[string]string `toml:"labels"`
	Priority level             `toml:"priority"`
	Ports    *[]uint16         `toml:"ports"`
	Memory   string            // no tag: matched as "memory"
	Ignored  string            `toml:"-"`
}

func TestProviderDecode(t *testing.T) {
	t.Parallel()
	project := `[sandboxes]
default = "docker"

[sandboxes.providers.docker]
working_dir = "/src"
network = "none"
timeout = "90s"
labels = { team = "sre", "cost.center" = "42" }
priority = "high"
ports = [8080, 9090]
memory = "2g"

[sandboxes.providers.docker.limits]
pids = 256

[[sandboxes.providers.docker.mounts]]
source = "/cache"
target = "/root/.cache"

[[sandboxes.providers.docker.mounts]]
source = "/data"
target = "/data"
read_only = true
`
	user := `[sandboxes.providers.docker]
network = "bridge"
cpus = 2
`
	fx := newFixture(t, project, user)
	c, err := fx.load(t, withTrust(nil), nil)
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	tbl, ok := c.Providers["docker"]
	if !ok {
		t.Fatalf("Providers = %v, want a docker table", c.Providers)
	}
	if tbl.WorkingDir != "/src" {
		t.Errorf("WorkingDir = %q, want /src", tbl.WorkingDir)
	}
	var got dockerOptions
	if err := tbl.Decode(&got); err != nil {
		t.Fatalf("Decode() error: %v", err)
	}
	ports := []uint16{8080, 9090}
	want := dockerOptions{
		Network: "none", CPUs: 2, Timeout: 90 * time.Second,
		Mounts:   []mount{{Source: "/cache", Target: "/root/.cache"}, {Source: "/data", Target: "/data", ReadOnly: true}},
		Labels:   map[string]string{"team": "sre", "cost.center": "42"},
		Priority: "high",
		Ports:    &ports,
		Memory:   "2g",
	}
	want.Limits.PIDs = 256
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decode() mismatch (-want +got):\n%s", diff)
	}

	projectFile := fx.project + "/.talkops/config.toml"
	for key, wantSrc := range map[string]string{
		"":                 projectFile + ":4",
		"network":          projectFile + ":6",
		"cpus":             "~/.talkops/config.toml:3",
		"working_dir":      projectFile + ":5",
		"mounts[1].target": projectFile + ":22",
		"labels.team":      projectFile + ":8",
		"nope":             "",
	} {
		if got := tbl.Source(key); got != wantSrc {
			t.Errorf("Source(%q) = %q, want %q", key, got, wantSrc)
		}
	}
	if got, want := c.Source("sandboxes.providers.docker.cpus"), "~/.talkops/config.toml:3"; got != want {
		t.Errorf("Config.Source(sandboxes.providers.docker.cpus) = %q, want %q", got, want)
	}

	e := tbl.Errorf("mounts[1].source", "%s is not an absolute path", "data")
	if got, want := e.Error(), `.talkops/config.toml:21:10: sandboxes.providers.docker.mounts[1].source: data is not an absolute path`; got != want {
		t.Errorf("Errorf() = %q, want %q", got, want)
	}
	if got, want := tbl.Errorf("", "unusable").Error(), `.talkops/config.toml:4:22: sandboxes.providers.docker: unusable`; got != want {
		t.Errorf("Errorf(\"\") = %q, want %q", got, want)
	}
}

func TestProviderDecodeErrors(t *testing.T) {
	t.Parallel()
	const head = "[sandboxes.providers.docker]\n"
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "unknown key",
			body: "network = \"none\"\nnetwrk = \"host\"\n",
			want: `.talkops/config.toml:3:1: unknown key "sandboxes.providers.docker.netwrk" (valid keys: network, cpus, timeout, limits, mounts, labels, priority, ports, memory)`,
		},
		{
			name: "unknown key in a nested table",
			body: "[sandboxes.providers.docker.limits]\npids = 1\nmem = 2\n",
			want: `.talkops/config.toml:4:1: unknown key "sandboxes.providers.docker.limits.mem" (valid keys: pids)`,
		},
		{
			name: "unknown key in the second array element",
			body: "[[sandboxes.providers.docker.mounts]]\nsource = \"/a\"\n[[sandboxes.providers.docker.mounts]]\nsrc = \"/b\"\n",
			want: `.talkops/config.toml:5:1: unknown key "sandboxes.providers.docker.mounts[1].src" (valid keys: source, target, read_only)`,
		},
		{
			name: "wrong type",
			body: "cpus = \"two\"\n",
			want: `.talkops/config.toml:2:8: sandboxes.providers.docker.cpus: want a number, got string "two"`,
		},
		{
			name: "wrong element type",
			body: "ports = [80, \"http\"]\n",
			want: `.talkops/config.toml:2:14: sandboxes.providers.docker.ports[1]: want a non-negative integer, got string "http"`,
		},
		{
			name: "out of range",
			body: "ports = [70000]\n",
			want: `.talkops/config.toml:2:10: sandboxes.providers.docker.ports[0]: 70000 is out of range`,
		},
		{
			name: "bad duration",
			body: "timeout = \"soon\"\n",
			want: `.talkops/config.toml:2:11: sandboxes.providers.docker.timeout: invalid duration "soon": want a number with a unit, like "90s" or "5m"`,
		},
		{
			name: "text unmarshaler error",
			body: "priority = \"urgent\"\n",
			want: `.talkops/config.toml:2:12: sandboxes.providers.docker.priority: want "low" or "high"`,
		},
		{
			name: "table expected",
			body: "limits = 3\n",
			want: `.talkops/config.toml:2:10: sandboxes.providers.docker.limits: want a table, got integer 3`,
		},
		{
			name: "array expected",
			body: "mounts = \"/a:/b\"\n",
			want: `.talkops/config.toml:2:10: sandboxes.providers.docker.mounts: want an array, got string "/a:/b"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, head+tt.body, "")
			c, err := fx.load(t, withTrust(nil), nil) // decoding is tested here; trust in trust_test.go
			if err != nil {
				t.Fatalf("Load() error: %v", err)
			}
			var opts dockerOptions
			err = c.Providers["docker"].Decode(&opts)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Decode() error = %v (%T), want a *config.Error", err, err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Decode() error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestProviderDecodeBadTarget(t *testing.T) {
	t.Parallel()
	var notStruct map[string]any
	for _, v := range []any{nil, dockerOptions{}, &notStruct} {
		err := ProviderTable{Name: "docker"}.Decode(v)
		var ce *Error
		if err == nil || errors.As(err, &ce) {
			t.Errorf("Decode(%T) = %v, want a plain error (a caller's bug, not a usage error)", v, err)
		}
	}
}

func TestProviderValuesRedacted(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, `[sandboxes.providers.modal]
token_secret = "s3cr3t"
options = { region = "eu", api_key = "k3y", nested = { password = "pw" } }
app = "talkops"
`, "")
	c, err := fx.load(t, withTrust(nil), nil)
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	var got []result.ConfigValue
	for _, v := range c.Values() {
		if strings.HasPrefix(v.Key, "sandboxes.providers.") {
			v.Source = strings.ReplaceAll(v.Source, fx.project, "$P")
			got = append(got, v)
		}
	}
	want := []result.ConfigValue{
		{Key: "sandboxes.providers.modal.app", Value: "talkops", Source: "$P/.talkops/config.toml:4"},
		{Key: "sandboxes.providers.modal.options", Value: `{api_key = <redacted>, nested = {password = <redacted>}, region = "eu"}`, Source: "$P/.talkops/config.toml:3"},
		{Key: "sandboxes.providers.modal.token_secret", Value: "<redacted>", Source: "$P/.talkops/config.toml:2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provider Values() mismatch (-want +got):\n%s", diff)
	}
}

// TestProvidersUnchecked: with no provider list, any provider name and table is kept.
func TestProvidersUnchecked(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "[sandboxes]\ndefault = \"acme\"\n[sandboxes.providers.acme]\nregion = \"x\"\n", "")
	c, err := Load(Options{Getenv: env(withTrust(nil)), WorkDir: fx.project, HomeDir: fx.home})
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	if c.Sandbox.Provider != "acme" || c.Providers["acme"].Values["region"] != "x" {
		t.Errorf("Provider = %q, acme table = %v", c.Sandbox.Provider, c.Providers["acme"].Values)
	}
}
