package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers/archive"
)

// checkContained extracts tgz into base/dir next to base/outside/victim and checks that
// nothing escaped: base holds only dir and outside, the victim is intact, every symlink
// below dir is relative and stays inside, and no special permission bit survived.
func checkContained(t *testing.T, tgz []byte) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = archive.Extractor{MaxBytes: 1 << 20, MaxEntries: 64}.Extract(t.Context(), bytes.NewReader(tgz), dir)

	top, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if e.Name() != "dir" && e.Name() != "outside" {
			t.Errorf("Extract wrote %q next to the target directory", e.Name())
		}
	}
	if got, err := os.ReadDir(outside); err != nil || len(got) != 1 {
		t.Errorf("outside directory changed: %v %v", got, err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "victim" {
		t.Errorf("victim file changed: %q %v", b, err)
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
			t.Errorf("%s has mode %v: special bits must be masked", rel, fi.Mode())
		}
		if fi.Mode().IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			// Let the walk and t.TempDir's cleanup in.
			_ = os.Chmod(p, fi.Mode().Perm()|0o700)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			t.Errorf("readlink %s: %v", rel, err)
			return nil
		}
		// WalkDir does not follow symlinks, so rel is the link's real location.
		resolved := path.Join(path.Dir(filepath.ToSlash(rel)), target)
		if strings.HasPrefix(target, "/") || resolved == ".." || strings.HasPrefix(resolved, "../") {
			t.Errorf("symlink %s -> %s points outside the directory", rel, target)
		}
		return nil
	})
}

// FuzzExtract builds archives from fuzzed names, link targets and entry kinds.
func FuzzExtract(f *testing.F) {
	f.Add("a\nb/c\nb/c/d", "\n\n", []byte{1, 0, 0})
	f.Add("../x\n/abs\na/../../y", "\n\n", []byte{0, 0, 0})
	f.Add("d\nd/l\nd/l/f", "\n..\n", []byte{1, 2, 0})
	f.Add("l\nl/f", "..\n", []byte{2, 0})
	f.Add("d/sub\nd/l1\nd/l1/l2\nd/l1/l2/f", "\nsub\n../../..\n", []byte{1, 2, 2, 0})
	f.Add("d\nd/l1\nd/l1/l2", "\n..\n../x", []byte{1, 2, 2})
	f.Add("f\nh", "\nf", []byte{0, 3})
	f.Add("s", "", []byte{4})
	f.Fuzz(func(t *testing.T, names, targets string, kinds []byte) {
		ns := strings.Split(names, "\n")
		ts := strings.Split(targets, "\n")
		if len(ns) > 8 || len(kinds) == 0 {
			return
		}
		var entries []archive.Entry
		for i, n := range ns {
			e := archive.Entry{Name: n}
			if i < len(ts) {
				e.Linkname = ts[i]
			}
			switch kinds[i%len(kinds)] % 5 {
			case 0:
				e.Body = []byte(n)
			case 1:
				e.Mode = fs.ModeDir | 0o755
			case 2:
				e.Mode = fs.ModeSymlink
			case 3:
				e.Type = tar.TypeLink
			case 4:
				e.Mode = fs.ModeSetuid | fs.ModeSticky | 0o777
				e.Body = []byte("special")
			}
			entries = append(entries, e)
		}
		tgz, err := archive.TarGz(entries...)
		if err != nil {
			return // not encodable as tar
		}
		checkContained(t, tgz)
	})
}

// FuzzExtractTar feeds fuzzed raw tar bytes (gzipped by the harness so that mutations
// reach the tar reader rather than failing the gzip checksum).
func FuzzExtractTar(f *testing.F) {
	for _, entries := range [][]archive.Entry{
		{{Name: "a/b", Body: []byte("x")}, {Name: "l", Mode: fs.ModeSymlink, Linkname: "a/b"}},
		{{Name: "../evil", Body: []byte("x")}},
		{{Name: "d", Mode: fs.ModeDir | 0o555}, {Name: "d/f", Body: []byte("x")}},
	} {
		tgz, err := archive.TarGz(entries...)
		if err != nil {
			f.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(tgz))
		if err != nil {
			f.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(raw); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		checkContained(t, buf.Bytes())
	})
}
