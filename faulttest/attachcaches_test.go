package faulttest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBwrapAttachKeepsCaches runs the real binary on bwrap with the go caches shared,
// kills it mid-run, and attaches a second run to the sandbox left behind with no caches
// configured: the attached run's checks see the caches the sandbox was created with, their
// variables and the first run's write into them, and no write reaches the host's cache.
func TestBwrapAttachKeepsCaches(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pBwrap)
	dir := filepath.Join(root, "project")
	modCache, buildCache := filepath.Join(root, "gomod"), filepath.Join(root, "gocache")
	writeFiles(t, modCache, map[string]string{"mod.txt": "warm\n"})
	writeFiles(t, buildCache, map[string]string{"README": "build cache\n"})
	writeFiles(t, dir, map[string]string{
		"README.md": "readme\n",
		"first.toml": `name = "first"
[[check]]
id = "write"
run = 'echo run1 > "$GOMODCACHE/run1"'
[[check]]
id = "hold"
run = 'sleep 600'
timeout = "15m"
`,
		"attached.toml": `name = "attached"
[[check]]
id = "caches"
run = 'test -n "$GOMODCACHE" && test -n "$GOCACHE" && cat "$GOMODCACHE/mod.txt" "$GOMODCACHE/run1" && echo poisoned > "$GOMODCACHE/mod.txt" && echo run2 > "$GOMODCACHE/run2"'
`,
	})
	env["GOMODCACHE"], env["GOCACHE"] = modCache, buildCache
	first := map[string]string{"TALKOPS_SANDBOX_CACHES": "go"}
	for k, v := range env {
		first[k] = v
	}

	report := filepath.Join(root, "report-first")
	p := startTalkops(t, dir, first, "--sandbox", pBwrap, "--rubric", "first.toml", "--output-format", "stream-json", "--report-dir", report)
	if _, ok := p.waitEvent(func(e event) bool {
		return e.Type == "check.started" && strings.Contains(string(e.Data), `"id":"hold"`)
	}, 2*time.Minute); !ok {
		t.Fatalf("the first run never reached its hold check\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	r, _ := readReport(t, report, tail(p.stderr.String()))
	if r.Sandbox == nil || r.Sandbox.ID == "" || r.Sync == nil || len(r.Sync.Caches) == 0 {
		t.Fatalf("first run: sandbox %+v, sync %+v; want a sandbox id and shared caches", r.Sandbox, r.Sync)
	}
	id := r.Sandbox.ID
	_ = p.signal(syscall.SIGKILL)
	if _, ok := p.wait(time.Minute); !ok {
		t.Fatal("the first run did not die")
	}
	t.Cleanup(func() {
		_, _, _ = runTalkops(t, dir, env, time.Minute, "sandbox", "gc", "--provider", pBwrap, "--older-than", "0s")
	})

	report = filepath.Join(root, "report-attached")
	code, _, stderr := runTalkops(t, dir, env, 2*time.Minute, "--sandbox", pBwrap, "--sandbox-id", id, "--rubric", "attached.toml", "--report-dir", report, "-q")
	r, _ = readReport(t, report, tail(stderr))
	if code != 0 {
		t.Errorf("attached run: exit %d, want 0 (the caches are there)\n%s", code, tail(stderr))
	}
	if r.Sandbox == nil || !r.Sandbox.Attached || r.Sandbox.ID != id {
		t.Errorf("attached run: sandbox %+v, want attached to %s", r.Sandbox, id)
	}
	if b, _ := os.ReadFile(filepath.Join(modCache, "mod.txt")); string(b) != "warm\n" {
		t.Errorf("the host cache changed: %q", b)
	}
	for _, name := range []string{"run1", "run2"} {
		if _, err := os.Stat(filepath.Join(modCache, name)); !os.IsNotExist(err) {
			t.Errorf("%s, written in the sandbox, reached the host cache (%v)", name, err)
		}
	}
}
