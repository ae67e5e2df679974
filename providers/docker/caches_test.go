package docker

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
	"github.com/talkops/talkops/providers/cache/cachetest"
	"github.com/talkops/talkops/providers/workspace"
	"github.com/talkops/talkops/reaper"
)

// cacheDir is a host cache holding mod.zip = "module".
func cacheDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mod.zip"), []byte("module"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// createWithCaches creates a sandbox with caches; the test's removeLeft removes what it
// leaves.
func createWithCaches(t *testing.T, p *Provider, tok string, caches []providers.Cache) *Sandbox {
	t.Helper()
	sb, err := p.Create(t.Context(), providers.Spec{RunID: t.Name(), Labels: map[string]string{testLabel: tok}, Caches: caches})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return sb.(*Sandbox)
}

// localImage is the test image, skipping the test unless the engine is reached through a
// unix socket, as caches are shared only with an engine on this machine.
func localImage(t *testing.T) string {
	t.Helper()
	img := testImage(t)
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		t.Skipf("DOCKER_HOST %q is not a unix socket", h)
	}
	return img
}

// localProvider is a provider on a local engine with the test image, and the token that
// labels the test's sandboxes; whatever the test leaves is removed at its end.
func localProvider(t *testing.T) (*Provider, string) {
	t.Helper()
	img := localImage(t)
	tok := token(t)
	p := New(Options{Image: img})
	t.Cleanup(func() { p.Close() })
	t.Cleanup(func() { removeLeft(t, p, tok) })
	return p, tok
}

// closeNoneLeft closes sb and checks that nothing labelled tok is left in the engine.
func closeNoneLeft(t *testing.T, sb *Sandbox, p *Provider, tok string) {
	t.Helper()
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ids, _ := aliveIDs(t.Context(), p, tok); len(ids) != 0 {
		t.Errorf("after Close, left = %v", ids)
	}
}

// TestCachesAreCopyOnWrite: a shared cache shows at the host's own path with its tool's
// variable set, the sandbox can write it, the host copy never changes, the next sandbox
// does not see the first one's writes, and teardown removes every volume of it.
func TestCachesAreCopyOnWrite(t *testing.T) {
	t.Parallel()
	p, tok := localProvider(t)
	host := cacheDir(t)
	before := cachetest.Tree(t, host)
	caches := []providers.Cache{
		{Name: "go-mod", HostDir: host, Path: host, Env: map[string]string{"GOMODCACHE": host}},
		{Name: "missing", HostDir: filepath.Join(host, "nope"), Path: "/cache/missing"},
	}
	sb := createWithCaches(t, p, tok, caches)
	shared, notes := sb.SharedCaches()
	if len(shared) != 1 || shared[0].Name != "go-mod" || len(notes) != 1 || !strings.Contains(notes[0], "cache missing not shared") {
		t.Fatalf("SharedCaches = %+v, %q", shared, notes)
	}
	// The agent reads the cache, poisons an entry, adds one and deletes another.
	res := run(t, sb, `set -e; cat "$GOMODCACHE/mod.zip"; echo poisoned > "$GOMODCACHE/mod.zip"; echo new > `+host+`/new; mkdir -p `+host+`/d; cat `+host+`/mod.zip`)
	if got := string(res.Stdout); got != "modulepoisoned\n" {
		t.Errorf("cache in the sandbox: %q (exit %d, stderr %s)", got, res.ExitCode, res.Stderr)
	}
	if after := cachetest.Tree(t, host); !maps.Equal(before, after) {
		t.Errorf("the host cache changed: %v, want %v", after, before)
	}
	if res := run(t, sb, "rm "+host+"/mod.zip && test ! -e "+host+"/mod.zip"); res.ExitCode != 0 {
		t.Errorf("removing a cache entry in the sandbox: exit %d, %s", res.ExitCode, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(host, "mod.zip")); err != nil {
		t.Errorf("a removal in the sandbox reached the host cache: %v", err)
	}
	// The next run sees the host copy, not the first one's writes.
	next := createWithCaches(t, p, tok, caches)
	if got := string(run(t, next, `cat $GOMODCACHE/mod.zip; test -e $GOMODCACHE/new || echo " clean"`).Stdout); got != "module clean\n" {
		t.Errorf("the next sandbox sees %q, want the host copy", got)
	}
	for _, s := range []*Sandbox{sb, next} {
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if note := s.TeardownNote(); note != "" {
			t.Errorf("TeardownNote = %q for a small sandbox, want none", note)
		}
	}
	if ids, _ := aliveIDs(t.Context(), p, tok); len(ids) != 0 {
		t.Errorf("after Close, left = %v, want every container and volume removed", ids)
	}
	if after := cachetest.Tree(t, host); !maps.Equal(before, after) {
		t.Errorf("the host cache changed: %v, want %v", after, before)
	}
}

// An overlay the engine cannot mount leaves that cache out with a note, and the sandbox
// is created without it; caches that cannot be layered are refused up front.
func TestCacheMountFailureFallsBack(t *testing.T) {
	t.Parallel()
	p, tok := localProvider(t)
	good := cacheDir(t)
	comma := filepath.Join(t.TempDir(), "a,b")
	if err := os.Mkdir(comma, 0o755); err != nil {
		t.Fatal(err)
	}
	sb := createWithCaches(t, p, tok, []providers.Cache{
		{Name: "procfs", HostDir: "/proc/sys", Path: "/cache/procfs"}, // overlayfs refuses procfs as a lower layer
		{Name: "inproc", HostDir: good, Path: "/proc/talkops-cache"},  // the runtime refuses a mount there
		{Name: "comma", HostDir: comma, Path: "/cache/comma"},
		{Name: "inside", HostDir: good, Path: "/workspace/cache"},
		{Name: "good", HostDir: good, Path: "/cache/good", Env: map[string]string{"GOOD": "/cache/good"}},
	})
	defer closeBounded(t, sb)
	shared, notes := sb.SharedCaches()
	if len(shared) != 1 || shared[0].Name != "good" {
		t.Errorf("shared = %+v, want only good (notes %q)", shared, notes)
	}
	want := []string{"cache comma not shared: host directory", "cache inside not shared: sandbox path /workspace/cache overlaps the working directory",
		"cache procfs not shared: the container did not start with it: ", "cache inproc not shared: the container did not start with it: "}
	for _, w := range want {
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, w) }) {
			t.Errorf("notes %q: none starts with %q", notes, w)
		}
	}
	if got := string(run(t, sb, `cat "$GOOD/mod.zip"; test -e /cache/procfs || echo " no procfs"`).Stdout); got != "module no procfs\n" {
		t.Errorf("in the sandbox: %q", got)
	}
	closeNoneLeft(t, sb, p, tok)
}

// A container that does not start with its caches, for a reason the engine's message does
// not pin on one of them (here two caches at one path: "Duplicate mount point"), starts
// without any, each named in a note.
func TestCachesLeftOutWhenTheContainerWillNotStart(t *testing.T) {
	t.Parallel()
	p, tok := localProvider(t)
	dir := cacheDir(t)
	sb := createWithCaches(t, p, tok, []providers.Cache{{Name: "one", HostDir: dir, Path: "/cache/same"}, {Name: "two", HostDir: dir, Path: "/cache/same"}})
	defer closeBounded(t, sb)
	shared, notes := sb.SharedCaches()
	if len(shared) != 0 || len(notes) != 2 || !strings.HasPrefix(notes[0], "cache one not shared: the container did not start with it: ") || !strings.HasPrefix(notes[1], "cache two not shared: ") {
		t.Errorf("SharedCaches = %+v, %q, want none and a note for each", shared, notes)
	}
	if res := run(t, sb, "test ! -e /cache/same"); res.ExitCode != 0 {
		t.Errorf("/cache/same exists in a sandbox without caches")
	}
	closeNoneLeft(t, sb, p, tok)
}

// An engine reached over TCP may be on another machine: caches are not shared, with a
// note, and the run goes on.
func TestCachesNotSharedOverTCP(t *testing.T) {
	t.Parallel()
	_, p := newEngineProxy(t, Options{})
	tok := token(t)
	defer removeLeft(t, p, tok)
	sb := createWithCaches(t, p, tok, []providers.Cache{{Name: "go-mod", HostDir: cacheDir(t), Path: "/cache/go-mod"}})
	defer closeBounded(t, sb)
	shared, notes := sb.SharedCaches()
	if len(shared) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "not reached through a unix socket") {
		t.Errorf("SharedCaches over TCP = %+v, %q", shared, notes)
	}
	if ids, _ := aliveIDs(t.Context(), p, tok); len(ids) != 2 {
		t.Errorf("over TCP the sandbox has %v, want its container and workspace volume only", ids)
	}
}

// A run killed with its caches mounted, and one whose teardown stopped after the
// container: gc finds every cache volume by its labels and removes them, in any order.
func TestGCReapsCacheVolumes(t *testing.T) {
	t.Parallel()
	p, tok := localProvider(t)
	host := cacheDir(t)
	caches := []providers.Cache{{Name: "go-mod", HostDir: host, Path: "/cache/go-mod"}, {Name: "other", HostDir: host, Path: "/cache/other"}}
	spec := providers.Spec{RunID: "gc-cache-" + tok, Labels: map[string]string{testLabel: tok}, Caches: caches}
	killed, err := p.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	run(t, killed, "echo w > /cache/go-mod/written")
	cut, err := p.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := removeContainer(t.Context(), p.cli, cut.ID()); err != nil {
		t.Fatal(err)
	}
	ids, _ := aliveIDs(t.Context(), p, tok)
	// Each sandbox: 1 workspace + 2 caches × 3 volumes; the killed one's container too.
	if len(ids) != 1+7+7 {
		t.Fatalf("before gc: %d entries %v, want 15", len(ids), ids)
	}
	rep, err := reaper.GCLedger(t.Context(), map[string]providers.Lister{Name: p}, nil, 0, false,
		reaper.Options{RunID: spec.RunID, Alive: func(int) bool { return false }, Now: func() time.Time { return time.Now().Add(time.Minute) }})
	if err != nil {
		t.Fatalf("gc: %v (report %+v)", err, rep)
	}
	if ids, _ := aliveIDs(context.WithoutCancel(t.Context()), p, tok); len(ids) != 0 {
		t.Errorf("after gc, left = %v", ids)
	}
	if after := cachetest.Tree(t, host); len(after) != 2 { // the root and its one entry
		t.Errorf("the host cache changed: %v", after)
	}
}

// TestToolHomesHideCredentials: the cargo and gradle presets over homes holding registry
// tokens, configuration and init scripts. The container sees the cache entries at the
// tools' homes, not one credential file, can write the homes as the tools do (as root and
// as another user), the host homes never change, and teardown leaves nothing.
func TestToolHomesHideCredentials(t *testing.T) {
	t.Parallel()
	img := localImage(t)
	dir := t.TempDir()
	env := cachetest.Homes(t, dir)
	before := cachetest.Tree(t, dir)
	caches, notes, err := cache.Resolve(t.Context(), []string{"cargo", "gradle"}, func(k string) string { return env[k] })
	if err != nil || len(notes) != 0 {
		t.Fatalf("Resolve: %v, notes %q", err, notes)
	}
	for _, user := range []string{"", "1000:1000"} {
		t.Run("user="+user, func(t *testing.T) {
			tok := token(t)
			p := New(Options{Image: img, User: user})
			defer p.Close()
			defer removeLeft(t, p, tok)
			sb := createWithCaches(t, p, tok, caches)
			if shared, notes := sb.SharedCaches(); len(shared) != len(caches) {
				t.Fatalf("SharedCaches = %+v, notes %q; want all %d", shared, notes, len(caches))
			}
			res := run(t, sb, cachetest.Script(dir))
			if got, want := string(res.Stdout), cachetest.WantOutput(); got != want {
				t.Errorf("the container printed\n%s\nwant\n%s\n(stderr %s)", got, want, res.Stderr)
			}
			closeNoneLeft(t, sb, p, tok)
			if after := cachetest.Tree(t, dir); !maps.Equal(before, after) {
				t.Errorf("the host homes changed: %v, want %v", after, before)
			}
		})
	}
}

// TestWorkspaceAtProjectPathWithCaches: with shared caches and no working directory the
// workspace appears at the project's own host path (build caches keyed by path hit there),
// as on bwrap: the synced view in the container's volume, never the host directory. An
// explicit working directory wins, no caches keeps /workspace, and a path the container
// cannot use keeps /workspace with a note saying why.
func TestWorkspaceAtProjectPathWithCaches(t *testing.T) {
	t.Parallel()
	img := localImage(t)
	host := cacheDir(t)
	caches := []providers.Cache{{Name: "go-mod", HostDir: host, Path: host, Env: map[string]string{"GOMODCACHE": host}}}
	project := t.TempDir()
	writeFile := func(name, content string) {
		if err := os.WriteFile(filepath.Join(project, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("main.go", "package main\n")
	writeFile(".env", "TOKEN=s3cr3t\n")
	for _, tt := range []struct {
		name     string
		opts     Options
		spec     providers.Spec
		want     string
		wantNote string
	}{
		{name: "project path", spec: providers.Spec{ProjectDir: project, Caches: caches}, want: project},
		{name: "option wins", opts: Options{WorkingDir: "/src"}, spec: providers.Spec{ProjectDir: project, Caches: caches}, want: "/src"},
		{name: "spec wins", spec: providers.Spec{ProjectDir: project, Caches: caches, WorkDir: "/spec"}, want: "/spec"},
		{name: "no caches", spec: providers.Spec{ProjectDir: project}, want: DefaultWorkingDir},
		{name: "overlaps a cache", spec: providers.Spec{ProjectDir: filepath.Join(host, "src"), Caches: caches}, want: DefaultWorkingDir, wantNote: "overlaps the cache go-mod"},
		{name: "system directory", spec: providers.Spec{ProjectDir: "/usr/src/app", Caches: caches}, want: DefaultWorkingDir, wantNote: "inside /usr"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok := token(t)
			opts := tt.opts
			opts.Image = img
			p := New(opts)
			defer p.Close()
			defer removeLeft(t, p, tok)
			spec := tt.spec
			spec.RunID, spec.Labels = t.Name(), map[string]string{testLabel: tok}
			created, err := p.Create(t.Context(), spec)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			sb := created.(*Sandbox)
			defer func() {
				if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
					t.Error(err)
				}
			}()
			if sb.WorkDir() != tt.want {
				t.Errorf("WorkDir() = %q, want %q", sb.WorkDir(), tt.want)
			}
			_, notes := sb.SharedCaches()
			if joined := strings.Join(notes, "\n"); (tt.wantNote == "") != (joined == "") || !strings.Contains(joined, tt.wantNote) {
				t.Errorf("notes = %q, want one containing %q", notes, tt.wantNote)
			}
			st, err := workspace.Sync(t.Context(), sb, project, "", workspace.Options{})
			if err != nil || st.Target != tt.want {
				t.Fatalf("Sync: %+v, %v; want the target %s", st, err, tt.want)
			}
			res := run(t, sb, `pwd; cat main.go; test -e .env && echo "visible .env"; echo changed > main.go; echo new > new.txt; true`)
			if got, want := string(res.Stdout), tt.want+"\npackage main\n"; got != want {
				t.Errorf("the container shows %q, want %q (stderr %s)", got, want, res.Stderr)
			}
			// Attach finds the workspace where Create put it.
			again, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
			if err != nil || again.WorkDir() != tt.want {
				t.Errorf("Attach: WorkDir %q, %v; want %q", again.WorkDir(), err, tt.want)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(project, "main.go")); string(b) != "package main\n" {
		t.Errorf("the host project changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(project, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("a file written in the container reached the host project")
	}
}
