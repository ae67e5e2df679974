package faulttest

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers/cache/cachetest"
	"github.com/talkops/talkops/result"
)

// TestCachePresetsHideCredentials runs the real binary with the cargo and gradle presets
// over homes holding registry tokens and repository passwords, on bwrap and on docker:
// the checks that read the credential files fail and find nothing, the secret appears in
// no output or report, while the cache entries are there and the homes writable, and the
// host homes never change. result.json says where the workspace was.
func TestCachePresetsHideCredentials(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{pBwrap, pDocker} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			engine := engineEnv(t, provider)
			if h := engine["DOCKER_HOST"]; provider == pDocker && !strings.HasPrefix(h, "unix://") {
				t.Skipf("DOCKER_HOST %q is not a unix socket", h)
			}
			talkopsBin(t)
			root := t.TempDir()
			homes := filepath.Join(root, "tools")
			toolEnv := cachetest.Homes(t, homes)
			before := cachetest.Tree(t, homes)
			dir := filepath.Join(root, "project")
			writeFiles(t, dir, map[string]string{
				"README.md": "# credentials\n",
				".git/HEAD": "",
				"r.toml": `[[check]]
id = "cargo-credentials"
run = 'cat "$CARGO_HOME/credentials.toml"'
[[check]]
id = "gradle-properties"
run = 'cat "$GRADLE_USER_HOME/gradle.properties"'
[[check]]
id = "secret-anywhere"
run = 'grep -rl "token = " "$CARGO_HOME" "$GRADLE_USER_HOME"'
[[check]]
id = "caches"
run = 'grep -qx "serde index" "$CARGO_HOME/registry/index/crates.io/se/rd/serde" && grep -qx "lib jar" "$GRADLE_USER_HOME/caches/modules-2/files-2.1/lib.jar" && touch "$CARGO_HOME/.package-cache" && mkdir "$GRADLE_USER_HOME/daemon"'
`,
			})
			writeFiles(t, root, map[string]string{"home/.keep": "", "tmp/.keep": ""})
			env := hermeticEnv(root, newMarker())
			maps.Copy(env, engine)
			env["TALKOPS_SANDBOX_CACHES"] = "cargo,gradle"
			env["CARGO_HOME"], env["GRADLE_USER_HOME"] = toolEnv["CARGO_HOME"], toolEnv["GRADLE_USER_HOME"]
			reportDir := filepath.Join(root, "report")
			code, stdout, stderr := runTalkops(t, dir, env, 3*time.Minute, "--sandbox", provider, "--rubric", "r.toml",
				"--output-format", "stream-json", "--report-dir", reportDir)
			res, err := result.Read(filepath.Join(reportDir, "result.json"))
			if err != nil {
				t.Fatalf("result.json: %v\n%s", err, tail(stderr))
			}
			if code != 1 || res.Verdict != result.VerdictFail || res.Rubric == nil {
				t.Fatalf("exit %d verdict %s (%s), want 1 fail\n%s\n%s", code, res.Verdict, res.Reason, tail(stdout), tail(stderr))
			}
			want := map[string]result.ItemStatus{
				"cargo-credentials": result.StatusFail, "gradle-properties": result.StatusFail,
				"secret-anywhere": result.StatusFail, "caches": result.StatusPass,
			}
			for _, it := range res.Rubric.Items {
				if it.Status != want[it.ID] {
					t.Errorf("check %s: %s, want %s (%+v)", it.ID, it.Status, want[it.ID], it.Check)
				}
			}
			if res.Sync == nil || len(res.Sync.Caches) != 6 || strings.Contains(strings.Join(res.Sync.CacheNotes, "\n"), "not shared") {
				t.Fatalf("sync = %+v, want the homes and four cache parts shared", res.Sync)
			}
			// The project lies under /tmp: docker shows the workspace at its path, bwrap
			// (whose sandbox has a /tmp of its own) at /workspace with a note.
			wantWorkDir := map[string]string{pBwrap: "/workspace", pDocker: dir}[provider]
			if res.Sandbox.WorkDir != wantWorkDir || res.Sync.RemoteTarget != wantWorkDir {
				t.Errorf("sandbox.work_dir %q, sync.remote_target %q; want %q", res.Sandbox.WorkDir, res.Sync.RemoteTarget, wantWorkDir)
			}
			leaks := []string{stdout, stderr}
			_ = filepath.WalkDir(reportDir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					b, _ := os.ReadFile(p)
					leaks = append(leaks, string(b))
				}
				return nil
			})
			for _, s := range leaks {
				if strings.Contains(s, cachetest.Secret) {
					t.Errorf("the secret reached talkops's output or report:\n%s", tail(s))
				}
			}
			if after := cachetest.Tree(t, homes); !maps.Equal(before, after) {
				t.Errorf("the host homes changed: %v, want %v", after, before)
			}
		})
	}
}
