package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --run-id names the run: the report directory, result.json's run.id and the sandbox
// labels carry it, so a caller (the GitHub Action's post step) can reap exactly this run.
func TestRunIDFlag(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{"README.md": "hi\n", "rubric.toml": passRubric})
	out := runIn(t, dir, testEnv(t, nil), "run", "--rubric", "rubric.toml", "--run-id", "gh-42-1.a_b")
	if out.code != 0 {
		t.Fatalf("exit %d\n%s", out.code, out.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, ".talkops", "runs", "gh-42-1.a_b", "result.json")); err != nil {
		t.Errorf("the report directory is not named after --run-id: %v", err)
	}
	if r := readResult(t, dir); r.Run.ID != "gh-42-1.a_b" {
		t.Errorf("result.json run.id = %q, want gh-42-1.a_b", r.Run.ID)
	}

	for _, bad := range []string{"../escape", "a/b", ".hidden", "-x", strings.Repeat("a", 65), "sp ace"} {
		out := runIn(t, dir, testEnv(t, nil), "run", "--rubric", "rubric.toml", "--run-id="+bad)
		if out.code != 2 || !strings.Contains(out.stderr, "--run-id") {
			t.Errorf("--run-id=%q: exit %d, want 2 naming --run-id\n%s", bad, out.code, out.stderr)
		}
	}
}
