package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree creates files under root. A key ending in "/" is an empty directory; any other
// key is a file with the value as content. Parents are created as needed.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// symlink creates the link at root/name pointing to target (written as given).
func symlink(t *testing.T, root, name, target string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// sparseFile creates root/name with the given size without writing its content.
func sparseFile(t *testing.T, root, name string, size int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// randomBytes returns n reproducible, incompressible bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

type tarEntry struct {
	Name string
	Type byte
	Mode int64
	Link string
	Size int64
	Body string
}

// readTar decodes a gzip-compressed tar, checking that it is well formed to the end.
func readTar(t *testing.T, data []byte) []tarEntry {
	t.Helper()
	entries, err := decodeTar(data)
	if err != nil {
		t.Fatalf("decode archive: %v", err)
	}
	return entries
}

func decodeTar(data []byte) ([]tarEntry, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var out []tarEntry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		e := tarEntry{Name: hdr.Name, Type: hdr.Typeflag, Mode: hdr.Mode, Link: hdr.Linkname, Size: hdr.Size}
		if len(body) <= 64 {
			e.Body = string(body)
		}
		out = append(out, e)
	}
	// The stream must end cleanly (gzip trailer checked).
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil, err
	}
	return out, zr.Close()
}

func names(entries []tarEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

func tarReader(t *testing.T, data []byte) *tar.Reader {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("decode archive: %v", err)
	}
	return tar.NewReader(zr)
}
