package actiontest_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeBinary is what the fake release's archive holds: it answers `talkops version`.
const fakeBinary = "#!/bin/sh\necho \"talkops v1.2.3\"\necho \"commit 0123456789abcdef\"\n"

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// releaseServer serves GitHub-release-shaped downloads on 127.0.0.1: v1.2.3 is good,
// v6.6.6 has a wrong checksum, v7.7.7 has none for linux/amd64, v9.9.9 does not exist,
// and /releases/latest redirects to v1.2.3 like github.com does.
func releaseServer(t *testing.T) (url string, requests *atomic.Int64) {
	t.Helper()
	archive := tarGz(t, map[string]string{"talkops": fakeBinary, "README.md": "# talkops\n"})
	sum := sha256.Sum256(archive)
	good := hex.EncodeToString(sum[:])
	files := map[string][]byte{}
	for _, v := range []string{"1.2.3", "6.6.6", "7.7.7"} {
		files["/releases/download/v"+v+"/talkops_"+v+"_linux_amd64.tar.gz"] = archive
	}
	files["/releases/download/v1.2.3/checksums.txt"] = []byte(
		strings.Repeat("0", 64) + "  talkops_1.2.3_darwin_arm64.tar.gz\n" + good + "  talkops_1.2.3_linux_amd64.tar.gz\n")
	files["/releases/download/v6.6.6/checksums.txt"] = []byte(strings.Repeat("a", 64) + "  talkops_6.6.6_linux_amd64.tar.gz\n")
	files["/releases/download/v7.7.7/checksums.txt"] = []byte(good + "  talkops_7.7.7_darwin_amd64.tar.gz\n")
	requests = &atomic.Int64{}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch {
		case r.URL.Path == "/releases/latest":
			http.Redirect(w, r, "/releases/tag/v1.2.3", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/releases/tag/"):
			fmt.Fprintln(w, "release page")
		case files[r.URL.Path] != nil:
			_, _ = w.Write(files[r.URL.Path])
		default:
			http.NotFound(w, r)
		}
	})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv.URL + "/releases", requests
}

type installRun struct {
	code              int
	log, output, path string
}

// runInstall runs an install.sh (the repository's, or a copy) as the action's install
// step does, in fresh runner directories unless toolCache is given.
func runInstall(t *testing.T, script, toolCache string, env ...string) installRun {
	t.Helper()
	tmp := t.TempDir()
	if toolCache == "" {
		toolCache = filepath.Join(tmp, "toolcache")
	}
	out, path := filepath.Join(tmp, "output"), filepath.Join(tmp, "path")
	base := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + tmp,
		"RUNNER_OS=Linux", "RUNNER_ARCH=X64", "RUNNER_TEMP=" + tmp, "RUNNER_TOOL_CACHE=" + toolCache,
		"GITHUB_OUTPUT=" + out, "GITHUB_PATH=" + path,
	}
	cmd := exec.CommandContext(t.Context(), "bash", script)
	cmd.Env = append(base, env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	r := installRun{}
	if err := cmd.Run(); err != nil {
		r.code = cmd.ProcessState.ExitCode()
		if r.code < 0 {
			t.Fatalf("install.sh: %v", err)
		}
	}
	r.log = buf.String()
	o, _ := os.ReadFile(out)
	p, _ := os.ReadFile(path)
	r.output, r.path = string(o), string(p)
	return r
}

func TestInstallRelease(t *testing.T) {
	t.Parallel()
	url, _ := releaseServer(t)
	script := filepath.Join(repoRoot(t), ".github", "action", "install.sh")

	tests := []struct {
		name, version, os string
		wantCode          int
		wantLog           string
	}{
		{name: "download and verify", version: "v1.2.3", wantLog: "Verified sha256"},
		{name: "latest resolves to a tag", version: "latest", wantLog: "Downloading talkops v1.2.3"},
		{name: "checksum mismatch", version: "v6.6.6", wantCode: 1, wantLog: "checksum mismatch for talkops_6.6.6_linux_amd64.tar.gz"},
		{name: "no checksum entry", version: "v7.7.7", wantCode: 1, wantLog: "checksums.txt of v7.7.7 has no entry for talkops_7.7.7_linux_amd64.tar.gz"},
		{name: "no such release", version: "v9.9.9", wantCode: 1, wantLog: "download of " + url + "/download/v9.9.9/talkops_9.9.9_linux_amd64.tar.gz failed"},
		{name: "not a tag", version: "1.2", wantCode: 1, wantLog: `version "1.2" is not a release tag like v1.2.3`},
		{name: "windows", version: "v1.2.3", os: "Windows", wantCode: 1, wantLog: "runner OS Windows is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := []string{"TALKOPS_RELEASE_URL=" + url, "INPUT_VERSION=" + tt.version}
			if tt.os != "" {
				env = append(env, "RUNNER_OS="+tt.os)
			}
			cache := filepath.Join(t.TempDir(), "toolcache")
			r := runInstall(t, script, cache, env...)
			if r.code != tt.wantCode || !strings.Contains(r.log, tt.wantLog) {
				t.Fatalf("install.sh: exit %d, log:\n%s\nwant exit %d and %q", r.code, r.log, tt.wantCode, tt.wantLog)
			}
			bin := filepath.Join(cache, "talkops", "v1.2.3", "linux-amd64", "talkops")
			if tt.wantCode != 0 {
				if entries, _ := filepath.Glob(filepath.Join(cache, "talkops", "*", "*", "talkops")); len(entries) > 0 {
					t.Errorf("a failed install left %v behind", entries)
				}
				if r.output != "" {
					t.Errorf("a failed install set outputs: %q", r.output)
				}
				return
			}
			if want := "bin=" + bin + "\n"; r.output != want {
				t.Errorf("GITHUB_OUTPUT = %q, want %q", r.output, want)
			}
			if want := filepath.Dir(bin) + "\n"; r.path != want {
				t.Errorf("GITHUB_PATH = %q, want %q", r.path, want)
			}
			if data, err := os.ReadFile(bin); err != nil || string(data) != fakeBinary {
				t.Errorf("installed binary = %q, %v; want the archive's", data, err)
			}
		})
	}

	t.Run("a cached release is not downloaded again", func(t *testing.T) {
		t.Parallel()
		url, requests := releaseServer(t) // its own server, to count its requests
		cache := filepath.Join(t.TempDir(), "toolcache")
		env := []string{"TALKOPS_RELEASE_URL=" + url, "INPUT_VERSION=v1.2.3"}
		if r := runInstall(t, script, cache, env...); r.code != 0 {
			t.Fatalf("first install: exit %d\n%s", r.code, r.log)
		}
		if got := requests.Load(); got != 2 {
			t.Errorf("first install made %d requests, want 2 (archive, checksums.txt)", got)
		}
		r := runInstall(t, script, cache, env...)
		if r.code != 0 || !strings.Contains(r.log, "Using cached talkops v1.2.3") {
			t.Fatalf("second install: exit %d\n%s", r.code, r.log)
		}
		if got := requests.Load(); got != 2 {
			t.Errorf("the cached install made %d requests, want none", got-2)
		}
		if !strings.Contains(r.output, "bin="+filepath.Join(cache, "talkops", "v1.2.3", "linux-amd64", "talkops")) {
			t.Errorf("GITHUB_OUTPUT = %q", r.output)
		}
	})

	t.Run("the VERSION file picks the release", func(t *testing.T) {
		t.Parallel()
		tree := actionTree(t, "v1.2.3\n", false)
		r := runInstall(t, filepath.Join(tree, ".github", "action", "install.sh"), "", "TALKOPS_RELEASE_URL="+url)
		if r.code != 0 || !strings.Contains(r.log, "Downloading talkops v1.2.3") {
			t.Errorf("install.sh with VERSION v1.2.3: exit %d\n%s", r.code, r.log)
		}
	})
}

// actionTree copies install.sh into a new action checkout with the given VERSION and,
// with module, a tiny Go module laid out like talkops (cmd/talkops, internal/version) so
// the build-from-source path compiles in a second.
func actionTree(t *testing.T, version string, module bool) string {
	t.Helper()
	root := t.TempDir()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "action", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".github/action/install.sh": string(src),
		".github/action/VERSION":    version,
	}
	if module {
		files["go.mod"] = "module github.com/talkops/talkops\n\ngo 1.22\n"
		files["internal/version/version.go"] = "package version\n\nvar version, commit string\n\nfunc Get() (string, string) { return version, commit }\n"
		files["cmd/talkops/main.go"] = "package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/talkops/talkops/internal/version\"\n)\n\nfunc main() {\n\tv, c := version.Get()\n\tfmt.Printf(\"talkops %s\\ncommit %s\\n\", v, c)\n}\n"
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// goEnv passes the Go toolchain's caches through, offline.
func goEnv() []string {
	env := []string{"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod"}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT"} {
		if out, err := exec.Command("go", "env", k).Output(); err == nil {
			env = append(env, k+"="+strings.TrimSpace(string(out)))
		}
	}
	return env
}

func TestInstallFromSource(t *testing.T) {
	t.Parallel()
	need(t, "go", "a Go toolchain")
	tree := actionTree(t, "dev\n", true)
	script := filepath.Join(tree, ".github", "action", "install.sh")

	r := runInstall(t, script, "", goEnv()...)
	if r.code != 0 {
		t.Fatalf("install.sh (dev): exit %d\n%s", r.code, r.log)
	}
	bin := strings.TrimPrefix(strings.TrimSpace(r.output), "bin=")
	out, err := exec.CommandContext(t.Context(), bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	// install.sh stamps the same -X symbols the Makefile and goreleaser do.
	if want := "talkops dev\ncommit unknown\n"; string(out) != want {
		t.Errorf("built binary says %q, want %q", out, want)
	}
	if !strings.Contains(r.log, "Building talkops from source") {
		t.Errorf("log does not say it built from source:\n%s", r.log)
	}

	t.Run("no Go", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, tool := range []string{"bash", "dirname", "tr", "uname", "cat"} {
			if p, err := exec.LookPath(tool); err == nil {
				if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := runInstall(t, script, "", "PATH="+dir)
		if r.code != 1 || !strings.Contains(r.log, "add actions/setup-go before this step") {
			t.Errorf("install.sh without Go: exit %d\n%s", r.code, r.log)
		}
	})
}
