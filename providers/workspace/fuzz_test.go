package workspace

import (
	"archive/tar"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzPack packs a tree made from a fuzzed path, symlink target and .gitignore lines, with
// a fuzzed include pattern. Pack must never panic, and every archive it writes must hold
// only relative names without ".." and symlinks that stay inside the tree.
func FuzzPack(f *testing.F) {
	f.Add("a/b/c.txt", "../../etc/passwd", "*.txt\n!c.txt\n", "")
	f.Add("node_modules/x/.env", "node_modules", "/node_modules/\n", "node_modules/**")
	f.Add("données/日本/🚀", "/abs", "[!a-z]*\n**/x\n", "**/🚀")
	f.Add("deep/../../x", "a/../../b", "a/**/b/\n\\#lit\n\\!bang\n", "!x")
	f.Add(".env.example", ".", "*\n!*/\n!.env*\n", ".env")
	f.Add("x/[/]", "[", "[\n**\n***\n/\n!\n", "[")
	f.Fuzz(func(t *testing.T, name, target, ignore, include string) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte(ignore), 0o644); err != nil {
			t.Fatal(err)
		}
		if elems := validElems(name); elems != nil {
			p := filepath.Join(append([]string{root}, elems...)...)
			// A fuzzed name may not be creatable (a file where a directory is needed, and
			// so on): Pack gets whatever tree could be made.
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				_ = os.WriteFile(p, []byte("x"), 0o644)
			}
			if len(elems) > 1 {
				// The same .gitignore lines one level down too.
				_ = os.WriteFile(filepath.Join(root, elems[0], ".gitignore"), []byte(ignore), 0o644)
			}
		}
		if target != "" && !strings.ContainsRune(target, 0) {
			_ = os.Symlink(target, filepath.Join(root, "link")) // fails only if "link" was made above
		}
		opts := Options{}
		if include != "" {
			opts.Include = []string{include}
		}
		var buf bytes.Buffer
		if _, err := Pack(t.Context(), root, opts, &buf); err != nil {
			if include != "" {
				return // a bad include pattern is reported, not packed
			}
			t.Fatalf("Pack() error = %v", err)
		}
		entries, err := decodeTar(buf.Bytes())
		if err != nil {
			t.Fatalf("decode archive: %v", err)
		}
		for _, e := range entries {
			n := strings.TrimSuffix(e.Name, "/")
			if n == "" || strings.HasPrefix(n, "/") || path.Clean(n) != n {
				t.Errorf("archive name %q is not a clean relative path", e.Name)
			}
			for _, el := range strings.Split(n, "/") {
				if el == ".." || el == "." {
					t.Errorf("archive name %q has a %q element", e.Name, el)
				}
			}
			if e.Type == tar.TypeSymlink {
				resolved := path.Join(path.Dir(n), e.Link)
				if strings.HasPrefix(e.Link, "/") || resolved == ".." || strings.HasPrefix(resolved, "../") {
					t.Errorf("symlink %q -> %q leaves the tree", e.Name, e.Link)
				}
			}
		}
	})
}

// validElems splits a fuzzed slash path into elements a file system accepts, or nil.
func validElems(name string) []string {
	elems := strings.Split(name, "/")
	if len(elems) > 8 {
		return nil
	}
	for _, e := range elems {
		if e == "" || e == "." || e == ".." || len(e) > 200 || strings.ContainsRune(e, 0) {
			return nil
		}
	}
	return elems
}
