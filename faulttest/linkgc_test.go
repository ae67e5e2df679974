package faulttest

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// TestBwrapTeardownLeavesNoLinkTree runs the real binary on bwrap with a layered
// workspace, whose lower layer is a hard link per project file. Teardown moves that tree
// into the state directory's trash and removes it in the background; by the time the
// process exits it is gone: the project's files are back to one link and the trash is
// empty. A trash entry a killed run left (its pid gone, a read-only directory inside) is
// removed by `sandbox gc` and by the next run's create, and a symlink planted in the
// trash is removed without following it out of the state directory.
func TestBwrapTeardownLeavesNoLinkTree(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pBwrap)
	dir := filepath.Join(root, "project")
	writeFiles(t, dir, map[string]string{
		"README.md":      "readme\n",
		"src/a/b/c.go":   "package b\n",
		"src/a/other.go": "package a\n",
		"r.toml":         "name = \"links\"\n[[check]]\nid = \"sees\"\nrun = 'test -f src/a/b/c.go && echo built > out.txt'\n",
	})
	trash := filepath.Join(env["XDG_STATE_HOME"], "talkops", "bwrap", ".trash")
	outside := filepath.Join(root, "outside")
	writeFiles(t, outside, map[string]string{"keep": "keep\n"})
	plant := func(name string) {
		t.Helper()
		entry := filepath.Join(trash, name)
		writeFiles(t, entry, map[string]string{"x.go": "x\n", "ro/y.go": "y\n"})
		if err := os.Chmod(filepath.Join(entry, "ro"), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	const dead = 1 << 22 // above pid_max: no process has it
	trashLeft := func() []string {
		ents, err := os.ReadDir(trash)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}

	plant(strconv.Itoa(dead) + "-0000000a")
	if err := os.Symlink(outside, filepath.Join(trash, strconv.Itoa(dead)+"-0000000b")); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runTalkops(t, dir, env, time.Minute, "sandbox", "gc", "--provider", pBwrap); code != 0 {
		t.Fatalf("sandbox gc: exit %d\n%s", code, stderr)
	}
	if left := trashLeft(); len(left) != 0 {
		t.Errorf("trash after sandbox gc: %v, want empty", left)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "keep\n" {
		t.Errorf("a file the trash symlink pointed to: %q, %v; want it untouched", b, err)
	}

	plant(strconv.Itoa(dead) + "-0000000c")
	reportDir := filepath.Join(root, "report")
	code, _, stderr := runTalkops(t, dir, env, 2*time.Minute, "--sandbox", pBwrap, "--rubric", "r.toml", "--report-dir", reportDir, "-q")
	r, _ := readReport(t, reportDir, tail(stderr))
	if code != 0 || r.Sync == nil || r.Sync.Mode != "overlay" {
		t.Fatalf("exit %d, sync %+v; want 0 with a layered workspace\n%s", code, r.Sync, tail(stderr))
	}
	if r.Teardown == nil || r.Teardown.Status != result.TeardownDeleted || r.Teardown.Note != "" || r.Teardown.Error != "" {
		t.Errorf("teardown %+v, want deleted with no note", r.Teardown)
	}
	if left := trashLeft(); len(left) != 0 {
		t.Errorf("trash after the run exited: %v, want its link tree and the killed run's entry gone", left)
	}
	for _, f := range []string{"README.md", "src/a/b/c.go", "src/a/other.go"} {
		fi, err := os.Lstat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
			t.Errorf("%s has %d links after the run, want 1", f, n)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); !os.IsNotExist(err) {
		t.Errorf("the sandbox's write reached the project: %v", err)
	}
	if left := waitNoLeftovers(env[markerVar], root, 5*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}
