package faulttest

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// An agent's command that poisons a shared cache on docker (rewrites an entry, plants
// one, deletes one) changes neither the host's cache nor what the next run sees, and
// every volume of both runs is gone after them. Through the real binary, on the engine's
// unix socket (a TCP engine does not share caches).
func TestDockerCachesCannotBePoisoned(t *testing.T) {
	t.Parallel()
	engine := engineEnv(t, pDocker)
	if !strings.HasPrefix(engine["DOCKER_HOST"], "unix://") {
		t.Skipf("DOCKER_HOST %q is not a unix socket", engine["DOCKER_HOST"])
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go preset asks `go env` where the caches are; go is not on PATH")
	}
	talkopsBin(t)
	root := t.TempDir()
	modCache, buildCache := filepath.Join(root, "gomod"), filepath.Join(root, "gobuild")
	writeFiles(t, modCache, map[string]string{"mod.zip": "module\n", "keep": "kept\n"})
	writeFiles(t, buildCache, map[string]string{"00/entry": "built\n"})
	before := map[string]string{}
	for _, d := range []string{modCache, buildCache} {
		maps.Copy(before, treeOf(t, d))
	}
	dir := filepath.Join(root, "project")
	const poison = `grep -qx module "$GOMODCACHE/mod.zip" && echo poisoned > "$GOMODCACHE/mod.zip" && echo evil > "$GOCACHE/planted" && rm "$GOMODCACHE/keep" && grep -qx poisoned "$GOMODCACHE/mod.zip"`
	const clean = `grep -qx module "$GOMODCACHE/mod.zip" && test -e "$GOMODCACHE/keep" && test ! -e "$GOCACHE/planted" && grep -qx built "$GOCACHE/00/entry"`
	writeFiles(t, dir, map[string]string{
		"README.md":   "# caches\n",
		"poison.toml": "[[check]]\nid = \"poison\"\nrun = '" + poison + "'\n",
		"clean.toml":  "[[check]]\nid = \"clean\"\nrun = '" + clean + "'\n",
		".git/HEAD":   "",
	})
	env := hermeticEnv(root, newMarker())
	maps.Copy(env, engine)
	env["TALKOPS_SANDBOX_CACHES"] = "go"
	env["GOMODCACHE"], env["GOCACHE"] = modCache, buildCache
	writeFiles(t, root, map[string]string{"home/.keep": "", "tmp/.keep": ""})
	for _, rubric := range []string{"poison.toml", "clean.toml"} {
		reportDir := filepath.Join(root, "report-"+rubric)
		code, stdout, stderr := runTalkops(t, dir, env, 3*time.Minute, "--sandbox", pDocker, "--rubric", rubric,
			"--output-format", "stream-json", "--report-dir", reportDir)
		res, err := result.Read(filepath.Join(reportDir, "result.json"))
		if err != nil {
			t.Fatalf("%s: result.json: %v\n%s", rubric, err, tail(stderr))
		}
		if code != 0 || res.Verdict != result.VerdictPass {
			t.Fatalf("%s: exit %d verdict %s (%s), want 0 pass\n%s\n%s", rubric, code, res.Verdict, res.Reason, tail(stdout), tail(stderr))
		}
		if res.Sync == nil || !slices.Equal(res.Sync.Caches, []string{"go-mod", "go-build"}) || len(res.Sync.CacheNotes) != 0 {
			t.Errorf("%s: sync = %+v, want the caches go-mod and go-build shared without notes", rubric, res.Sync)
		}
		after := map[string]string{}
		for _, d := range []string{modCache, buildCache} {
			maps.Copy(after, treeOf(t, d))
		}
		if !maps.Equal(before, after) {
			t.Errorf("after %s the host caches are %v, want %v", rubric, after, before)
		}
		if res.Teardown == nil || res.Teardown.Status != "deleted" {
			t.Fatalf("%s: teardown = %+v, want deleted", rubric, res.Teardown)
		}
		// A note means the engine was still removing volumes when talkops exited.
		deadline := time.Now().Add(time.Minute)
		for left := dockerAlive(t, engine["DOCKER_HOST"], res.Run.ID, 0); len(left) > 0; left = dockerAlive(t, engine["DOCKER_HOST"], res.Run.ID, 0) {
			if res.Teardown.Note == "" || time.Now().After(deadline) {
				t.Fatalf("%s: left after the run: %v (teardown note %q)", rubric, left, res.Teardown.Note)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// A cancelled job whose workspace volume the engine is slow to remove (here: its removal
// request never answered) still exits inside the cancel window: the container goes,
// result.json says the teardown left the volume to the engine, and gc removes it. The
// engine is on TCP here (the fault proxy), so a configured cache is left out with a note.
func TestDockerSlowVolumeRemovalFitsCancelWindow(t *testing.T) {
	t.Parallel()
	talkopsBin(t)
	root := t.TempDir()
	marker := newMarker()
	tg := newTarget(t, pDocker, root, "")
	dir := filepath.Join(root, "project")
	files := map[string]string{
		"README.md": "# slow volume\n",
		"r.toml":    "[[check]]\nid = \"c1\"\nrun = \"" + strings.ReplaceAll(loopCmd(marker), `"`, `\"`) + "\"\n",
		".git/HEAD": "",
	}
	writeFiles(t, dir, files)
	writeFiles(t, root, map[string]string{"home/.keep": "", "tmp/.keep": ""})
	env := hermeticEnv(root, marker)
	maps.Copy(env, tg.env)
	// Through the proxy the engine is on TCP: a cache is not shared, and result.json says so.
	env["TALKOPS_SANDBOX_CACHES"] = filepath.Join(root, "home")
	tg.proxy.add("DELETE", `/volumes/[^/]+$`, 0, actHang, 0)
	reportDir := filepath.Join(root, "report")
	p := startTalkops(t, dir, env, "--sandbox", pDocker, "--rubric", "r.toml", "--output-format", "stream-json", "--report-dir", reportDir)
	if _, ok := p.waitEvent(func(e event) bool { return e.Type == "check.started" }, time.Minute); !ok {
		t.Fatalf("the check never started\n%s", tail(p.stderr.String()))
	}
	deadline := time.Now().Add(time.Minute)
	for !commandRunning(marker) {
		if time.Now().After(deadline) || p.exited() {
			t.Fatalf("the check's command never ran\n%s", tail(p.stderr.String()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	runID, pid := p.runID(), p.cmd.Process.Pid
	t0 := time.Now()
	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// GitHub Actions sends SIGKILL 10 s after its cancel; the teardown budget is 7 s.
	code, ok := p.wait(10 * time.Second)
	if !ok || code != 143 {
		t.Fatalf("exit %d (exited: %v) %s after SIGTERM, want 143 inside the cancel window\n%s", code, ok, time.Since(t0), tail(p.stderr.String()))
	}
	res, err := result.Read(filepath.Join(reportDir, "result.json"))
	if err != nil {
		t.Fatalf("result.json: %v", err)
	}
	td := res.Teardown
	if td == nil || td.Status != "deleted" || td.Error != "" || !strings.Contains(td.Note, "still removing volume(s) talkops-") || !strings.Contains(td.Note, "talkops sandbox gc") {
		t.Errorf("teardown = %+v, want deleted with a note naming the volume left to the engine and gc", td)
	}
	if _, ok, _ := p.stdout.find(func(e event) bool {
		return e.Type == "warning" && e.Stage == "teardown" && strings.Contains(e.Message, "still removing volume(s)")
	}); !ok {
		t.Errorf("no teardown warning event says the engine is still removing the volume:\n%s", tail(p.stdout.String()))
	}
	if res.Sync == nil || len(res.Sync.Caches) != 0 || len(res.Sync.CacheNotes) != 1 || !strings.Contains(res.Sync.CacheNotes[0], "not reached through a unix socket") {
		t.Errorf("sync = %+v, want the cache left out with a note that the engine is on TCP", res.Sync)
	}
	if res.Interrupted != "SIGTERM" || res.ExitCode != 143 {
		t.Errorf("result: interrupted %q exit %d, want SIGTERM 143", res.Interrupted, res.ExitCode)
	}
	left := tg.alive(t, runID, pid)
	if len(left) != 1 || !strings.HasPrefix(left[0], volumePrefix) {
		t.Errorf("after exit, left = %v, want the workspace volume only (the container removed)", left)
	}
	tg.proxy.clear()
	gcCode, gcOut, gcErr := runGC(t, pDocker, dir, env, "sandbox", "gc", "--older-than", "0s", "--provider", pDocker, "--run-id", runID)
	if left := tg.alive(t, runID, pid); len(left) != 0 || gcCode != 0 {
		t.Errorf("after gc (exit %d) left = %v\n%s%s", gcCode, left, gcOut, gcErr)
	}
}

// treeOf maps each file under root (by its path) to its content.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
