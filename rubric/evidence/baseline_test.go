package evidence_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/docker"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/rubric/evidence"
)

// setupScript populates a workspace the way a project and a setup script would.
const setupScript = `set -e
mkdir -p src sub/deep .git node_modules/pkg .talkops/runs/r1 vendor/.git
printf 'hello\n' > src/a.txt
printf 'keep\n' > keep.txt
printf 'x\000y' > bin.dat
printf 'gone\n' > sub/deep/old.txt
printf 'ref\n' > .git/HEAD
printf 'dep\n' > node_modules/pkg/index.js
printf 'sub\n' > vendor/.git/HEAD
ln -s src/a.txt link
printf 'with space\n' > 'sp ace.txt'
i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done > big.txt
`

// agentScript is what the agent did: edits, an added and a removed file, a binary change,
// a retargeted symlink, a big rewrite, and changes in excluded trees that must not show.
const agentScript = `set -e
printf 'hello\nworld\n' > src/a.txt
printf 'x\000z' > bin.dat
rm sub/deep/old.txt
printf 'new\n' > new.txt
printf 'changed\n' > .git/HEAD
printf 'dep2\n' > node_modules/pkg/index.js
printf 'sub2\n' > vendor/.git/HEAD
printf '{}' > .talkops/runs/r1/result.json
rm link && ln -s keep.txt link
printf 'with space\nmore\n' > 'sp ace.txt'
i=0; while [ $i -lt 3000 ]; do echo "LINE $i"; i=$((i+1)); done > big.txt
`

type fileChange struct {
	Path, Change    string
	Binary, Symlink bool
	Truncated       bool
}

var wantChanges = []fileChange{
	{Path: "big.txt", Change: evidence.Modified},
	{Path: "bin.dat", Change: evidence.Modified, Binary: true},
	{Path: "link", Change: evidence.Modified, Symlink: true},
	{Path: "new.txt", Change: evidence.Added},
	{Path: "sp ace.txt", Change: evidence.Modified},
	{Path: "src/a.txt", Change: evidence.Modified},
	{Path: "sub/deep/old.txt", Change: evidence.Removed},
}

func run(t *testing.T, sb providers.Sandbox, shell, script string) {
	t.Helper()
	res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{shell, "-c", script}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("script: err %v, exit %d: %s", err, res.ExitCode, res.Stderr)
	}
}

// scenario takes a baseline, lets the "agent" change the workspace and checks the diff,
// a second diff after more changes, and removal.
func scenario(t *testing.T, sb providers.Sandbox, opts evidence.BaselineOptions) {
	shell := opts.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	run(t, sb, shell, setupScript)
	b, err := evidence.TakeBaseline(t.Context(), sb, opts)
	if err != nil {
		t.Fatalf("TakeBaseline: %v", err)
	}
	t.Cleanup(func() { _ = b.Remove(context.Background(), sb) })
	if strings.HasPrefix(b.Dir()+"/", sb.WorkDir()+"/") {
		t.Fatalf("baseline %s is inside the workspace %s", b.Dir(), sb.WorkDir())
	}
	// keep.txt, bin.dat, old.txt, a.txt, sp ace.txt, big.txt, link; vendor/.git is excluded too
	if b.Files() != 7 {
		t.Errorf("baseline has %d files, want 7", b.Files())
	}

	d, err := b.Diff(t.Context(), sb)
	if err != nil {
		t.Fatalf("Diff before any change: %v", err)
	}
	if len(d.Files) != 0 || d.Summary() != "no file changed\n" {
		t.Fatalf("Diff before any change = %+v", d.Files)
	}

	run(t, sb, shell, agentScript)
	d, err = b.Diff(t.Context(), sb)
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	var got []fileChange
	for _, f := range d.Files {
		got = append(got, fileChange{Path: f.Path, Change: f.Change, Binary: f.Binary, Symlink: f.Symlink, Truncated: f.Truncated})
	}
	if diff := cmp.Diff(wantChanges, got); diff != "" {
		t.Errorf("Diff files (-want +got):\n%s", diff)
	}
	text := d.String()
	for _, want := range []string{
		"--- a/src/a.txt\n+++ b/src/a.txt\n", "+world\n",
		"--- a/new.txt\n+++ b/new.txt\n", "+new\n",
		"--- a/sub/deep/old.txt\n", "-gone\n",
		"--- a/sp ace.txt\n", "+more\n",
		"Binary file bin.dat modified (content not shown)",
		`link: symlink to "src/a.txt" -> symlink to "keep.txt"`,
		"-line 0\n", "+LINE 0\n", "+LINE 2999\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("diff text lacks %q", want)
		}
	}
	for _, unwanted := range []string{".git", "node_modules", "result.json", "\x00"} {
		if strings.Contains(text, unwanted) || strings.Contains(d.Summary(), unwanted) {
			t.Errorf("diff mentions %q, which is excluded:\n%s", unwanted, d.Summary())
		}
	}
	if s := d.Summary(); !strings.HasPrefix(s, "7 files changed: 1 added, 5 modified, 1 removed\n") || !strings.Contains(s, "D sub/deep/old.txt\n") {
		t.Errorf("Summary() = %q", s)
	}

	// A second pass: the diff is still against the state after setup.
	run(t, sb, shell, "printf 'hello\\n' > src/a.txt")
	d, err = b.Diff(t.Context(), sb)
	if err != nil {
		t.Fatalf("second Diff: %v", err)
	}
	for _, f := range d.Files {
		if f.Path == "src/a.txt" {
			t.Errorf("src/a.txt was restored but the second diff still shows it:\n%s", f.Text)
		}
	}
	if len(d.Files) != len(wantChanges)-1 {
		t.Errorf("second diff has %d files, want %d", len(d.Files), len(wantChanges)-1)
	}

	dir := b.Dir()
	if err := b.Remove(t.Context(), sb); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := b.Remove(t.Context(), sb); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{shell, "-c", `test -e "$1"`, "sh", dir}})
	if err != nil || res.ExitCode == 0 {
		t.Errorf("baseline directory %s still exists after Remove (err %v)", dir, err)
	}
	if _, err := b.Diff(t.Context(), sb); err == nil {
		t.Error("Diff after Remove succeeded, want an error")
	}
}

func newLocal(t *testing.T, getenv func(string) string) providers.Sandbox {
	t.Helper()
	p := local.New(local.Options{Getenv: getenv})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "baseline-test", ProjectDir: t.TempDir()})
	if err != nil {
		t.Fatalf("local.Create: %v", err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

func TestBaselineLocal(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	sb := newLocal(t, func(k string) string {
		if k == "TMPDIR" {
			return tmp // the default baseline parent
		}
		return os.Getenv(k)
	})
	scenario(t, sb, evidence.BaselineOptions{})
}

// TestBaselineBusybox runs the scripts with busybox's shell and applets only, as in a
// busybox or Alpine image.
func TestBaselineBusybox(t *testing.T) {
	t.Parallel()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox is not installed (apt-get install -y busybox)")
	}
	bin := t.TempDir()
	for _, applet := range []string{"sh", "find", "tar", "diff", "sha256sum", "du", "awk", "cut", "mktemp", "head",
		"tail", "wc", "readlink", "rm", "cat", "printf", "mkdir", "ln", "echo", "test", "pwd"} {
		if err := os.Symlink(bb, filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	sb := newLocal(t, func(k string) string {
		switch k {
		case "PATH":
			return bin
		case "TMPDIR":
			return tmp
		}
		return ""
	})
	scenario(t, sb, evidence.BaselineOptions{Shell: filepath.Join(bin, "sh")})
}

func TestBaselineBwrap(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed (apt-get install -y bubblewrap)")
	}
	p := bwrap.New(bwrap.Options{StateDir: t.TempDir()})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "baseline-test"})
	if err != nil {
		t.Skipf("bubblewrap cannot run here: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	scenario(t, sb, evidence.BaselineOptions{})
}

// TestBaselineDocker runs on the busybox image .ci/docker.sh imports, when an engine is
// configured (eval "$(bash .ci/docker.sh start)").
func TestBaselineDocker(t *testing.T) {
	t.Parallel()
	img := os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
	if img == "" || (os.Getenv("DOCKER_HOST") == "" && !exists("/var/run/docker.sock")) {
		t.Skip("no Docker engine and test image; eval \"$(bash .ci/docker.sh start)\" sets DOCKER_HOST and TALKOPS_TEST_DOCKER_IMAGE")
	}
	p := docker.New(docker.Options{Image: img})
	t.Cleanup(func() { p.Close() })
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "baseline-test", Labels: map[string]string{"talkops.test": "baseline"}})
	if err != nil {
		t.Fatalf("docker.Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	scenario(t, sb, evidence.BaselineOptions{})
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestBaselineLimits(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	sb := newLocal(t, func(k string) string {
		if k == "TMPDIR" {
			return tmp
		}
		return os.Getenv(k)
	})
	run(t, sb, "/bin/sh", `head -c 300000 /dev/zero | tr '\0' 'a' > big && mkdir -p node_modules && head -c 3000000 /dev/zero > node_modules/huge`)

	t.Run("too large", func(t *testing.T) {
		_, err := evidence.TakeBaseline(t.Context(), sb, evidence.BaselineOptions{MaxBytes: 100 << 10})
		if !errors.Is(err, evidence.ErrTooLarge) || !strings.Contains(err.Error(), "the limit is") {
			t.Fatalf("TakeBaseline(100 KiB limit) = %v, want ErrTooLarge naming the limit", err)
		}
		entries, _ := os.ReadDir(tmp)
		if len(entries) != 0 {
			t.Errorf("a refused baseline left %d entries in %s", len(entries), tmp)
		}
	})
	t.Run("excluded trees do not count", func(t *testing.T) {
		b, err := evidence.TakeBaseline(t.Context(), sb, evidence.BaselineOptions{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatalf("TakeBaseline(1 MiB limit, 3 MB in node_modules) = %v", err)
		}
		if err := b.Remove(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bad exclude", func(t *testing.T) {
		for _, e := range []string{"../x", "/abs", "", "a/../b"} {
			if _, err := evidence.TakeBaseline(t.Context(), sb, evidence.BaselineOptions{Exclude: []string{e}}); err == nil {
				t.Errorf("TakeBaseline(Exclude %q) succeeded, want an error", e)
			}
		}
	})
	t.Run("dir inside the workspace", func(t *testing.T) {
		_, err := evidence.TakeBaseline(t.Context(), sb, evidence.BaselineOptions{Dir: sb.WorkDir()})
		if err == nil || !strings.Contains(err.Error(), "inside the workspace") {
			t.Fatalf("TakeBaseline(Dir = workspace) = %v, want an error", err)
		}
	})
	t.Run("a long diff is cut per file", func(t *testing.T) {
		b, err := evidence.TakeBaseline(t.Context(), sb, evidence.BaselineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := b.Remove(context.WithoutCancel(t.Context()), sb); err != nil {
				t.Errorf("Baseline.Remove: %v", err)
			}
		}()
		run(t, sb, "/bin/sh", `i=0; while [ $i -lt 40000 ]; do echo "row $i"; i=$((i+1)); done > rows`)
		d, err := b.Diff(t.Context(), sb)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Files) != 1 || !d.Files[0].Truncated || len(d.Files[0].Text) > evidence.MaxFileDiffBytes+200 ||
			!strings.Contains(d.Files[0].Text, "bytes of this file's diff cut by the runner") ||
			!strings.HasSuffix(d.Files[0].Text, "+row 39999\n") {
			f := d.Files[0]
			t.Errorf("diff of a 400 KB new file: truncated %v, %d of %d bytes, ends %q", f.Truncated, len(f.Text), f.Bytes, f.Text[len(f.Text)-30:])
		}
	})
}
