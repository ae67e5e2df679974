package bwrap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
	"github.com/talkops/talkops/providers/cache/cachetest"
	"github.com/talkops/talkops/providers/workspace"
)

// trickyProject writes a project that exercises every sync rule: .gitignore with a
// negation, the skip list at depth, withheld secrets, an oversized file, links inside and
// out of the tree, a fifo, an Include pattern into a skipped directory, and modes.
func trickyProject(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeTrickyProject(t, root)
	return root
}

func writeTrickyProject(t *testing.T, root string) {
	t.Helper()
	files := map[string]string{
		".gitignore":                    "*.log\n!keep.log\nout/\n",
		"main.go":                       "package main\n",
		"keep.log":                      "kept\n",
		"drop.log":                      "dropped\n",
		"out/bin":                       "built\n",
		"pkg/util/util.go":              "package util\n",
		"pkg/node_modules/x/index.js":   "module.exports = 1\n",
		"node_modules/left/index.js":    "x\n",
		"vendor/dist/app.js":            "included through a pattern\n",
		".env":                          "SECRET=1\n",
		"config/.env.production":        "SECRET=2\n",
		".env.example":                  "SECRET=\n",
		"keys/id_ed25519":               "private\n",
		"keys/id_ed25519.pub":           "public\n",
		"deploy/service-account.json":   "{}\n",
		"docs/a b/with space.md":        "# spaced\n",
		".talkops/check.sh":             "#!/bin/sh\nexit 0\n",
		"big.bin":                       strings.Repeat("x", 4096),
		"scripts/run.sh":                "#!/bin/sh\necho run\n",
		"deep/a/b/c/d/e/f/g/h/leaf.txt": "leaf\n",
	}
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"link-in", "pkg/util"}, {"link-out", "../../etc"}, {"link-abs", "/etc/passwd"}, {"pkg/up", "../main.go"}} {
		if err := os.Symlink(l[1], filepath.Join(root, l[0])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "scripts/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
}

var syncOpts = workspace.Options{Include: []string{"vendor/dist/app.js"}, MaxFileSize: 1024}

// listing is what a sandbox shows of its workspace: type, mode, size, path and content
// hash of every entry, sorted.
const listing = `find . -mindepth 1 \( -type f -printf '%y %m %s %p ' -exec sh -c 'sha256sum < "$1" | cut -c1-16' _ {} \; \) -o \( ! -type f -printf '%y %m %p %l\n' \) | LC_ALL=C sort`

// TestOverlayMatchesCopy: the layered workspace shows exactly what the copy shows, for a
// plain directory and for a git work tree (where tracked files are sent whatever their
// folder is called).
func TestOverlayMatchesCopy(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		overlayMatchesCopy(t, trickyProject(t))
	})
	t.Run("git", func(t *testing.T) {
		t.Parallel()
		root := trickyProject(t)
		git := func(args ...string) {
			cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		git("init", "-q")
		git("add", "-f", "main.go", "pkg/node_modules/x/index.js", "out/bin", "drop.log", ".gitignore")
		git("commit", "-q", "-m", "tracked")
		overlayMatchesCopy(t, root)
	})
}

func overlayMatchesCopy(t *testing.T, root string) {
	copySB := newSandbox(t, Options{Overlay: OverlayOff}, providers.Spec{})
	layerSB := newSandbox(t, Options{}, providers.Spec{})

	cs, err := workspace.Sync(t.Context(), copySB, root, "", syncOpts)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := workspace.Sync(t.Context(), layerSB, root, "", syncOpts)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Mode != workspace.ModeCopy || !strings.Contains(cs.ModeNote, "overlay") {
		t.Errorf("copy sandbox: mode %q note %q, want copy with a note naming the overlay option", cs.Mode, cs.ModeNote)
	}
	if ls.Mode != workspace.ModeOverlay {
		t.Fatalf("layered sandbox: mode %q (%s), want overlay", ls.Mode, ls.ModeNote)
	}
	if cs.Files != ls.Files || cs.Dirs != ls.Dirs || cs.Bytes != ls.Bytes || cs.Ignored != ls.Ignored ||
		!cmp.Equal(cs.Secrets, ls.Secrets) || !cmp.Equal(cs.TooLarge, ls.TooLarge) || !cmp.Equal(cs.SymlinksOutside, ls.SymlinksOutside) {
		t.Errorf("stats differ:\ncopy  %+v\nlayer %+v", cs, ls)
	}
	want := string(run(t, copySB, listing).Stdout)
	got := string(run(t, layerSB, listing).Stdout)
	// Directory modes: the copy's root directory is the sandbox's own, like the layer's.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the layered workspace differs from the copy (-copy +layer):\n%s", diff)
	}
	for _, gone := range []string{".env", "config/.env.production", "keys/id_ed25519", "big.bin", "link-out", "link-abs", "node_modules", "pipe"} {
		if strings.Contains(got, " ./"+gone+" ") || strings.Contains(got, " ./"+gone+"\n") {
			t.Errorf("%s is visible in the layered workspace", gone)
		}
	}
}

// TestOverlayWritesStayInTheSandbox: writes, deletes and chmods in the sandbox never reach
// the project, land in the sandbox's upper layer only, and teardown removes them.
func TestOverlayWritesStayInTheSandbox(t *testing.T) {
	t.Parallel()
	root := trickyProject(t)
	before := hashTree(t, root)
	sb := newSandbox(t, Options{}, providers.Spec{})
	if st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts); err != nil || st.Mode != workspace.ModeOverlay {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	res := run(t, sb, `set -e
echo changed >> main.go
rm pkg/util/util.go
chmod 600 scripts/run.sh
mkdir -p new/dir && echo new > new/dir/file
echo leak > .env
ln -sf /etc/passwd main2.go
cat main.go; ls -la`)
	if res.ExitCode != 0 {
		t.Fatalf("writes failed (%d): %s", res.ExitCode, res.Stderr)
	}
	if after := hashTree(t, root); !cmp.Equal(before, after) {
		t.Fatalf("the host project changed:\n%s", cmp.Diff(before, after))
	}
	upper := sb.layerDirs("workspace").upper
	var written []string
	_ = filepath.WalkDir(upper, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != upper {
			rel, _ := filepath.Rel(upper, p)
			written = append(written, rel)
		}
		return nil
	})
	for _, want := range []string{"main.go", "new/dir/file", ".env", "scripts/run.sh"} {
		if !strings.Contains(strings.Join(written, "\n")+"\n", want+"\n") {
			t.Errorf("%s is not in the upper layer: %v", want, written)
		}
	}
	if len(written) > 20 {
		t.Errorf("the upper layer holds %d entries for a handful of writes: %v", len(written), written)
	}
	// The host reads and writes the merged view through Download and Upload.
	rc, err := sb.Download(t.Context(), "main.go")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "package main\nchanged\n" {
		t.Errorf("Download(main.go) = %q", b)
	}
	if err := sb.Upload(t.Context(), "up", bytes.NewReader(tarDir(t, t.TempDir()))); err != nil {
		t.Errorf("Upload into the layered workspace: %v", err)
	}
	dir := sb.dir
	if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox directory left after Close: %v", err)
	}
	if after := hashTree(t, root); !cmp.Equal(before, after) {
		t.Fatalf("the host project changed after teardown:\n%s", cmp.Diff(before, after))
	}
}

// TestOverlayAttachRemounts: a layered sandbox left by a killed run can be attached again
// with its writes intact.
func TestOverlayAttachRemounts(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	root := trickyProject(t)
	state := t.TempDir()
	p := New(Options{StateDir: state})
	created, err := p.Create(t.Context(), providers.Spec{RunID: "attach"})
	if err != nil {
		t.Fatal(err)
	}
	sb := created.(*Sandbox)
	if st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts); err != nil || st.Mode != workspace.ModeOverlay {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	run(t, sb, "echo kept > written.txt")
	// Simulate the creator's death: its namespace goes, the directory stays.
	sb.mu.Lock()
	h := sb.holder
	sb.holder, sb.layered = nil, false
	sb.mu.Unlock()
	h.stop()
	m, _ := readMeta(sb.dir)
	m.PID = 1 << 22 // a pid that is not running
	if err := writeMeta(sb.dir, m); err != nil {
		t.Fatal(err)
	}

	again, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := run(t, again, "cat written.txt main.go; test ! -e .env && echo hidden")
	if got := string(out.Stdout); got != "kept\npackage main\nhidden\n" {
		t.Errorf("attached workspace shows %q", got)
	}
	if err := again.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Fatal(err)
	}
}

// TestCachesAreCopyOnWrite: a shared cache is visible and writable in the sandbox, the
// host copy never changes, and the sandbox's writes are gone with it.
func TestCachesAreCopyOnWrite(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	if err := os.WriteFile(filepath.Join(cache, "mod.zip"), []byte("module"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := providers.Spec{Caches: []providers.Cache{
		{Name: "go-mod", HostDir: cache, Path: "/cache/go-mod", Env: map[string]string{"GOMODCACHE": "/cache/go-mod"}},
		{Name: "missing", HostDir: filepath.Join(cache, "nope"), Path: "/cache/missing"},
	}}
	sb := newSandbox(t, Options{}, spec)
	shared, notes := sb.SharedCaches()
	if len(shared) != 1 || shared[0].Name != "go-mod" || len(notes) != 1 || !strings.Contains(notes[0], "missing") {
		t.Fatalf("SharedCaches = %+v, %q", shared, notes)
	}
	res := run(t, sb, `set -e; cat "$GOMODCACHE/mod.zip"; echo poisoned > "$GOMODCACHE/mod.zip"; echo new > /cache/go-mod/new; cat /cache/go-mod/mod.zip`)
	if got := string(res.Stdout); got != "modulepoisoned\n" {
		t.Errorf("cache in the sandbox: %q (stderr %s)", got, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "mod.zip")); string(b) != "module" {
		t.Errorf("the host cache changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(cache, "new")); !os.IsNotExist(err) {
		t.Errorf("a file written in the sandbox reached the host cache")
	}
	// A second sandbox sees the host copy, not the first one's writes.
	other := newSandbox(t, Options{}, spec)
	if got := string(run(t, other, `cat /cache/go-mod/mod.zip; test -e /cache/go-mod/new || echo " clean"`).Stdout); got != "module clean\n" {
		t.Errorf("second sandbox sees %q", got)
	}
}

func hashTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			v += " -> " + target
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkWorkspace is create + sync + teardown of the project in TALKOPS_BENCH_TREE
// (skipped when unset), copied and layered, with the parts reported separately, and the
// background removal of the link tree that follows teardown (bg-removal-ms):
//
//	go run ./providers/workspace/internal/gentree -dir /var/tmp/tree -files 20000 -size 200MB
//	TALKOPS_BENCH_TREE=/var/tmp/tree go test -run '^$' -bench Workspace -benchtime 3x ./providers/bwrap/
func BenchmarkWorkspace(b *testing.B) {
	tree := os.Getenv("TALKOPS_BENCH_TREE")
	if tree == "" {
		b.Skip("TALKOPS_BENCH_TREE is not set")
	}
	for _, mode := range []struct {
		name    string
		overlay string
	}{{"copy", OverlayOff}, {"overlay", OverlayAuto}} {
		b.Run(mode.name, func(b *testing.B) {
			p := New(Options{StateDir: b.TempDir(), Overlay: mode.overlay})
			var create, sync, write, teardown, removal time.Duration
			for b.Loop() {
				t0 := time.Now()
				sb, err := p.Create(b.Context(), providers.Spec{RunID: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				st, err := workspace.Sync(b.Context(), sb, tree, "", workspace.Options{})
				if err != nil || (mode.overlay == OverlayAuto) != (st.Mode == workspace.ModeOverlay) {
					b.Fatalf("Sync: %+v, %v", st, err)
				}
				t2 := time.Now()
				// A run writes a little: a build output and one edited file.
				if res, err := sb.Exec(b.Context(), providers.Shell("mkdir -p out && head -c 1048576 /dev/zero > out/bin && echo x >> $(find . -type f -name '*.txt' | head -1)")); err != nil || res.ExitCode != 0 {
					b.Fatalf("write: %v %s", err, res.Stderr)
				}
				t3 := time.Now()
				if err := sb.Close(context.WithoutCancel(b.Context())); err != nil {
					b.Fatal(err)
				}
				t4 := time.Now()
				// The link tree's removal after teardown, apart, and not overlapping the
				// next iteration.
				if !WaitRemovals(time.Minute) {
					b.Fatal("the background removal did not finish within a minute")
				}
				t5 := time.Now()
				create, sync, write, teardown = create+t1.Sub(t0), sync+t2.Sub(t1), write+t3.Sub(t2), teardown+t4.Sub(t3)
				removal += t5.Sub(t4)
			}
			n := float64(b.N)
			b.ReportMetric(float64(create.Milliseconds())/n, "create-ms")
			b.ReportMetric(float64(sync.Milliseconds())/n, "sync-ms")
			b.ReportMetric(float64(write.Milliseconds())/n, "write-ms")
			b.ReportMetric(float64(teardown.Milliseconds())/n, "teardown-ms")
			b.ReportMetric(float64(removal.Milliseconds())/n, "bg-removal-ms")
		})
	}
}

// projectOutsideTmp is trickyProject at a path the sandbox profile leaves free (a project
// under /tmp cannot appear at its own path: the sandbox has its own /tmp).
func projectOutsideTmp(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "talkops-bwrap-test-")
	if err != nil {
		t.Skipf("no directory outside /tmp for the project: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	writeTrickyProject(t, base)
	return base
}

// TestWorkspaceAtProjectPathWithCaches: with a shared cache and no working_dir, the
// workspace appears at the project's own host path (so build caches keyed by path hit),
// and it is still the sandbox's layer over the synced view: hidden files stay hidden and
// writes never reach the project. The sandbox record keeps the path for Attach.
func TestWorkspaceAtProjectPathWithCaches(t *testing.T) {
	t.Parallel()
	root := projectOutsideTmp(t)
	before := hashTree(t, root)
	cache := t.TempDir()
	spec := providers.Spec{ProjectDir: root, Caches: []providers.Cache{{Name: "c", HostDir: cache, Path: "/cache/c"}}}
	sb := newSandbox(t, Options{}, spec)
	if sb.WorkDir() != root {
		_, notes := sb.SharedCaches()
		t.Fatalf("WorkDir() = %q, want the project's path %q (notes %q)", sb.WorkDir(), root, notes)
	}
	if m, err := readMeta(sb.dir); err != nil || m.WorkDir != root {
		t.Errorf("sandbox record work_dir = %q (%v), want %q", m.WorkDir, err, root)
	}
	st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts)
	if err != nil || st.Mode != workspace.ModeOverlay || st.Target != root {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	res := run(t, sb, `pwd; cat main.go; for f in .env keys/id_ed25519 big.bin; do test -e "$f" && echo "visible $f"; done
echo changed >> main.go; echo new > new.txt; rm keep.log; true`)
	if got, want := string(res.Stdout), root+"\npackage main\n"; got != want {
		t.Errorf("the sandbox shows %q, want %q (stderr %s)", got, want, res.Stderr)
	}
	if after := hashTree(t, root); !cmp.Equal(before, after) {
		t.Fatalf("the host project changed:\n%s", cmp.Diff(before, after))
	}
}

// TestWorkspacePathChoice: an explicit working directory always wins, a sandbox without
// shared caches keeps /workspace, and a project path the sandbox cannot show at its own
// place (here under /tmp) keeps /workspace with a note saying why.
func TestWorkspacePathChoice(t *testing.T) {
	t.Parallel()
	cache := []providers.Cache{{Name: "c", HostDir: t.TempDir(), Path: "/cache/c"}}
	project := projectOutsideTmp(t)
	for _, tt := range []struct {
		name     string
		opts     Options
		spec     providers.Spec
		want     string
		wantNote string
	}{
		{name: "option wins", opts: Options{WorkingDir: "/src"}, spec: providers.Spec{ProjectDir: project, Caches: cache}, want: "/src"},
		{name: "spec wins", spec: providers.Spec{ProjectDir: project, Caches: cache, WorkDir: "/spec"}, want: "/spec"},
		{name: "no caches", spec: providers.Spec{ProjectDir: project}, want: DefaultWorkingDir},
		{name: "project under tmp", spec: providers.Spec{ProjectDir: t.TempDir(), Caches: cache}, want: DefaultWorkingDir, wantNote: "not the project's path"},
		{name: "cache over the working directory", opts: Options{WorkingDir: "/cache/c"}, spec: providers.Spec{ProjectDir: project, Caches: cache}, want: "/cache/c", wantNote: "cache c not shared: sandbox path /cache/c overlaps the working directory /cache/c"},
		{name: "cache inside the working directory", opts: Options{WorkingDir: "/cache"}, spec: providers.Spec{ProjectDir: project, Caches: cache}, want: "/cache", wantNote: "overlaps the working directory /cache"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t, tt.opts, tt.spec)
			if sb.WorkDir() != tt.want {
				t.Errorf("WorkDir() = %q, want %q", sb.WorkDir(), tt.want)
			}
			if got := string(run(t, sb, "pwd").Stdout); got != tt.want+"\n" {
				t.Errorf("pwd = %q, want %q", got, tt.want)
			}
			_, notes := sb.SharedCaches()
			joined := strings.Join(notes, "\n")
			if (tt.wantNote == "") != (joined == "") || !strings.Contains(joined, tt.wantNote) {
				t.Errorf("notes = %q, want one containing %q", notes, tt.wantNote)
			}
		})
	}
}

func TestProjectWorkDir(t *testing.T) {
	t.Parallel()
	caches := []mountedCache{{Cache: providers.Cache{Name: "go-mod", Path: "/home/u/go/pkg/mod"}}}
	for _, tt := range []struct {
		project string
		r       resolved
		want    string // "" means refused
		why     string
	}{
		{project: "/home/u/src/app", want: "/home/u/src/app"},
		{project: "/home/u/src/app/", want: "/home/u/src/app"},
		{project: "relative/app", why: "not absolute"},
		{project: "/tmp/app", why: "/tmp"},
		{project: "/usr/src/app", why: "/usr"},
		{project: "/lib/app", why: "/lib"},
		{project: "/home/sandbox/app", why: HomeDir},
		{project: "/home/u/src/app", r: resolved{rootfs: "/srv/rootfs"}, why: "rootfs"},
		{project: "/home/u/go", why: "overlaps the cache go-mod"},
		{project: "/home/u/go/pkg/mod/x", why: "overlaps the cache go-mod"},
		{project: "/opt/app", r: resolved{roBinds: []string{"/opt/app/tools"}}, why: "would be hidden"},
		{project: "/opt/app", r: resolved{roBinds: []string{"/opt"}}, want: "/opt/app"},
	} {
		got, err := projectWorkDir(tt.project, tt.r, caches)
		if got != tt.want || (tt.want == "") != (err != nil) || (err != nil && !strings.Contains(err.Error(), tt.why)) {
			t.Errorf("projectWorkDir(%q, %+v) = %q, %v; want %q (error containing %q)", tt.project, tt.r, got, err, tt.want, tt.why)
		}
	}
}

// TestOverlayDirsKeepProjectAttrs: the workspace root and a directory holding a hidden
// file (both directories of talkops's layers) show the project's mode and modification
// time, as the copy does; Go's test cache hashes the mtime of directories a test stats.
func TestOverlayDirsKeepProjectAttrs(t *testing.T) {
	t.Parallel()
	root := trickyProject(t)
	old := time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)
	if err := os.Chmod(filepath.Join(root, "config"), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"config", "."} {
		if err := os.Chtimes(filepath.Join(root, dir), old, old); err != nil {
			t.Fatal(err)
		}
	}
	sb := newSandbox(t, Options{}, providers.Spec{})
	if st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts); err != nil || st.Mode != workspace.ModeOverlay {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	res := run(t, sb, "stat -c '%n %a %.9Y' . config; test -e config/.env.production && echo visible")
	want := fmt.Sprintf(". 755 %d.%09d\nconfig 750 %d.%09d\n", old.Unix(), old.Nanosecond(), old.Unix(), old.Nanosecond())
	if fi, err := os.Stat(root); err == nil && fi.Mode().Perm() != 0o755 {
		want = strings.Replace(want, ". 755", fmt.Sprintf(". %o", fi.Mode().Perm()), 1)
	}
	if got := string(res.Stdout); got != want {
		t.Errorf("the sandbox shows\n%s\nwant\n%s(stderr %s)", got, want, res.Stderr)
	}
}

// TestCacheMetadataChangeCopiesNoData: outside a user namespace the overlays copy only
// metadata up when a command changes only metadata, as Go does to every build-cache
// entry older than an hour that it uses; the file's data stays in the host's copy.
func TestCacheMetadataChangeCopiesNoData(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("metacopy needs talkops to run as root (the kernel refuses it in a user namespace)")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is needed to change an mtime without opening the file")
	}
	cache := t.TempDir()
	entry := filepath.Join(cache, "entry-d")
	if err := os.WriteFile(entry, bytes.Repeat([]byte("x"), 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Hour)
	if err := os.Chtimes(entry, old, old); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, Options{}, providers.Spec{Caches: []providers.Cache{{Name: "c", HostDir: cache, Path: "/cache/c"}}})
	res := run(t, sb, `/usr/bin/python3 -c 'import os; os.utime("/cache/c/entry-d")' && stat -c %s /cache/c/entry-d && head -c 3 /cache/c/entry-d`)
	if got := string(res.Stdout); got != fmt.Sprintf("%d\nxxx", 8<<20) {
		t.Fatalf("the sandbox shows %q (stderr %s)", got, res.Stderr)
	}
	var used int64
	_ = filepath.WalkDir(sb.layerDirs("cache-0").upper, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := os.Lstat(p); err == nil {
				used += fi.Sys().(*syscall.Stat_t).Blocks * 512
			}
		}
		return err
	})
	if used > 1<<20 {
		t.Errorf("changing an mtime put %d bytes in the sandbox's layer, want metadata only", used)
	}
	if fi, err := os.Stat(entry); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("the host entry changed: %v, %v", fi.ModTime(), err)
	}
}

// TestToolHomesHideCredentials: the cargo and gradle presets over homes holding registry
// tokens, configuration and init scripts. The sandbox sees the cache entries at the
// tools' homes, not one credential file, can write the homes as the tools do, and the
// host homes never change.
func TestToolHomesHideCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := cachetest.Homes(t, dir)
	before := cachetest.Tree(t, dir)
	caches, notes, err := cache.Resolve(t.Context(), []string{"cargo", "gradle"}, func(k string) string { return env[k] })
	if err != nil || len(notes) != 0 {
		t.Fatalf("Resolve: %v, notes %q", err, notes)
	}
	sb := newSandbox(t, Options{}, providers.Spec{Caches: caches})
	if shared, notes := sb.SharedCaches(); len(shared) != len(caches) {
		t.Fatalf("SharedCaches = %+v, notes %q; want all %d", shared, notes, len(caches))
	}
	res := run(t, sb, cachetest.Script(dir))
	if got, want := string(res.Stdout), cachetest.WantOutput(); got != want {
		t.Errorf("the sandbox printed\n%s\nwant\n%s\n(stderr %s)", got, want, res.Stderr)
	}
	if after := cachetest.Tree(t, dir); !cmp.Equal(before, after) {
		t.Errorf("the host homes changed:\n%s", cmp.Diff(before, after))
	}
}
