package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// projectTree builds the generated project most tests pack: nested .gitignore files with
// negation, the skip list at depth, secrets, symlinks in and out of the tree, unicode and
// long names, and files around the default size limit. It returns the root.
func projectTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "outside the project"})
	writeTree(t, root, map[string]string{
		"README.md":                "# project",
		"main.go":                  "package main",
		"run.sh":                   "#!/bin/sh\necho hi\n",
		"tests/test_app.py":        "def test_ok(): pass",
		"tests/fixtures/data.json": "{}",
		"empty/":                   "",

		// .gitignore at the root and one level down, with negation, anchoring,
		// dir-only patterns, a negated character class and a CRLF line.
		".gitignore":             "# build output\n*.log\n!keep.log\nout/\n/rootonly.cfg\ntmp[!0-9].dat\n\n",
		"app.log":                "x",
		"keep.log":               "x",
		"out/x.txt":              "x",
		"sub/out/y.txt":          "x",
		"rootonly.cfg":           "x",
		"sub/rootonly.cfg":       "x",
		"tmpx.dat":               "x",
		"tmp1.dat":               "x",
		"sub/.gitignore":         "*.txt\r\n!important.txt\r\n",
		"sub/a.txt":              "x",
		"sub/important.txt":      "x",
		"sub/deep/b.txt":         "x",
		"sub/deep/c.md":          "x",
		"sub/deep/important.txt": "x",
		".git/HEAD":              "ref: refs/heads/main",
		".git/info/exclude":      "local-notes.md\n",
		"local-notes.md":         "x",
		"docs/local-notes.md":    "x",
		"distribution/d.txt":     "x",

		// The skip list, at depth.
		"a/b/node_modules/x.js":       "x",
		"a/__pycache__/m.pyc":         "x",
		"pkg/dist/x.js":               "x",
		"pkg/.terraform/p":            "x",
		"lib/build/o":                 "x",
		"deep/er/.venv/bin/python":    "x",
		"x/scratch/s.txt":             "x",
		"cdk.out/manifest.json":       "x",
		"live/.terragrunt-cache/c":    "x",
		"src/.mypy_cache/m":           "x",
		"src/.pytest_cache/v":         "x",
		".talkops/config.toml":        "x",
		".talkops/runs/r/result.json": "x",
		".talkops/tmp/setup.sh":       "x",
		".agents/a":                   "x",
		".gemini/g":                   "x",
		"src/__init__.py":             "x",
		"src/x.pyc":                   "x",
		"src/y.PYO":                   "x",
		"z.tmp":                       "x",
		"w.bak":                       "x",

		// Secrets, and their harmless neighbours.
		".env":                            "API_KEY=1",
		"config/.env.production":          "x",
		"config/.ENV.local":               "x",
		".env.example":                    "x",
		".env.sample":                     "x",
		".env.template":                   "x",
		"config/.env.production.example":  "x",
		"id_rsa":                          "x",
		"keys/id_ed25519":                 "x",
		"keys/id_ecdsa_sk":                "x",
		"keys/id_dsa":                     "x",
		"keys/id_ed25519.pub":             "x",
		"keys/id_rsa.pub":                 "x",
		"tls/server.pem":                  "x",
		"tls/server.key":                  "x",
		"certs/x.p12":                     "x",
		"certs/x.pfx":                     "x",
		"android/release.jks":             "x",
		"android/release.keystore":        "x",
		".aws/credentials":                "x",
		".aws/config":                     "x",
		".aws/README":                     "x",
		"gcp/credentials.json":            "x",
		"gcp/my-service-account-123.json": "x",
		"gcp/application_default_credentials.json": "x",
		".netrc":              "x",
		".npmrc":              "x",
		".pypirc":             "x",
		".git-credentials":    "x",
		".docker/config.json": "x",
		".docker/daemon.json": "x",
		".kube/config":        "x",
		".kube/other":         "x",
		"terraform.tfvars":    "x",
		"prod.auto.tfvars":    "x",

		// Unicode and long names (PAX headers).
		"données/résumé.txt":                       "x",
		"日本語/ファイル.md":                              "x",
		"emoji-🚀.md":                               "x",
		"long/" + strings.Repeat("d", 120) + ".md": "x",
	})
	if err := os.Chmod(filepath.Join(root, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	sparseFile(t, root, "big.bin", DefaultMaxFileSize+1)
	sparseFile(t, root, "exact.bin", DefaultMaxFileSize)

	symlink(t, root, "link-inside", "README.md")
	symlink(t, root, "dirlink", "sub")
	symlink(t, root, "sub/up", "../README.md")
	symlink(t, root, "dangling", "nothing-here")
	symlink(t, root, "loop1", "loop2")
	symlink(t, root, "loop2", "loop1")
	symlink(t, root, "outside-abs", filepath.Join(outside, "secret.txt"))
	symlink(t, root, "outside-rel", "../x")
	symlink(t, root, "outlink", outside)
	symlink(t, root, "escape", "outlink/secret.txt")
	return root
}

// projectKept is what Pack sends from projectTree with default options.
var projectKept = []string{
	".aws/", ".aws/README", ".docker/", ".docker/daemon.json", ".env.example", ".env.sample",
	".env.template", ".gitignore", ".kube/", ".kube/other", ".talkops/", ".talkops/config.toml", "README.md", "a/", "a/b/",
	"android/", "certs/", "config/", "config/.env.production.example", "dangling", "deep/",
	"deep/er/", "dirlink", "distribution/", "distribution/d.txt", "docs/", "données/",
	"données/résumé.txt", "emoji-🚀.md", "empty/", "exact.bin", "gcp/", "keep.log", "keys/",
	"keys/id_ed25519.pub", "keys/id_rsa.pub", "lib/", "link-inside", "live/", "long/",
	"long/" + strings.Repeat("d", 120) + ".md", "loop1", "loop2", "main.go", "pkg/",
	"prod.auto.tfvars", "run.sh", "src/", "src/__init__.py", "sub/", "sub/.gitignore",
	"sub/deep/", "sub/deep/c.md", "sub/deep/important.txt", "sub/important.txt",
	"sub/rootonly.cfg", "sub/up", "terraform.tfvars", "tests/", "tests/fixtures/",
	"tests/fixtures/data.json", "tests/test_app.py", "tls/", "tmp1.dat", "x/", "日本語/",
	"日本語/ファイル.md",
}

var projectSecrets = []string{
	".aws/config", ".aws/credentials", ".docker/config.json", ".env", ".git-credentials",
	".kube/config", ".netrc", ".npmrc", ".pypirc", "android/release.jks",
	"android/release.keystore", "certs/x.p12", "certs/x.pfx", "config/.ENV.local",
	"config/.env.production", "gcp/application_default_credentials.json",
	"gcp/credentials.json", "gcp/my-service-account-123.json", "id_rsa", "keys/id_dsa",
	"keys/id_ecdsa_sk", "keys/id_ed25519", "tls/server.key", "tls/server.pem",
}

// projectIgnored counts what .gitignore, .git/info/exclude and the skip list leave out of
// projectTree: out, sub/out, rootonly.cfg, app.log, tmpx.dat, sub/a.txt, sub/deep/b.txt,
// .git, local-notes.md, docs/local-notes.md, 13 skipped directories, .talkops/runs,
// .talkops/tmp and 4 skipped files.
const projectIgnored = 10 + 13 + 2 + 4

func countKinds(paths []string) (files, dirs int) {
	for _, p := range paths {
		if strings.HasSuffix(p, "/") {
			dirs++
		} else {
			files++
		}
	}
	return files, dirs
}

// statsOpts compares Stats on what a test can know exactly.
var statsOpts = cmp.Options{
	cmpopts.IgnoreFields(Stats{}, "Bytes", "BytesSent", "Duration", "LeftOut", "LeftOutByReason"),
	cmpopts.SortSlices(func(a, b string) bool { return a < b }),
	cmpopts.EquateEmpty(),
}

func TestPackProjectTree(t *testing.T) {
	t.Parallel()
	root := projectTree(t)
	var buf bytes.Buffer
	stats, err := Pack(t.Context(), root, Options{}, &buf)
	if err != nil {
		t.Fatalf("Pack() error = %v", err)
	}
	entries := readTar(t, buf.Bytes())
	got := names(entries)
	slices.Sort(got)
	if diff := cmp.Diff(projectKept, got); diff != "" {
		t.Errorf("Pack() archive paths mismatch (-want +got):\n%s", diff)
	}

	files, dirs := countKinds(projectKept)
	want := Stats{
		Files:           files,
		Dirs:            dirs,
		Ignored:         projectIgnored,
		TooLarge:        []string{"big.bin"},
		Secrets:         projectSecrets,
		SymlinksOutside: []string{"escape", "outlink", "outside-abs", "outside-rel"},
	}
	if diff := cmp.Diff(want, stats, statsOpts); diff != "" {
		t.Errorf("Pack() stats mismatch (-want +got):\n%s", diff)
	}
	if stats.BytesSent != int64(buf.Len()) {
		t.Errorf("Pack() BytesSent = %d, want the archive size %d", stats.BytesSent, buf.Len())
	}
	if stats.Bytes < DefaultMaxFileSize {
		t.Errorf("Pack() Bytes = %d, want at least the %d bytes of exact.bin", stats.Bytes, DefaultMaxFileSize)
	}

	byName := map[string]tarEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	links := map[string]string{
		"link-inside": "README.md", "dirlink": "sub", "sub/up": "../README.md",
		"dangling": "nothing-here", "loop1": "loop2", "loop2": "loop1",
	}
	for name, target := range links {
		e := byName[name]
		if e.Type != tar.TypeSymlink || e.Link != target {
			t.Errorf("entry %q = type %q link %q, want a symlink to %q", name, e.Type, e.Link, target)
		}
	}
	if e := byName["run.sh"]; e.Mode != 0o755 {
		t.Errorf("run.sh mode = %o, want 755", e.Mode)
	}
	if e := byName[".env.example"]; e.Body != "x" {
		t.Errorf(".env.example body = %q, want %q", e.Body, "x")
	}
}

func TestPackOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		files  map[string]string
		opts   Options
		want   []string
		wantSt Stats
	}{
		{
			name: "include names secrets and skipped or ignored paths",
			files: map[string]string{
				".gitignore":              "gen/\n",
				".env":                    "x",
				".env.local":              "x",
				"tls/a.pem":               "x",
				"tls/b.key":               "x",
				"dist/app.js":             "x",
				"dist/other.js":           "x",
				"dist/sub/deep.js":        "x",
				"build/x":                 "x",
				"node_modules/m/index.js": "x",
				"gen/out.txt":             "x",
			},
			opts: Options{Include: []string{".env", "*.pem", "dist/app.js", "node_modules/", "gen/"}},
			want: []string{
				".env", ".gitignore", "dist/app.js", "gen/", "gen/out.txt", "node_modules/",
				"node_modules/m/", "node_modules/m/index.js", "tls/", "tls/a.pem",
			},
			wantSt: Stats{Files: 6, Dirs: 4, Ignored: 2, Secrets: []string{".env.local", "tls/b.key"}},
		},
		{
			name: "include with ** opens skipped directories",
			files: map[string]string{
				"dist/a.js":       "x",
				"dist/sub/b.js":   "x",
				"dist/sub/c.css":  "x",
				"other/dist/d.js": "x",
			},
			opts:   Options{Include: []string{"dist/**/*.js"}},
			want:   []string{"dist/a.js", "dist/sub/b.js", "other/"},
			wantSt: Stats{Files: 2, Dirs: 1, Ignored: 2},
		},
		{
			name: "the run's report directory inside the project is never sent",
			files: map[string]string{
				"out/result.json":       "x",
				"out/old/summary.md":    "x",
				"src/out/main.go":       "x",
				".talkops/runs/r/x.txt": "x",
			},
			opts:   Options{ReportDir: "out"},
			want:   []string{".talkops/", "src/", "src/out/", "src/out/main.go"},
			wantSt: Stats{Files: 1, Dirs: 3, Ignored: 2},
		},
		{
			name: "exclude ranks above .gitignore",
			files: map[string]string{
				".gitignore":    "generated.txt\n",
				"generated.txt": "x",
				"docs/a.txt":    "x",
				"README.md":     "x",
				"keep.md":       "x",
				"src/main.go":   "x",
			},
			opts:   Options{Exclude: []string{"docs/", "*.md", "!keep.md", "!generated.txt"}},
			want:   []string{".gitignore", "generated.txt", "keep.md", "src/", "src/main.go"},
			wantSt: Stats{Files: 4, Dirs: 1, Ignored: 2},
		},
		{
			name:   "max file size",
			files:  map[string]string{"small": "12345", "large": "123456", "d/large2": "1234567"},
			opts:   Options{MaxFileSize: 5},
			want:   []string{"d/", "small"},
			wantSt: Stats{Files: 1, Dirs: 1, TooLarge: []string{"d/large2", "large"}},
		},
		{
			name:   "include does not bypass the size limit",
			files:  map[string]string{".env": "123456"},
			opts:   Options{MaxFileSize: 5, Include: []string{".env"}},
			want:   nil,
			wantSt: Stats{TooLarge: []string{".env"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeTree(t, root, tt.files)
			var buf bytes.Buffer
			stats, err := Pack(t.Context(), root, tt.opts, &buf)
			if err != nil {
				t.Fatalf("Pack() error = %v", err)
			}
			got := names(readTar(t, buf.Bytes()))
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Pack() archive paths mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSt, stats, statsOpts); diff != "" {
				t.Errorf("Pack() stats mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPackBadInput(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	writeTree(t, filepath.Dir(file), map[string]string{"file": "x"})
	tests := []struct {
		name    string
		root    string
		opts    Options
		wantErr string
	}{
		{"negative size", "", Options{MaxFileSize: -1}, "sync max file size -1: must be 0"},
		{"empty include", "", Options{Include: []string{"ok", " "}}, `sync include pattern 2 " ": empty pattern`},
		{"comment exclude", "", Options{Exclude: []string{"# x"}}, `sync exclude pattern 1 "# x": empty pattern or comment`},
		{"dotdot", "", Options{Exclude: []string{"../secrets"}}, `sync exclude pattern 1 "../secrets": path element ".."`},
		{"bad glob", "", Options{Include: []string{"src/[a-"}}, `sync include pattern 1 "src/[a-": bad glob "[a-"`},
		{"missing root", filepath.Join(file, "nope"), Options{}, "project root"},
		{"root is a file", file, Options{}, "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := tt.root
			if root == "" {
				root = t.TempDir()
			}
			var buf bytes.Buffer
			_, err := Pack(t.Context(), root, tt.opts, &buf)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Pack() error = %v, want it to contain %q", err, tt.wantErr)
			}
			if buf.Len() != 0 {
				t.Errorf("Pack() wrote %d bytes before failing on its input", buf.Len())
			}
		})
	}
}

func TestPackModesTimesRoundTrip(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"bin/tool": "#!/bin/sh\n", "bin/data": "d", "ro/file": "r"})
	// Sub-second mtimes survive (Go's test cache keys on them); whole seconds need no PAX record.
	mtime := time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC)
	wholeSecond := time.Date(2021, 3, 4, 5, 6, 8, 0, time.UTC)
	for name, mode := range map[string]os.FileMode{"bin/tool": 0o755, "bin/data": 0o600, "ro": 0o750} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"bin/tool", "bin/data", "ro/file", "ro", "bin"} {
		if err := os.Chtimes(filepath.Join(root, filepath.FromSlash(name)), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(root, "bin", "data"), wholeSecond, wholeSecond); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Pack(t.Context(), root, Options{}, &buf); err != nil {
		t.Fatalf("Pack() error = %v", err)
	}
	type meta struct {
		Mode    int64
		ModTime time.Time
	}
	got := map[string]meta{}
	tr := tarReader(t, buf.Bytes())
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if hdr.Uname != "" || hdr.Gname != "" || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("entry %q records owner %q/%q %d/%d, want none", hdr.Name, hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid)
		}
		got[hdr.Name] = meta{hdr.Mode, hdr.ModTime.UTC()}
		if hdr.ModTime.Nanosecond() == 0 && len(hdr.PAXRecords) != 0 {
			t.Errorf("entry %q with a whole-second mtime has PAX records %v, want none", hdr.Name, hdr.PAXRecords)
		}
	}
	want := map[string]meta{
		"bin/":     {0o755, mtime},
		"bin/data": {0o600, wholeSecond},
		"bin/tool": {0o755, mtime},
		"ro/":      {0o750, mtime},
		"ro/file":  {0o644, mtime},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pack() modes and mtimes mismatch (-want +got):\n%s", diff)
	}
}

func TestPackIsReproducible(t *testing.T) {
	t.Parallel()
	root := projectTree(t)
	var a, b bytes.Buffer
	if _, err := Pack(t.Context(), root, Options{}, &a); err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(t.Context(), root, Options{}, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("two Packs of the same tree differ (%d and %d bytes)", a.Len(), b.Len())
	}
}

// cancelWriter cancels a context on the first write that reaches it.
type cancelWriter struct {
	cancel context.CancelFunc
	n      int
}

func (w *cancelWriter) Write(b []byte) (int, error) {
	w.cancel()
	w.n += len(b)
	return len(b), nil
}

func TestPackCancel(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const total = 300
	for i := range total {
		name := filepath.Join(root, "d", fmt.Sprintf("f%03d", i))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, randomBytes(uint64(i), 8<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("before start", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		stats, err := Pack(ctx, root, Options{}, &bytes.Buffer{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Pack() error = %v, want context.Canceled", err)
		}
		if stats.Files != 0 {
			t.Errorf("Pack() sent %d files after cancellation, want 0", stats.Files)
		}
	})
	t.Run("mid walk", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := &cancelWriter{cancel: cancel}
		stats, err := Pack(ctx, root, Options{}, w)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Pack() error = %v, want context.Canceled", err)
		}
		if w.n == 0 {
			t.Fatal("the archive never reached the writer; the test did not cancel mid-walk")
		}
		if stats.Files >= total {
			t.Errorf("Pack() sent all %d files despite cancellation", stats.Files)
		}
	})
}

func TestPackProgress(t *testing.T) {
	t.Parallel()
	root := projectTree(t)
	var calls []Stats
	stats, err := Pack(t.Context(), root, Options{Progress: func(s Stats) { calls = append(calls, s) }}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("Pack() error = %v", err)
	}
	if len(calls) == 0 {
		t.Fatal("Progress was never called")
	}
	if diff := cmp.Diff(stats, calls[len(calls)-1]); diff != "" {
		t.Errorf("last Progress call differs from the returned Stats (-returned +progress):\n%s", diff)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].Files < calls[i-1].Files || calls[i].Bytes < calls[i-1].Bytes {
			t.Errorf("Progress call %d went backwards: %+v after %+v", i, calls[i], calls[i-1])
		}
	}
}

func TestStatsResult(t *testing.T) {
	t.Parallel()
	s := Stats{
		Files: 3, Dirs: 2, Ignored: 4, Bytes: 100, BytesSent: 50,
		TooLarge: []string{"big"}, Secrets: []string{".env"}, SymlinksOutside: []string{"l"},
		Duration: 1500 * time.Millisecond, Target: "/workspace",
	}
	got := s.Result()
	if got.Files != 3 || got.Dirs != 2 || got.Ignored != 4 || got.Bytes != 100 || got.BytesSent != 50 ||
		got.DurationMS != 1500 || got.RemoteTarget != "/workspace" ||
		!slices.Equal(got.TooLarge, s.TooLarge) || !slices.Equal(got.Secrets, s.Secrets) ||
		!slices.Equal(got.Symlinks, s.SymlinksOutside) {
		t.Errorf("Stats.Result() = %+v, want the same numbers and lists as %+v", got, s)
	}
}

func TestListedCap(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{}
	for i := range MaxListed + 5 {
		files[fmt.Sprintf("keys/k%04d.pem", i)] = "x"
	}
	writeTree(t, root, files)
	stats, err := Pack(t.Context(), root, Options{}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("Pack() error = %v", err)
	}
	if len(stats.Secrets) != MaxListed || stats.Unlisted != len(files)-MaxListed {
		t.Errorf("Pack() listed %d secrets and %d unlisted, want %d and %d", len(stats.Secrets), stats.Unlisted, MaxListed, len(files)-MaxListed)
	}
}
