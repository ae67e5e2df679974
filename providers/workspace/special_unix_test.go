//go:build unix

package workspace

import (
	"bytes"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPackSpecialFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"shared.gitignore": "*.txt\n"})
	writeTree(t, root, map[string]string{"a.txt": "x", "sub/b.txt": "x", "sub/.gitignore.real": "b.txt\n"})
	// A FIFO must be skipped, not opened (opening it would block the walk).
	if err := syscall.Mkfifo(filepath.Join(root, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Like git, symlinked .gitignore files are not read, inside or outside the tree.
	symlink(t, root, ".gitignore", filepath.Join(outside, "shared.gitignore"))
	symlink(t, root, "sub/.gitignore", ".gitignore.real")

	var buf bytes.Buffer
	stats, err := Pack(t.Context(), root, Options{}, &buf)
	if err != nil {
		t.Fatalf("Pack() error = %v", err)
	}
	got := names(readTar(t, buf.Bytes()))
	slices.Sort(got)
	want := []string{"a.txt", "sub/", "sub/.gitignore", "sub/.gitignore.real", "sub/b.txt"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pack() archive paths mismatch (-want +got):\n%s", diff)
	}
	wantSt := Stats{Files: 4, Dirs: 1, Ignored: 1, SymlinksOutside: []string{".gitignore"}}
	if diff := cmp.Diff(wantSt, stats, statsOpts); diff != "" {
		t.Errorf("Pack() stats mismatch (-want +got):\n%s", diff)
	}
}
