package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers/archive"
)

func mustTarGz(t testing.TB, entries ...archive.Entry) []byte {
	t.Helper()
	b, err := archive.TarGz(entries...)
	if err != nil {
		t.Fatalf("TarGz: %v", err)
	}
	return b
}

// tree describes what is on disk below dir: "name mode [-> target | content]".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := filepath.ToSlash(rel) + " " + fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExtract(t *testing.T) {
	t.Parallel()
	mtime := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	tgz := mustTarGz(t,
		archive.Entry{Name: "./", Mode: fs.ModeDir | 0o755},
		archive.Entry{Name: "bin/", Mode: fs.ModeDir | 0o750},
		archive.Entry{Name: "bin/run", Mode: 0o755, Body: []byte("run")},
		archive.Entry{Name: "bin/setuid", Mode: 0o4755 | fs.ModeSetuid, Body: []byte("suid")},
		archive.Entry{Name: "docs/readme.md", Mode: 0o644, Body: []byte("readme"), ModTime: mtime},
		archive.Entry{Name: "docs/link", Mode: fs.ModeSymlink, Linkname: "readme.md"},
		archive.Entry{Name: "docs/up", Mode: fs.ModeSymlink, Linkname: "../bin/run"},
		archive.Entry{Name: "empty", Body: nil},
		archive.Entry{Name: "ro/", Mode: fs.ModeDir | 0o555},
		archive.Entry{Name: "ro/inside", Mode: 0o444, Body: []byte("inside")},
		archive.Entry{Name: "dup", Body: []byte("first")},
		archive.Entry{Name: "dup", Body: []byte("second")},
	)
	dir := filepath.Join(t.TempDir(), "new")
	if err := archive.Extract(t.Context(), bytes.NewReader(tgz), dir); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	t.Cleanup(func() { // let t.TempDir remove ro's contents
		if err := os.Chmod(filepath.Join(dir, "ro"), 0o755); err != nil {
			t.Errorf("chmod ro: %v", err)
		}
	})
	want := []string{
		"bin drwxr-x---",
		"bin/run -rwxr-xr-x run",
		"bin/setuid -rwxr-xr-x suid",
		"docs drwxr-xr-x",
		"docs/link Lrwxrwxrwx -> readme.md",
		"docs/readme.md -rw-r--r-- readme",
		"docs/up Lrwxrwxrwx -> ../bin/run",
		"dup -rw-r--r-- second",
		"empty -rw-r--r-- ",
		"ro dr-xr-xr-x",
		"ro/inside -r--r--r-- inside",
	}
	if diff := cmp.Diff(want, tree(t, dir)); diff != "" {
		t.Errorf("extracted tree mismatch (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(filepath.Join(dir, "docs/readme.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(mtime) {
		t.Errorf("mtime of docs/readme.md = %v, want %v", fi.ModTime(), mtime)
	}
}

func TestExtractRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entries []archive.Entry
		want    string
	}{
		{"Absolute", []archive.Entry{{Name: "/etc/evil", Body: []byte("x")}}, "absolute name"},
		{"DotDot", []archive.Entry{{Name: "../evil", Body: []byte("x")}}, `".."`},
		{"DotDotInside", []archive.Entry{{Name: "a/../../evil", Body: []byte("x")}}, `".."`},
		{"DotDotHarmlessStillRefused", []archive.Entry{{Name: "a/../b", Body: []byte("x")}}, `".."`},
		{"SymlinkAbsolute", []archive.Entry{{Name: "l", Mode: fs.ModeSymlink, Linkname: "/etc/passwd"}}, "not a relative path"},
		{"SymlinkEscapes", []archive.Entry{{Name: "a/l", Mode: fs.ModeSymlink, Linkname: "../../outside"}}, "points outside"},
		{"SymlinkToParent", []archive.Entry{{Name: "l", Mode: fs.ModeSymlink, Linkname: ".."}}, "points outside"},
		{"SymlinkEmpty", []archive.Entry{{Name: "l", Mode: fs.ModeSymlink, Linkname: ""}}, "not a relative path"},
		{"SymlinkBelowSymlink", []archive.Entry{
			{Name: "d/sub", Mode: fs.ModeDir},
			{Name: "d/l1", Mode: fs.ModeSymlink, Linkname: "sub"},
			{Name: "d/l1/l2", Mode: fs.ModeSymlink, Linkname: "../x"},
		}, `symlink below the symlink "d/l1"`},
		{"HardLink", []archive.Entry{{Name: "f", Body: []byte("x")}, {Name: "h", Type: tar.TypeLink, Linkname: "f"}}, "hard links"},
		{"Fifo", []archive.Entry{{Name: "p", Type: tar.TypeFifo}}, "FIFO"},
		{"CharDevice", []archive.Entry{{Name: "c", Type: tar.TypeChar}}, "device"},
		{"FileOverDir", []archive.Entry{{Name: "d", Mode: fs.ModeDir}, {Name: "d", Body: []byte("x")}}, "a directory exists"},
		{"FileAsRoot", []archive.Entry{{Name: ".", Body: []byte("x")}}, "root directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dir := filepath.Join(base, "dir")
			err := archive.Extract(t.Context(), bytes.NewReader(mustTarGz(t, tc.entries...)), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Extract error = %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, archive.ErrUnsafe) && !strings.Contains(tc.want, "directory") {
				t.Errorf("Extract error = %v, want one wrapping ErrUnsafe", err)
			}
			if got := tree(t, base); len(got) > 0 && !strings.HasPrefix(got[0], "dir ") {
				t.Errorf("something was written outside dir: %v", got)
			}
		})
	}
}

// TestExtractExistingSymlinks covers a target directory that already holds symlinks
// pointing outside it: nothing may be written through them.
func TestExtractExistingSymlinks(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "outdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "outfile")); err != nil {
		t.Fatal(err)
	}

	err := archive.Extract(t.Context(), bytes.NewReader(mustTarGz(t, archive.Entry{Name: "outdir/victim", Body: []byte("pwned")})), dir)
	if err == nil {
		t.Error("Extract through a symlinked directory pointing outside: error = nil, want one")
	}
	// A regular file entry replaces an existing symlink instead of writing through it.
	if err := archive.Extract(t.Context(), bytes.NewReader(mustTarGz(t, archive.Entry{Name: "outfile", Body: []byte("replaced")})), dir); err != nil {
		t.Fatalf("Extract over an existing symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original" {
		t.Errorf("file outside was changed to %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "outfile")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("outfile after Extract: %v, %v; want a regular file", fi, err)
	}
}

func TestExtractLimits(t *testing.T) {
	t.Parallel()
	big := mustTarGz(t, archive.Entry{Name: "a", Body: make([]byte, 1000)}, archive.Entry{Name: "b", Body: make([]byte, 1000)})
	many := mustTarGz(t, archive.Entry{Name: "1"}, archive.Entry{Name: "2"}, archive.Entry{Name: "3"})
	for _, tc := range []struct {
		name string
		x    archive.Extractor
		tgz  []byte
		want string
	}{
		{"Bytes", archive.Extractor{MaxBytes: 1500}, big, "budget"},
		{"Entries", archive.Extractor{MaxEntries: 2}, many, "more than 2 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.x.Extract(t.Context(), bytes.NewReader(tc.tgz), t.TempDir())
			if !errors.Is(err, archive.ErrLimit) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Extract error = %v, want ErrLimit containing %q", err, tc.want)
			}
		})
	}
	if err := (archive.Extractor{MaxBytes: 2000, MaxEntries: 3}).Extract(t.Context(), bytes.NewReader(big), t.TempDir()); err != nil {
		t.Errorf("Extract at exactly the limits: %v", err)
	}
}

func TestExtractBadStreams(t *testing.T) {
	t.Parallel()
	valid := mustTarGz(t, archive.Entry{Name: "a", Body: bytes.Repeat([]byte("x"), 10000)})
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		in   []byte
		want string
	}{
		{"NotGzip", t.Context(), []byte("plain text"), "not a gzip stream"},
		{"Truncated", t.Context(), valid[:len(valid)/2], "unexpected EOF"},
		{"Cancelled", cancelled, valid, "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := archive.Extract(tc.ctx, bytes.NewReader(tc.in), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Extract error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// legacyTarGz writes entries as a tar stream whose headers carry the pre-POSIX regular
// file flag '\x00' (tar.TypeRegA), as old archivers wrote, and gzips it.
func legacyTarGz(t *testing.T, entries ...archive.Entry) []byte {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	var headers []int // offsets of the header blocks
	for _, e := range entries {
		headers = append(headers, raw.Len())
		hdr := &tar.Header{Name: e.Name, Mode: int64(e.Mode.Perm()), Size: int64(len(e.Body)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if strings.HasSuffix(e.Name, "/") {
			hdr.Typeflag = tar.TypeDir // the writer refuses a trailing "/" on TypeReg
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("WriteHeader(%s): %v", e.Name, err)
		}
		if _, err := tw.Write(e.Body); err != nil {
			t.Fatalf("Write(%s): %v", e.Name, err)
		}
		if err := tw.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b := raw.Bytes()
	for _, off := range headers {
		blk := b[off : off+512]
		blk[156] = 0 // typeflag
		copy(blk[148:156], "        ")
		sum := 0
		for _, c := range blk {
			sum += int(c)
		}
		copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	return out.Bytes()
}

// TestExtractLegacyRegular: archives from old tar implementations mark regular files (and
// directories, by a trailing "/") with '\x00' instead of '0'; they extract like modern ones.
func TestExtractLegacyRegular(t *testing.T) {
	t.Parallel()
	tgz := legacyTarGz(t,
		archive.Entry{Name: "olddir/", Mode: 0o755},
		archive.Entry{Name: "olddir/inside", Mode: 0o600, Body: []byte("in")},
		archive.Entry{Name: "old.txt", Mode: 0o644, Body: []byte("old")},
	)
	dir := t.TempDir()
	if err := archive.Extract(t.Context(), bytes.NewReader(tgz), dir); err != nil {
		t.Fatalf("Extract(legacy archive): %v", err)
	}
	want := []string{
		"old.txt -rw-r--r-- old",
		"olddir drwxr-xr-x",
		"olddir/inside -rw------- in",
	}
	if diff := cmp.Diff(want, tree(t, dir)); diff != "" {
		t.Errorf("extracted tree mismatch (-want +got):\n%s", diff)
	}
}

func TestWriterStreamsWhatExtractReads(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := archive.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	body := "streamed body"
	if err := w.WriteHeader(&tar.Header{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteHeader(&tar.Header{Name: "dir/f", Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := strings.NewReader(body).WriteTo(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(archive.Entry{Name: "dir/g", Mode: 0o644, Body: []byte("added")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := archive.Extract(t.Context(), &buf, dir); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	want := []string{"dir drwxr-xr-x", "dir/f -rw------- streamed body", "dir/g -rw-r--r-- added"}
	if diff := cmp.Diff(want, tree(t, dir)); diff != "" {
		t.Errorf("extracted tree (-want +got):\n%s", diff)
	}
}

func TestTarGzWholeSecondsNeedNoPAXRecords(t *testing.T) {
	t.Parallel()
	tgz := mustTarGz(t, archive.Entry{Name: "setup.sh", Mode: 0o755, Body: []byte("true\n"), ModTime: time.Now().Truncate(time.Second)})
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := tar.NewReader(zr).Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "setup.sh" || hdr.Format != tar.FormatUSTAR || len(hdr.PAXRecords) != 0 {
		t.Errorf("header %q format %v PAX %v; want setup.sh in plain USTAR, which every tar reads", hdr.Name, hdr.Format, hdr.PAXRecords)
	}
}
