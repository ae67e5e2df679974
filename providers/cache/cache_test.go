package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
)

func TestResolve(t *testing.T) {
	home := t.TempDir()
	npm := filepath.Join(home, ".npm")
	if err := os.MkdirAll(npm, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "TF_PLUGIN_CACHE_DIR": "/opt/tf-cache"}
	getenv := func(k string) string { return env[k] }

	caches, notes, err := Resolve(context.Background(), []string{"npm", "terraform", "/srv/shared/cache", "npm"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := []providers.Cache{
		{Name: "npm", HostDir: npm, Path: npm, Env: map[string]string{"npm_config_cache": npm}},
		{Name: "terraform", HostDir: "/opt/tf-cache", Path: "/opt/tf-cache", Env: map[string]string{"TF_PLUGIN_CACHE_DIR": "/opt/tf-cache"}},
	}
	if diff := cmp.Diff(want, caches[:2]); diff != "" {
		t.Errorf("presets (-want +got):\n%s", diff)
	}
	if len(caches) != 3 || caches[2].HostDir != "/srv/shared/cache" || caches[2].Path != "/srv/shared/cache" || !strings.HasPrefix(caches[2].Name, "dir-cache-") || caches[2].Env != nil {
		t.Errorf("host directory entry = %+v", caches[2:])
	}
	if len(notes) != 0 {
		t.Errorf("notes = %q, want none", notes)
	}

	// No HOME and no variables: the preset has nowhere to look, which is a note, not an error.
	_, notes, err = Resolve(context.Background(), []string{"pip"}, func(string) string { return "" })
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "cache pip not shared") {
		t.Errorf("pip without HOME: notes %q, err %v", notes, err)
	}
}

func TestGoPresetAsksGo(t *testing.T) {
	caches, _, err := Resolve(context.Background(), []string{"go"}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(caches) != 2 || caches[0].Name != "go-mod" || caches[1].Name != "go-build" {
		t.Fatalf("go preset = %+v", caches)
	}
	for _, c := range caches {
		if !filepath.IsAbs(c.HostDir) {
			t.Errorf("%s: host dir %q is not absolute", c.Name, c.HostDir)
		}
	}
	if caches[0].Env["GOMODCACHE"] != caches[0].Path || caches[1].Env["GOCACHE"] != caches[1].Path {
		t.Errorf("go preset env = %v, %v", caches[0].Env, caches[1].Env)
	}
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{"go", "npm", "pip", "cargo", "maven", "gradle", "terraform", "/abs/dir"} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	err := Check("golang")
	if err == nil || !strings.Contains(err.Error(), `cache "golang": want a preset (cargo, go, gradle, maven, npm, pip, terraform) or an absolute host directory`) {
		t.Errorf("Check(golang) = %v", err)
	}
	if _, _, err := Resolve(context.Background(), []string{"relative/dir"}, os.Getenv); err == nil {
		t.Error("Resolve accepted a relative directory")
	}
	if !IsHostPath("/x") || IsHostPath("go") {
		t.Error("IsHostPath")
	}
}

// TestSandboxPath: a cache is seen at the host's own path (build caches key entries by
// path), except where the sandbox's system or workspace lives.
func TestSandboxPath(t *testing.T) {
	for host, want := range map[string]string{
		"/root/go/pkg/mod":         "/root/go/pkg/mod",
		"/home/runner/.cache/pip":  "/home/runner/.cache/pip",
		"/usr/local/share/cache":   "/cache/x",
		"/etc/cache":               "/cache/x",
		"/workspace/.cache":        "/cache/x",
		"/cache/go":                "/cache/x",
		"/tmp":                     "/cache/x",
		"/opt/hostedtoolcache/gox": "/opt/hostedtoolcache/gox",
	} {
		if got := sandboxPath(host, "x"); got != want {
			t.Errorf("sandboxPath(%q) = %q, want %q", host, got, want)
		}
	}
}

// TestToolHomesShareOnlyCaches: cargo and gradle share the cache parts of their homes,
// never the homes (credentials, configuration, binaries and init scripts live there): the
// home is an empty directory of the sandbox's own with the parts at their places in it.
func TestToolHomesShareOnlyCaches(t *testing.T) {
	env := map[string]string{"HOME": "/home/u", "GRADLE_USER_HOME": "/srv/gradle"}
	caches, notes, err := Resolve(context.Background(), []string{"cargo", "gradle", "cargo"}, func(k string) string { return env[k] })
	if err != nil || len(notes) != 0 {
		t.Fatalf("Resolve: %v, notes %q", err, notes)
	}
	want := []providers.Cache{
		{Name: "cargo-home", Path: "/home/u/.cargo", Env: map[string]string{"CARGO_HOME": "/home/u/.cargo"}},
		{Name: "cargo-registry", HostDir: "/home/u/.cargo/registry", Path: "/home/u/.cargo/registry"},
		{Name: "cargo-git", HostDir: "/home/u/.cargo/git", Path: "/home/u/.cargo/git"},
		{Name: "gradle-home", Path: "/srv/gradle", Env: map[string]string{"GRADLE_USER_HOME": "/srv/gradle"}},
		{Name: "gradle-caches", HostDir: "/srv/gradle/caches", Path: "/srv/gradle/caches"},
		{Name: "gradle-wrapper-dists", HostDir: "/srv/gradle/wrapper/dists", Path: "/srv/gradle/wrapper/dists"},
	}
	if diff := cmp.Diff(want, caches); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// A home at a system path moves under Root, its parts with it.
	env = map[string]string{"CARGO_HOME": "/usr/local/cargo"}
	caches, _, _ = Resolve(context.Background(), []string{"cargo"}, func(k string) string { return env[k] })
	if len(caches) != 3 || caches[0].Path != "/cache/cargo-home" || caches[0].Env["CARGO_HOME"] != "/cache/cargo-home" ||
		caches[1].HostDir != "/usr/local/cargo/registry" || caches[1].Path != "/cache/cargo-home/registry" {
		t.Errorf("cargo home under /usr: %+v", caches)
	}

	// No home found: one note, and no part without its home.
	caches, notes, _ = Resolve(context.Background(), []string{"cargo"}, func(string) string { return "" })
	if len(caches) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "cache cargo-home not shared: no host directory found (CARGO_HOME or ~/.cargo)") {
		t.Errorf("cargo without HOME: %+v, %q", caches, notes)
	}
}

func TestProjectWorkDir(t *testing.T) {
	shared := []providers.Cache{{Name: "go-mod", Path: "/home/u/go/pkg/mod"}}
	for _, tt := range []struct {
		project  string
		reserved []string
		want     string // "" means refused
		why      string
	}{
		{project: "/home/u/src/app", want: "/home/u/src/app"},
		{project: "/home/u/src/app/", want: "/home/u/src/app"},
		{project: "/tmp/app", want: "/tmp/app"},
		{project: "/tmp/app", reserved: []string{"/tmp"}, why: "inside /tmp"},
		{project: "/home/sandbox/app", reserved: []string{"/home/sandbox"}, why: "inside /home/sandbox"},
		{project: "relative/app", why: "not absolute"},
		{project: "/", why: "would hide"},
		{project: "/home", why: "would hide"},
		{project: "/root", why: "would hide"},
		{project: "/usr/src/app", why: "inside /usr"},
		{project: "/lib64", why: "inside /lib64"},
		{project: "/cache/x", why: "inside /cache"},
		{project: "/home/u/go", why: "overlaps the cache go-mod"},
		{project: "/home/u/go/pkg/mod/x", why: "overlaps the cache go-mod"},
		{project: "/usrlocal/app", want: "/usrlocal/app"},
	} {
		got, err := ProjectWorkDir(tt.project, shared, tt.reserved...)
		if got != tt.want || (tt.want == "") != (err != nil) || (err != nil && !strings.Contains(err.Error(), tt.why)) {
			t.Errorf("ProjectWorkDir(%q, %q) = %q, %v; want %q (error containing %q)", tt.project, tt.reserved, got, err, tt.want, tt.why)
		}
	}
}

// The go preset asks the host's go where its caches are, not the project talkops runs in:
// a go.mod there asking for a toolchain the host lacks would make go download one (or
// fail), and the caches would be looked up without go.
func TestGoPresetIgnoresTheProjectsToolchain(t *testing.T) {
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "go.mod"), []byte("module example.com/p\n\ngo 1.99\n\ntoolchain go1.99.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(project)
	t.Setenv("GOTOOLCHAIN", "auto") // go's default: switch to the toolchain go.mod names
	// With no variables to fall back on, only the go command can find the caches.
	caches, notes, err := Resolve(context.Background(), []string{"go"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(caches) != 2 || len(notes) != 0 {
		t.Errorf("go preset in a project asking for go 1.99 = %+v, notes %q; want both caches from the host's go", caches, notes)
	}
}
