package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/workspace"
)

// deadPID is a pid no process can have (pid_max is at most 1<<22).
const deadPID = 1 << 22

// nlink is the link count of the file at p.
func nlink(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Nlink
}

// trashEntries lists the names in base's trash.
func trashEntries(t *testing.T, base string) []string {
	t.Helper()
	ents, err := os.ReadDir(trashDir(base))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// plantTrash leaves a trash entry as a run killed during its removal would: a tree with
// a directory its owner made read-only, under name.
func plantTrash(t *testing.T, base, name string) string {
	t.Helper()
	entry := filepath.Join(trashDir(base), name)
	if err := os.MkdirAll(filepath.Join(entry, "ro", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "ro/b.txt", "ro/sub/c.txt"} {
		if err := os.WriteFile(filepath.Join(entry, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(entry, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	return entry
}

// TestTeardownTrashesLinkTree: Close takes the workspace's link tree out of the sandbox
// directory at once (one rename into the trash) and the background removal unlinks it,
// dropping the project's link counts back, by the time WaitRemovals returns. A
// read-only project directory is carried into the tree's modes and must not stop it.
func TestTeardownTrashesLinkTree(t *testing.T) {
	t.Parallel()
	root := trickyProject(t)
	if err := os.Chmod(filepath.Join(root, "deep"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(root, "deep"), 0o755) })
	state := t.TempDir()
	sb := newSandbox(t, Options{StateDir: state}, providers.Spec{})
	if st, err := workspace.Sync(t.Context(), sb, root, "", syncOpts); err != nil || st.Mode != workspace.ModeOverlay {
		t.Fatalf("Sync: %+v, %v", st, err)
	}
	main := filepath.Join(root, "main.go")
	if n := nlink(t, main); n != 2 {
		t.Fatalf("main.go has %d links while layered, want 2 (the project's and the lower layer's)", n)
	}
	if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sb.dir); !os.IsNotExist(err) {
		t.Errorf("sandbox directory left after Close: %v", err)
	}
	// Teardown moved the tree rather than unlinking it inline: the trash exists.
	if _, err := os.Stat(trashDir(state)); err != nil {
		t.Errorf("no trash directory after Close: %v", err)
	}
	for _, name := range trashEntries(t, state) {
		if pid := name[:len(strconv.Itoa(os.Getpid()))]; pid != strconv.Itoa(os.Getpid()) {
			t.Errorf("trash entry %s is not named after its owner, pid %d", name, os.Getpid())
		}
	}
	if !WaitRemovals(time.Minute) {
		t.Fatal("the background removal did not finish within a minute")
	}
	if left := trashEntries(t, state); len(left) > 0 {
		t.Errorf("trash after the removals: %v", left)
	}
	if n := nlink(t, main); n != 1 {
		t.Errorf("main.go has %d links after teardown, want 1", n)
	}
	if n := nlink(t, filepath.Join(root, "deep/a/b/c/d/e/f/g/h/leaf.txt")); n != 1 {
		t.Errorf("a file below the read-only directory has %d links after teardown, want 1", n)
	}
}

// TestDiscardMovesIntoTrash: discard leaves nothing at the old path and puts the tree,
// intact, inside the trash under this process's pid.
func TestDiscardMovesIntoTrash(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "sandbox", "lower")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	entry, err := discard(base, dir)
	if err != nil || entry == "" {
		t.Fatalf("discard = %q, %v; want a trash entry", entry, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the tree is still at %s: %v", dir, err)
	}
	if filepath.Dir(entry) != trashDir(base) || filepath.Base(entry)[:len(strconv.Itoa(os.Getpid()))+1] != strconv.Itoa(os.Getpid())+"-" {
		t.Errorf("entry %s is not <pid>-... in %s", entry, trashDir(base))
	}
	if b, err := os.ReadFile(filepath.Join(entry, "sub", "f")); err != nil || string(b) != "x" {
		t.Errorf("the moved tree lost its content: %q, %v", b, err)
	}
	if entry, err := discard(base, dir); entry != "" || err != nil {
		t.Errorf("discard of a missing tree = %q, %v; want nothing to do", entry, err)
	}
}

// TestCreateAndSweepRemoveDeadRunsTrash: what a killed run left in the trash is removed
// by the next Create (in the background) and by Sweep (gc), read-only directories and
// all; entries of live processes are theirs to remove and stay; a symlink in the trash
// is removed as a link, never followed out of the state directory.
func TestCreateAndSweepRemoveDeadRunsTrash(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	state := t.TempDir()
	outside := filepath.Join(t.TempDir(), "precious")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	plantTrash(t, state, strconv.Itoa(deadPID)+"-00000001")
	live := plantTrash(t, state, "1-00000002") // pid 1 is always alive
	if err := os.Symlink(outside, filepath.Join(trashDir(state), strconv.Itoa(deadPID)+"-00000003")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeAll(live) })

	p := New(Options{StateDir: state})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "sweep"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if !WaitRemovals(time.Minute) {
		t.Fatal("the background removals did not finish within a minute")
	}
	if left := trashEntries(t, state); len(left) != 1 || left[0] != "1-00000002" {
		t.Errorf("trash after Create: %v, want only the live process's entry", left)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "keep" {
		t.Errorf("the directory a trash symlink pointed to lost its content: %q, %v", b, err)
	}

	plantTrash(t, state, strconv.Itoa(deadPID)+"-00000004")
	plantTrash(t, state, "not-a-pid")
	if err := p.Sweep(t.Context()); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if left := trashEntries(t, state); len(left) != 1 || left[0] != "1-00000002" {
		t.Errorf("trash after Sweep: %v, want only the live process's entry", left)
	}
	if ids, err := p.List(t.Context()); err != nil || len(ids) != 0 {
		t.Errorf("List = %v, %v; the trash is not a sandbox", ids, err)
	}
}

// TestRemoveTrashEntryStaysInside: the removal refuses any path that is not an entry of
// the trash: the trash itself, its parent, and paths that only look like they are
// inside.
func TestRemoveTrashEntryStaysInside(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, p := range []string{
		trashDir(base),
		base,
		trashDir(base) + "-other/x",
		filepath.Join(trashDir(base), "..", "sandbox"),
		t.TempDir(),
	} {
		if err := removeTrashEntry(base, p); err == nil {
			t.Errorf("removeTrashEntry(%q) = nil, want a refusal", p)
		}
	}
	if _, err := os.Stat(base); err != nil {
		t.Errorf("the state directory is gone: %v", err)
	}
}

// TestLinkTreeIsTheKeptEntries: over a thousand-odd entries the tree is exactly the
// kept entries (and the parents an Include-style entry needs), every file a link to the
// project's own inode and every directory with its project directory's mode and mtime,
// also one entered again after others and the Include-style parents; an entry or a
// directory gone since the plan is skipped, and a cancelled context stops the build.
func TestLinkTreeIsTheKeptEntries(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	var kept []string
	for d := range 40 {
		dir := filepath.Join("d"+strconv.Itoa(d%7), "sub"+strconv.Itoa(d))
		if d%7 == d {
			kept = append(kept, filepath.Dir(dir))
		}
		kept = append(kept, dir)
		if err := os.MkdirAll(filepath.Join(project, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 40 {
			rel := filepath.Join(dir, "f"+strconv.Itoa(f))
			if err := os.WriteFile(filepath.Join(project, rel), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			kept = append(kept, rel)
		}
	}
	// Below a directory the plan left out (not in kept), and a file gone since.
	if err := os.MkdirAll(filepath.Join(project, "skipped/dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "skipped/dist/app.js"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "skipped/other.js"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A file listed after the walk left its directory, and a directory gone with its entry.
	if err := os.WriteFile(filepath.Join(project, "d0/sub0/late.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, "skipped/dist/app.js", "gone.txt", "d0/sub0/late.txt", "gonedir", "gonedir/x")
	// Distinct modes and times, set last since linking nothing changes them.
	modes := []os.FileMode{0o750, 0o700, 0o775, 0o755}
	i := 0
	err := filepath.WalkDir(project, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		i++
		if err := os.Chmod(p, modes[i%len(modes)]); err != nil {
			return err
		}
		mtime := time.Date(2020, 1, 2, 3, 4, 5, i*1000+7, time.UTC)
		return os.Chtimes(p, mtime, mtime)
	})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "lower")
	if err := linkTree(t.Context(), project, dst, kept); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{".": true, "skipped": true, "skipped/dist": true}
	for _, rel := range kept {
		if rel != "gone.txt" && rel != "gonedir" && rel != "gonedir/x" {
			want[filepath.ToSlash(rel)] = true
		}
	}
	got := map[string]bool{}
	err = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		got[filepath.ToSlash(rel)] = true
		a, errA := os.Lstat(p)
		b, errB := os.Lstat(filepath.Join(project, rel))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", rel, errA, errB)
		}
		if !d.IsDir() {
			if !os.SameFile(a, b) {
				t.Errorf("%s is not a link to the project's file", rel)
			}
			return nil
		}
		if os.SameFile(a, b) || a.Mode() != b.Mode() || !a.ModTime().Equal(b.ModTime()) {
			t.Errorf("directory %s: %v %v in the tree, want a directory of its own with %v %v", rel, a.Mode(), a.ModTime(), b.Mode(), b.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range want {
		if !got[rel] {
			t.Errorf("%s is missing from the tree", rel)
		}
	}
	for rel := range got {
		if !want[rel] {
			t.Errorf("%s is in the tree but not kept", rel)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := linkTree(ctx, project, filepath.Join(t.TempDir(), "lower"), kept); err == nil {
		t.Error("linkTree on a cancelled context succeeded")
	}
}
