package faulttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The tests in this file replay what tripped a new user up on real projects, each
// through the real binary, where the user saw it.

// sandboxIDs runs `talkops sandbox ls --json --provider NAME` with env and returns the ids.
func sandboxIDs(t *testing.T, dir string, env map[string]string, provider string) []string {
	t.Helper()
	code, stdout, stderr := runTalkops(t, dir, env, time.Minute, "sandbox", "ls", "--json", "--provider", provider)
	if code != 0 {
		t.Fatalf("talkops sandbox ls --provider %s: exit %d\n%s", provider, code, stderr)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("talkops sandbox ls --json: %v\n%s", err, stdout)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

// Two talkops users (or two tests, each with its own state root) on one machine share
// TMPDIR: neither sees, lists or reaps the other's bwrap sandbox.
func TestBwrapSandboxesArePerStateRoot(t *testing.T) {
	t.Parallel()
	engine := engineEnv(t, pBwrap)
	rootA, rootB := t.TempDir(), t.TempDir()
	marker := newMarker()
	envA, envB := hermeticEnv(rootA, marker), hermeticEnv(rootB, marker)
	shared := filepath.Join(rootA, "tmp")
	envA["TMPDIR"], envB["TMPDIR"] = shared, shared
	for _, env := range []map[string]string{envA, envB} {
		for k, v := range engine {
			env[k] = v
		}
		if err := os.MkdirAll(env["HOME"], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(rootA, "project")
	writeFiles(t, project, map[string]string{
		"README.md": "x\n",
		"r.toml":    "[[check]]\nid = \"slow\"\nrun = \"" + loopCmd(marker) + "\"\ntimeout = \"2m\"\n",
	})

	run := startTalkops(t, project, envA, "--sandbox", "bwrap", "--rubric", "r.toml", "--output-format", "stream-json")
	if _, ok := run.waitEvent(func(e event) bool { return e.Type == "check.started" }, time.Minute); !ok {
		t.Fatalf("the run never reached its check\nstdout:\n%s\nstderr:\n%s", run.stdout, run.stderr)
	}
	if ids := sandboxIDs(t, project, envA, pBwrap); len(ids) != 1 {
		t.Errorf("the running user's sandbox ls lists %v, want its one sandbox", ids)
	}
	if ids := sandboxIDs(t, project, envB, pBwrap); len(ids) != 0 {
		t.Errorf("another state root's sandbox ls lists %v, want nothing (it must not see other users' sandboxes)", ids)
	}
	if code, _, stderr := runTalkops(t, project, envB, time.Minute, "sandbox", "gc", "--provider", "bwrap"); code != 0 {
		t.Errorf("sandbox gc from another state root: exit %d\n%s", code, stderr)
	}
	if ids := sandboxIDs(t, project, envA, pBwrap); len(ids) != 1 {
		t.Errorf("after another root's gc, the running sandbox is gone: %v", ids)
	}
	if ents, _ := os.ReadDir(filepath.Join(shared, "talkops-bwrap")); len(ents) != 0 {
		t.Errorf("sandbox directories under the shared TMPDIR: %d, want none", len(ents))
	}
	_ = run.signal(syscall.SIGINT)
	if code, ok := run.wait(time.Minute); !ok || code != 130 {
		t.Errorf("after SIGINT: exit %d (exited: %v), want 130", code, ok)
	}
	if ids := sandboxIDs(t, project, envA, pBwrap); len(ids) != 0 {
		t.Errorf("after the run: %v left", ids)
	}
}
