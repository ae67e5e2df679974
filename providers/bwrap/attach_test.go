package bwrap

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/workspace"
)

// orphan makes sb look like a sandbox whose creator died: its namespace (and every
// overlay in it) goes, the directory and record stay, the record names a dead pid.
func orphan(t *testing.T, sb *Sandbox) {
	t.Helper()
	sb.mu.Lock()
	h := sb.holder
	sb.holder, sb.layered = nil, false
	sb.mu.Unlock()
	h.stop()
	m, err := readMeta(sb.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.PID = 1 << 22 // a pid that is not running
	if err := writeMeta(sb.dir, m); err != nil {
		t.Fatal(err)
	}
}

// TestAttachRemountsCaches: a sandbox attached by another provider instance, configured
// without any cache, shows the caches it was created with: the host entries, its own
// earlier writes, the caches' env variables and a tool home; its writes never reach the
// host copy.
func TestAttachRemountsCaches(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	hostCache := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostCache, "mod.zip"), []byte("module\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	spec := providers.Spec{RunID: "attach-caches", Caches: []providers.Cache{
		{Name: "missing", HostDir: filepath.Join(hostCache, "nope"), Path: "/cache/missing"},
		{Name: "go-mod", HostDir: hostCache, Path: "/cache/go-mod", Env: map[string]string{"GOMODCACHE": "/cache/go-mod"}},
		{Name: "tool-home", Path: "/cache/home", Env: map[string]string{"TOOL_HOME": "/cache/home"}},
	}}
	created, err := New(Options{StateDir: state}).Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	sb := created.(*Sandbox)
	if res := run(t, sb, `set -e; echo first > "$GOMODCACHE/first"; echo state > "$TOOL_HOME/lock"`); res.ExitCode != 0 {
		t.Fatalf("first run: %d %s", res.ExitCode, res.Stderr)
	}
	orphan(t, sb)

	p := New(Options{StateDir: state})
	attached, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(t.Context(), sb.ID()) })
	shared, notes := attached.(providers.CacheSharer).SharedCaches()
	var names []string
	for _, c := range shared {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "go-mod,tool-home" {
		t.Errorf("attached SharedCaches = %q, want the two mounted at create (notes %q)", got, notes)
	}
	res := run(t, attached, `set -e
echo "$GOMODCACHE $TOOL_HOME"
cat /cache/go-mod/mod.zip /cache/go-mod/first /cache/home/lock
echo poisoned > /cache/go-mod/mod.zip
echo second > /cache/go-mod/second
test ! -e /cache/missing && echo no-missing`)
	if got, want := string(res.Stdout), "/cache/go-mod /cache/home\nmodule\nfirst\nstate\nno-missing\n"; got != want {
		t.Errorf("attached sandbox printed %q, want %q (stderr %s)", got, want, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(hostCache, "mod.zip")); string(b) != "module\n" {
		t.Errorf("the host cache changed: %q", b)
	}
	for _, name := range []string{"first", "second"} {
		if _, err := os.Stat(filepath.Join(hostCache, name)); !os.IsNotExist(err) {
			t.Errorf("%s, written in the sandbox, reached the host cache (%v)", name, err)
		}
	}
	if err := attached.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestAttachedLayerSyncsByCopy: a run attached to a layered sandbox syncs the project
// again; the remounted layer cannot be layered a second time, so the project is copied
// over it, and the earlier run's writes stay.
func TestAttachedLayerSyncsByCopy(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	root := trickyProject(t)
	state := t.TempDir()
	created, err := New(Options{StateDir: state}).Create(t.Context(), providers.Spec{RunID: "attach-sync"})
	if err != nil {
		t.Fatal(err)
	}
	sb := created.(*Sandbox)
	if st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts); err != nil || st.Mode != workspace.ModeOverlay {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	run(t, sb, "echo kept > written.txt")
	orphan(t, sb)
	p := New(Options{StateDir: state})
	attached, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(t.Context(), sb.ID()) })
	st, err := workspace.Sync(t.Context(), attached, root, "", syncOpts)
	if err != nil || st.Mode != workspace.ModeCopy || !strings.Contains(st.ModeNote, "already layered") {
		t.Errorf("Sync on the attached sandbox: mode %q note %q, %v; want a copy saying why", st.Mode, st.ModeNote, err)
	}
	if got := string(run(t, attached, "cat written.txt main.go; test -e .env && echo leaked").Stdout); got != "kept\npackage main\n" {
		t.Errorf("attached workspace shows %q", got)
	}
	if err := attached.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestAttachRefusesLiveCreatorsCaches: the cache layers of a sandbox whose creator still
// runs are not mounted a second time.
func TestAttachRefusesLiveCreatorsCaches(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	sb := newSandbox(t, Options{StateDir: state}, providers.Spec{Caches: []providers.Cache{{Name: "c", HostDir: t.TempDir(), Path: "/cache/c"}}})
	m, err := readMeta(sb.dir)
	if err != nil {
		t.Fatal(err)
	}
	m.PID = os.Getppid() // alive, and not this process
	if err := writeMeta(sb.dir, m); err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{StateDir: state}).Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err == nil || !strings.Contains(err.Error(), "still in use by talkops process") {
		t.Errorf("Attach = %v, want a refusal naming the live process", err)
	}
}

// TestLateProjectFilesStayOut: files that appear in the host project after the plan,
// whatever the sync rules would say of them (allowed, withheld, ignored, oversized, in a
// skipped directory), never show in the layered workspace, and the lower layer is made
// of links to the project's own inodes (no byte copied).
func TestLateProjectFilesStayOut(t *testing.T) {
	t.Parallel()
	root := trickyProject(t)
	sb := newSandbox(t, Options{}, providers.Spec{})
	if st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts); err != nil || st.Mode != workspace.ModeOverlay {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	// .env and big.bin already existed and were left out; they are replaced by
	// allowed-looking content now, along with new files of every kind.
	late := map[string]string{
		"late.txt":                "allowed by the rules\n",
		"newdir/late.go":          "package late\n",
		"pkg/util/late.go":        "package util\n",
		".env":                    "SECRET=late\n",
		"config/.env.local":       "SECRET=late\n",
		"late.log":                "ignored by .gitignore\n",
		"out/late":                "in an ignored directory\n",
		"node_modules/late/x.js":  "in a skipped directory\n",
		"huge.bin":                strings.Repeat("y", 4096),
		"deep/a/b/c/late-new.txt": "deep\n",
	}
	for rel, body := range late {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var script strings.Builder
	for rel := range late {
		script.WriteString("test -e '" + rel + "' && echo visible: " + rel + "\n")
	}
	script.WriteString("ls newdir 2>/dev/null; cat main.go\n")
	if got := string(run(t, sb, script.String()).Stdout); got != "package main\n" {
		t.Errorf("late files visible in the sandbox:\n%s", got)
	}

	host, err := os.Lstat(filepath.Join(root, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	lower, err := os.Lstat(filepath.Join(sb.layerDirs("workspace").lower, "main.go"))
	if err != nil || !os.SameFile(host, lower) {
		t.Errorf("the lower layer's main.go is not a link to the project's (%v)", err)
	}
}

// TestLinkedFilesStayUnchanged: the lower layer shares the project's inodes, so every
// way a command can change a file (data, mode, times, size, removal; metadata-only
// changes are copied up alone when talkops runs as root) must leave the host's inode as
// it was, and teardown drops the extra links (in the background: see WaitRemovals).
func TestLinkedFilesStayUnchanged(t *testing.T) {
	t.Parallel()
	root := trickyProject(t)
	names := []string{"main.go", "keep.log", "scripts/run.sh", "pkg/util/util.go", "docs/a b/with space.md"}
	old := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	before := map[string]syscall.Stat_t{}
	for _, n := range names {
		p := filepath.Join(root, filepath.FromSlash(n))
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		before[n] = st
	}
	sb := newSandbox(t, Options{}, providers.Spec{})
	if st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts); err != nil || st.Mode != workspace.ModeOverlay {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	res := run(t, sb, `set -e
chmod 777 main.go
touch -d 2000-01-01 keep.log
truncate -s 0 scripts/run.sh
echo more >> pkg/util/util.go
rm "docs/a b/with space.md"
stat -c '%a' main.go`)
	if res.ExitCode != 0 || string(res.Stdout) != "777\n" {
		t.Fatalf("changes in the sandbox: %d %q %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	check := func(when string, links uint64) {
		for _, n := range names {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(root, filepath.FromSlash(n)), &st); err != nil {
				t.Fatalf("%s: %s: %v", when, n, err)
			}
			b := before[n]
			if st.Ino != b.Ino || st.Mode != b.Mode || st.Size != b.Size || st.Mtim != b.Mtim || st.Uid != b.Uid || st.Nlink != links {
				t.Errorf("%s: the host's %s changed: mode %o size %d mtime %v links %d, was mode %o size %d mtime %v (want %d links)",
					when, n, st.Mode, st.Size, st.Mtim, st.Nlink, b.Mode, b.Size, b.Mtim, links)
			}
		}
	}
	check("while the sandbox lives", 2)
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !WaitRemovals(time.Minute) { // teardown leaves the link tree to a background removal
		t.Fatal("the link tree's removal did not finish within a minute")
	}
	check("after teardown", 1)
	if b, _ := os.ReadFile(filepath.Join(root, "pkg/util/util.go")); string(b) != "package util\n" {
		t.Errorf("the host's util.go is %q", b)
	}
}

// TestLayerAcrossFileSystemsCopies: a project on another file system than the state
// directory cannot be linked; the workspace is copied instead, the note says why, and no
// half-built layer is left.
func TestLayerAcrossFileSystemsCopies(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("/dev/shm", "talkops-bwrap-test-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	state := t.TempDir()
	if sameDevice(t, base, state) {
		t.Skip("/dev/shm is on the same file system as the state directory")
	}
	writeTrickyProject(t, base)
	sb := newSandbox(t, Options{StateDir: state}, providers.Spec{})
	st, err := workspace.Sync(t.Context(), sb, base, "", syncOpts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != workspace.ModeCopy || !strings.Contains(st.ModeNote, "another file system") {
		t.Errorf("Sync: mode %q note %q, want a copy with a note naming the file systems", st.Mode, st.ModeNote)
	}
	if _, err := os.Stat(sb.layerDirs("workspace").base); !os.IsNotExist(err) {
		t.Errorf("a half-built layer is left: %v", err)
	}
	if got := string(run(t, sb, "cat main.go; test -e .env && echo leaked").Stdout); got != "package main\n" {
		t.Errorf("the copied workspace shows %q", got)
	}
}

func sameDevice(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return fa.Sys().(*syscall.Stat_t).Dev == fb.Sys().(*syscall.Stat_t).Dev
}

// BenchmarkLinkTree is the part of a layered sync that builds the lower layer: the hard
// links to the plan's selection of TALKOPS_BENCH_TREE and their directories' attributes,
// then their removal (skipped when unset; see BenchmarkWorkspace).
func BenchmarkLinkTree(b *testing.B) {
	tree := os.Getenv("TALKOPS_BENCH_TREE")
	if tree == "" {
		b.Skip("TALKOPS_BENCH_TREE is not set")
	}
	var kept []string
	err := filepath.WalkDir(tree, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != tree {
			rel, _ := filepath.Rel(tree, p)
			kept = append(kept, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	base := b.TempDir()
	var link, remove time.Duration
	for b.Loop() {
		dst := filepath.Join(base, "lower")
		t0 := time.Now()
		// The links and the directories' attributes.
		if err := linkTree(b.Context(), tree, dst, kept); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := removeAll(dst); err != nil {
			b.Fatal(err)
		}
		link, remove = link+t1.Sub(t0), remove+time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(link.Milliseconds())/n, "link-ms")
	b.ReportMetric(float64(remove.Milliseconds())/n, "remove-ms")
}
