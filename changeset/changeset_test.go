package changeset

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/local"
)

// writeTree creates files (content), symlinks ("->target") and directories ("/") in dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(name, "/"):
			err := os.MkdirAll(p, 0o755)
			if err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(content, "->"):
			if err := os.Symlink(strings.TrimPrefix(content, "->"), p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func localSandbox(t *testing.T, dir string) providers.Sandbox {
	t.Helper()
	sb, err := local.New(local.Options{Getenv: os.Getenv}).Create(t.Context(), providers.Spec{ProjectDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

func newStore(t *testing.T, max int64) *Store {
	t.Helper()
	s, err := NewStore(t.TempDir(), max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func capture(t *testing.T, sb providers.Sandbox, store *Store) *Tree {
	t.Helper()
	tr, err := Capture(t.Context(), sb, CaptureOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestCompareKinds makes each kind of change with real file operations and checks that
// Compare reports exactly those paths, with the right kind and both sides' hashes.
func TestCompareKinds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	binary := string([]byte{0, 1, 2, 0xff, 0xfe, 0})
	writeTree(t, dir, map[string]string{
		"same.txt": "same\n", "modify.txt": "old\n", "delete.txt": "bye\n", "chmod.sh": "echo\n",
		"file2link": "f\n", "link2file": "->same.txt", "file2dir": "f\n", "dir2file/inner.txt": "x\n",
		"bin.dat": binary, "retarget": "->same.txt", "empty/": "", ".git/config": "[core]\n",
	})
	sb := localSandbox(t, dir)
	store := newStore(t, 0)
	base := capture(t, sb, store)
	if _, ok := base.Get(".git/config"); ok {
		t.Error("the top-level .git directory is recorded")
	}

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	must(os.WriteFile(p("modify.txt"), []byte("new\n"), 0o644))
	must(os.Remove(p("delete.txt")))
	must(os.Chmod(p("chmod.sh"), 0o755))
	must(os.Remove(p("file2link")))
	must(os.Symlink("same.txt", p("file2link")))
	must(os.Remove(p("link2file")))
	must(os.WriteFile(p("link2file"), []byte("now a file\n"), 0o644))
	must(os.Remove(p("file2dir")))
	must(os.MkdirAll(p("file2dir/sub"), 0o755))
	must(os.RemoveAll(p("dir2file")))
	must(os.WriteFile(p("dir2file"), []byte("now a file\n"), 0o644))
	must(os.WriteFile(p("bin.dat"), []byte(binary+"\x00more"), 0o644))
	must(os.Remove(p("retarget")))
	must(os.Symlink("modify.txt", p("retarget")))
	must(os.WriteFile(p("added.txt"), []byte("hello\n"), 0o644))
	must(os.MkdirAll(p("deep/node_modules/pkg"), 0o755))
	must(os.WriteFile(p("deep/node_modules/pkg/index.js"), []byte("evil()\n"), 0o644))
	must(os.WriteFile(p(".git/config"), []byte("changed\n"), 0o644))

	now := capture(t, sb, store)
	set := Compare(base, now)
	got := map[string]string{}
	for _, c := range set.Changes {
		got[c.Path] = c.Kind
	}
	want := map[string]string{
		"modify.txt": Modified, "delete.txt": Removed, "chmod.sh": ModeChanged,
		"file2link": TypeChanged, "link2file": TypeChanged, "file2dir": TypeChanged, "file2dir/sub": Added,
		"dir2file": TypeChanged, "dir2file/inner.txt": Removed, "bin.dat": Modified, "retarget": Modified,
		"added.txt": Added, "deep": Added, "deep/node_modules": Added, "deep/node_modules/pkg": Added,
		"deep/node_modules/pkg/index.js": Added,
	}
	if !mapsEqual(got, want) {
		t.Fatalf("changes:\n got %v\nwant %v", got, want)
	}
	for _, c := range set.Changes {
		switch c.Path {
		case "modify.txt":
			if c.Before.SHA256 != sum("old\n") || c.After.SHA256 != sum("new\n") {
				t.Errorf("modify.txt hashes %s → %s", c.Before.SHA256, c.After.SHA256)
			}
		case "chmod.sh":
			if c.Before.Mode.Perm() != 0o644 || c.After.Mode.Perm() != 0o755 {
				t.Errorf("chmod.sh modes %o → %o", c.Before.Mode, c.After.Mode)
			}
		case "retarget":
			if c.After.Target != "modify.txt" {
				t.Errorf("retarget target %q", c.After.Target)
			}
		}
	}

	ev := set.Evidence(store)
	summary := ev.Summary()
	for _, want := range []string{"deep/node_modules/pkg/index.js", "content not shown: under node_modules", sum("evil()\n")[:12], "A added.txt: (absent) → file 6 bytes", "M (mode changed) chmod.sh"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the judge's summary lacks %q:\n%s", want, summary)
		}
	}
	text := ev.String()
	if !strings.Contains(text, "-old\n+new\n") || !strings.Contains(text, "+hello\n") {
		t.Errorf("the diff text lacks the modify and add hunks:\n%s", text)
	}
	if strings.Contains(text, "evil()") {
		t.Errorf("content under node_modules is shown:\n%s", text)
	}
	for _, f := range ev.Files {
		if f.Path == "bin.dat" && !f.Binary {
			t.Errorf("bin.dat is not marked binary: %+v", f)
		}
	}
}

// TestApplyReplaysChanges replays a change set into a clean room materialized from the
// baseline: the result is the agent's tree, except the protected path, which keeps its
// baseline content.
func TestApplyReplaysChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"keep.txt": "same\n", "modify.txt": "old\n", "delete.txt": "bye\n", "chmod.sh": "echo\n",
		"file2link": "f\n", "dir2file/inner.txt": "x\n", "tests/t.sh": "real test\n", "old/dir/a": "a\n",
	})
	sb := localSandbox(t, dir)
	store := newStore(t, 0)
	base := capture(t, sb, store)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	must(os.WriteFile(p("modify.txt"), []byte("new\n"), 0o644))
	must(os.Remove(p("delete.txt")))
	must(os.Chmod(p("chmod.sh"), 0o755))
	must(os.Remove(p("file2link")))
	must(os.Symlink("keep.txt", p("file2link")))
	must(os.RemoveAll(p("dir2file")))
	must(os.WriteFile(p("dir2file"), []byte("file\n"), 0o600))
	must(os.WriteFile(p("tests/t.sh"), []byte("exit 0\n"), 0o644))
	must(os.RemoveAll(p("old")))
	must(os.MkdirAll(p("new/empty"), 0o700))
	must(os.Symlink("/etc/passwd", p("escape")))
	now := capture(t, sb, store)
	set := Compare(base, now)

	room := t.TempDir()
	if err := base.Materialize(room, store); err != nil {
		t.Fatal(err)
	}
	clean := localSandbox(t, room)
	protected := func(p string) bool { return strings.HasPrefix(p, "tests/") }
	got, err := set.Apply(t.Context(), clean, base, store, protected)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Kept, []string{"tests/t.sh"}) || len(got.NotApplied) != 1 || !strings.Contains(got.NotApplied[0], "escape") {
		t.Errorf("applied = %+v, want tests/t.sh kept and the escaping symlink not applied", got)
	}
	after := capture(t, clean, nil)
	rest := Compare(now, after)
	var diffs []string
	for _, c := range rest.Changes {
		diffs = append(diffs, c.Describe())
	}
	want := []string{
		`removed escape: symlink to "/etc/passwd" → (absent)`,
		"modified tests/t.sh: file 7 bytes sha256 " + sum("exit 0\n")[:12] + " mode 0644 → file 10 bytes sha256 " + sum("real test\n")[:12] + " mode 0644",
	}
	if !slices.Equal(diffs, want) {
		t.Fatalf("clean room differs from the agent's tree:\n got %q\nwant %q", diffs, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ n, off int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n-r.off)
	for i := range k {
		p[i] = byte((r.off + i) % 251)
	}
	r.off += k
	return int(k), nil
}

// generatedArchive streams a tar of files×size bytes (size ≥ 4), each file with its own
// first four bytes.
func generatedArchive(files int, size int64) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		buf := make([]byte, 32<<10) // one copy buffer: the benchmark measures Read, not this
		for i := range files {
			name := fmt.Sprintf("./pkg/%03d/%05d.bin", i%100, i)
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := tw.Write(binary.BigEndian.AppendUint32(nil, uint32(i))); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := io.CopyBuffer(struct{ io.Writer }{tw}, &patternReader{n: size - 4}, buf); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	return pr
}

// TestLargeWorkspaceMemory records a 1 GiB workspace (a generated stream) with a 64 MiB
// store: the heap stays far below the workspace size, the store keeps only what its cap
// allows and says how much it refused.
func TestLargeWorkspaceMemory(t *testing.T) {
	t.Parallel()
	const files, size = 16, 64 << 20 // 1 GiB
	if testing.Short() {
		t.Skip("streams 1 GiB")
	}
	store := newStore(t, 64<<20)
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	tree, err := Read(generatedArchive(files, size), CaptureOptions{Store: store})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if tree.Len() != files || tree.Bytes != files*size {
		t.Fatalf("tree has %d entries, %d bytes; want %d, %d", tree.Len(), tree.Bytes, files, int64(files*size))
	}
	if store.Refused() != (files-1)*size {
		t.Errorf("store refused %d bytes, want %d (one file fits the cap)", store.Refused(), int64((files-1)*size))
	}
	// A few small-file buffers and the manifest; never the workspace.
	if p := peak.Load(); p > 128<<20 {
		t.Errorf("peak heap in use %d MiB while recording 1 GiB, want under 128 MiB", p>>20)
	}
	entries, _ := os.ReadDir(store.Dir())
	if len(entries) != 1 {
		t.Errorf("store holds %d files, want 1 (no temporary file left)", len(entries))
	}
}

// TestReadRejectsUnsafeNames: an archive that names a path outside the workspace is an
// error, never a change set entry.
func TestReadRejectsUnsafeNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"../escape", "/etc/passwd", "a/../../b"} {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg})
			pw.CloseWithError(tw.Close())
		}()
		if _, err := Read(pr, CaptureOptions{}); err == nil || !strings.Contains(err.Error(), "unsafe entry name") {
			t.Errorf("%q: err = %v, want unsafe entry name", name, err)
		}
	}
}

// BenchmarkRecord measures recording a generated workspace of 20,000 small files on the
// host (the sandbox's tar stream is replaced by a generated one).
func BenchmarkRecord(b *testing.B) {
	for _, tc := range []struct {
		name  string
		files int
		size  int64
	}{{"20000x4KiB", 20000, 4 << 10}, {"16x64MiB", 16, 64 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(tc.files) * tc.size)
			for b.Loop() {
				store, err := NewStore(b.TempDir(), 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Read(generatedArchive(tc.files, tc.size), CaptureOptions{Store: store}); err != nil {
					b.Fatal(err)
				}
				store.Close()
			}
		})
	}
}

// TestCaptureViaFile records the same workspace through stdout and through a file and
// Download (the cloud providers' way) in a bwrap sandbox: both trees are the same.
func TestCaptureViaFile(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but bwrap is not installed: %v", err)
		}
		t.Skip("bwrap is not installed")
	}
	p := bwrap.New(bwrap.Options{StateDir: t.TempDir()})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "changeset-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	res, err := sb.Exec(t.Context(), providers.Shell(`mkdir -p a/b .hidden && printf 'x\n' > a/b/c.txt && printf 'y' > .hidden/f && ln -s a/b/c.txt link && mkdir .git && echo k > .git/HEAD`))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("populate: %v %s", err, res.Stderr)
	}
	viaStdout, err := Capture(t.Context(), sb, CaptureOptions{})
	if err != nil {
		t.Fatal(err)
	}
	viaFile, err := Capture(t.Context(), sb, CaptureOptions{ViaFile: true})
	if err != nil {
		t.Fatal(err)
	}
	if viaStdout.Len() != 6 || len(Compare(viaStdout, viaFile).Changes) != 0 {
		t.Fatalf("stdout tree (%d entries) and file tree (%d entries) differ: %+v",
			viaStdout.Len(), viaFile.Len(), Compare(viaStdout, viaFile).Changes)
	}
	res, _ = sb.Exec(t.Context(), providers.Shell(`ls /tmp | grep -c talkops-capture || true`))
	if strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("the archive file was left in the sandbox's /tmp")
	}
}

// TestReadRejectsEntryUnderNonDirectory: an archive that lists a path under a symlink or
// file (which tar never writes, but an archiver the agent replaced could) is an error. A
// clean room replaying such a tree would write through the symlink, into a protected path.
func TestReadRejectsEntryUnderNonDirectory(t *testing.T) {
	t.Parallel()
	for _, order := range [][]string{{"evil", "evil/t.sh"}, {"evil/t.sh", "evil"}} {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			for _, name := range order {
				hdr := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: 7}
				if name == "evil" {
					hdr = &tar.Header{Name: name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: "tests"}
				}
				_ = tw.WriteHeader(hdr)
				if hdr.Size > 0 {
					_, _ = tw.Write([]byte("exit 0\n"))
				}
			}
			pw.CloseWithError(tw.Close())
		}()
		_, err := Read(pr, CaptureOptions{Store: newStore(t, 0)})
		if err == nil || !strings.Contains(err.Error(), `"evil/t.sh" lies under "evil", which is not a directory`) {
			t.Errorf("%q: err = %v, want the entry under a symlink refused", order, err)
		}
	}
}
