package faulttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// TestBwrapCachesShowWorkspaceAtProjectPath runs the real binary on bwrap with a shared
// cache and no working_dir: the checks run at the project's own path (where build caches
// keyed by path hit), yet what they see there is the sandbox's layer over the synced view
// (no withheld or ignored file), their writes reach neither the project nor the host's
// cache, result.json says where the workspace was, and an explicit working_dir still wins.
func TestBwrapCachesShowWorkspaceAtProjectPath(t *testing.T) {
	t.Parallel()
	engineEnv(t, pBwrap)
	// The project must lie outside /tmp: the sandbox has a /tmp of its own, so a project
	// there cannot appear at its own path (that case keeps /workspace, with a note).
	root, err := os.MkdirTemp("/var/tmp", "talkops-faulttest-")
	if err != nil {
		t.Skipf("no directory outside /tmp for the project: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	dir := filepath.Join(root, "project")
	cache := filepath.Join(root, "cache")
	checks := func(workDir string) string {
		return fmt.Sprintf(`name = "caches"
[[check]]
id = "where"
run = 'test "$PWD" = %q'
[[check]]
id = "hidden"
run = "test ! -e .env && test ! -e ignored.txt && test -f README.md"
[[check]]
id = "writes"
run = 'cat %q/entry && echo poisoned > %q/entry && echo changed > README.md && echo new > created.txt'
`, workDir, cache, cache)
	}
	writeFiles(t, dir, map[string]string{
		"README.md":     "readme\n",
		".env":          "TOKEN=s3cr3t-value\n",
		".gitignore":    "ignored.txt\n",
		"ignored.txt":   "ignored\n",
		"r.toml":        checks(dir),
		"explicit.toml": checks("/src"),
	})
	writeFiles(t, cache, map[string]string{"entry": "warm\n"})
	for _, d := range []string{filepath.Join(dir, ".git"), filepath.Join(root, "home"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marker := newMarker()
	env := hermeticEnv(root, marker)
	env["TALKOPS_SANDBOX_CACHES"] = cache // a host directory: trusted-only, so from the environment

	run := func(rubricFile, reportDir string) *result.Result {
		t.Helper()
		args := []string{"--sandbox", "bwrap", "--rubric", rubricFile, "--report-dir", reportDir, "-q"}
		code, _, stderr := runTalkops(t, dir, env, 2*time.Minute, args...)
		r, b := readReport(t, reportDir, tail(stderr))
		if code != 0 {
			t.Errorf("talkops %v: exit %d, want 0 (every check passes)\n%s\n%s", args, code, b, tail(stderr))
		}
		return r
	}

	r := run("r.toml", filepath.Join(root, "report"))
	if r.Sandbox.WorkDir != dir || r.Sync == nil || r.Sync.RemoteTarget != dir || r.Sync.Mode != "overlay" {
		t.Errorf("result: sandbox.work_dir %q, sync %+v; want the project's path %q, layered", r.Sandbox.WorkDir, r.Sync, dir)
	}
	if r.Sync != nil && len(r.Sync.Caches) != 1 {
		t.Errorf("result: sync.caches = %q, want the one host directory", r.Sync.Caches)
	}

	// working_dir is safe for the project's own config: it only moves the workspace inside
	// the sandbox.
	writeFiles(t, dir, map[string]string{".talkops/config.toml": "[sandboxes.providers.bwrap]\nworking_dir = \"/src\"\n"})
	if r = run("explicit.toml", filepath.Join(root, "report-explicit")); r.Sandbox.WorkDir != "/src" {
		t.Errorf("with working_dir = \"/src\": sandbox.work_dir %q", r.Sandbox.WorkDir)
	}
	for name, want := range map[string]string{"README.md": "readme\n", ".env": "TOKEN=s3cr3t-value\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("the host project's %s is %q after the runs, want %q", name, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "created.txt")); !os.IsNotExist(err) {
		t.Errorf("a file created in the sandbox reached the host project (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "entry")); string(b) != "warm\n" {
		t.Errorf("the host cache changed: %q", b)
	}
	if left := waitNoLeftovers(marker, root, 5*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "state", "talkops", "bwrap")); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.IsDir() && e.Name() != ".trash" }) {
		t.Errorf("sandbox directories left in the state dir: %v", ents)
	}
}
