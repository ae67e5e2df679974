package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// isolationEnv returns the environment a provider under test needs, or skips when the
// engine is not on this machine (outside CI; in CI a missing engine is a failure).
func isolationEnv(t *testing.T, provider string) map[string]string {
	t.Helper()
	skip := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s", why)
		}
		t.Skip(why)
	}
	env := map[string]string{}
	switch provider {
	case "docker":
		host, image := os.Getenv("DOCKER_HOST"), os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
		if host == "" || image == "" {
			skip("no Docker engine: run `eval \"$(bash .ci/docker.sh start)\"` to test the docker provider")
		}
		env["DOCKER_HOST"] = host
		env["TALKOPS_SANDBOX_IMAGE"] = image
	case "bwrap":
		if _, err := exec.LookPath("bwrap"); err != nil {
			skip("bwrap is not installed (apt-get install bubblewrap)")
		}
	}
	return env
}

type listed struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	RunID    string `json:"run_id"`
}

// sandboxList lists one run's sandboxes: other tests may share the Docker engine.
func sandboxList(t *testing.T, dir string, env map[string]string, provider, runID string) []listed {
	t.Helper()
	got := runIn(t, dir, env, "sandbox", "ls", "--json", "--provider", provider, "--run-id", runID)
	if got.code != 0 {
		t.Fatalf("sandbox ls: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	var out []listed
	if err := json.Unmarshal([]byte(got.stdout), &out); err != nil {
		t.Fatalf("sandbox ls --json: %v\n%s", err, got.stdout)
	}
	return out
}

// TestKilledRunIsReaped covers the two ways a real talkops process can be stopped mid-check
// on each isolating provider: SIGTERM tears the sandbox down before exiting 143; SIGKILL
// leaves it behind, and `talkops sandbox gc` finds it (state file and provider labels) and
// deletes it.
func TestKilledRunIsReaped(t *testing.T) {
	t.Parallel()
	const longCheck = "[[check]]\nid = \"long\"\nrun = \"echo started > /tmp/marker; sleep 60\"\n"
	for _, provider := range []string{"bwrap", "docker", "fake"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			base := isolationEnv(t, provider)
			perRun := 1
			if provider == "docker" {
				perRun = 2 // the container and its workspace volume
			}
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
				t.Run(sig.String(), func(t *testing.T) {
					dir := project(t, map[string]string{"r.toml": longCheck})
					env := testEnv(t, base)
					env["TMPDIR"] = t.TempDir() // bwrap keeps its sandboxes under $TMPDIR
					if provider == "fake" {
						fe, _ := fakeEnv(t, "")
						for k, v := range fe {
							if strings.HasPrefix(k, "TALKOPS_TEST_FAKE") {
								env[k] = v
							}
						}
					}
					cmd, out := startTalkops(t, dir, env, "--sandbox", provider, "--rubric", "r.toml", "-q")
					// Wait until the check runs: the run's state entry exists and the stage is rubric.
					runID := waitStage(t, dir, "rubric", 60*time.Second)
					time.Sleep(300 * time.Millisecond)
					if got := sandboxList(t, dir, env, provider, runID); len(got) != perRun {
						t.Fatalf("while running, sandbox ls = %+v, want the run's sandbox", got)
					}
					_ = cmd.Process.Signal(sig)
					code := waitExit(t, cmd, 30*time.Second)
					switch sig {
					case syscall.SIGTERM:
						if code != 143 {
							t.Fatalf("SIGTERM: exit %d, want 143\n%s", code, out)
						}
						if got := sandboxList(t, dir, env, provider, runID); len(got) != 0 {
							t.Fatalf("after SIGTERM the sandbox remains: %+v", got)
						}
					case syscall.SIGKILL:
						if got := sandboxList(t, dir, env, provider, runID); len(got) != perRun {
							t.Fatalf("after SIGKILL, sandbox ls = %+v, want the orphan", got)
						}
						gc := runIn(t, dir, env, "sandbox", "gc", "--provider", provider, "--older-than", "0s", "--run-id", runID)
						if gc.code != 0 {
							t.Fatalf("sandbox gc: exit %d\n%s%s", gc.code, gc.stdout, gc.stderr)
						}
						if got := sandboxList(t, dir, env, provider, runID); len(got) != 0 {
							t.Fatalf("after gc the orphan remains: %+v\n%s", got, gc.stdout)
						}
					}
				})
			}
		})
	}
}

// waitStage polls result.json until the named stage is running, and returns the run id.
func waitStage(t *testing.T, dir string, stage result.StageName, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		matches, _ := filepath.Glob(filepath.Join(dir, ".talkops", "runs", "*", "result.json"))
		if len(matches) == 1 {
			var r result.Result
			if data, err := os.ReadFile(matches[0]); err == nil && json.Unmarshal(data, &r) == nil {
				if stageStatus(&r, stage) == "running" {
					return r.Run.ID
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("stage %s did not start within %s", stage, within)
	return ""
}
