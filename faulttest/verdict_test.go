package faulttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/result"
)

// The gate cannot be passed by making the run error: the agent deletes the script the
// rubric's check runs, so the check exits 127, the item cannot be evaluated and the run
// reaches no verdict (exit 3). Each test runs the real binary as a GitHub Actions job on
// a same-repository pull request.

// sabotagedRun runs talkops with an agent that deletes check.sh before the rubric runs
// it, publishing to a fresh GitHub fake, with extra flags. It returns the exit code, the
// fake, the result.json path and the job's environment.
func sabotagedRun(t *testing.T, extra ...string) (int, *githubFake, string, map[string]string) {
	t.Helper()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
		{ToolCalls: []modeltest.ToolCall{{Name: "execute", Input: json.RawMessage(`{"command":"rm check.sh"}`)}}},
		{Text: "Done."},
	}})
	t.Cleanup(srv.Close)
	gh := newGitHubFake(t)
	dir, env := trustProject(t, map[string]string{
		"check.sh": "#!/bin/sh\nexit 0\n",
		"r.toml":   "name = \"gate\"\n[[check]]\nid = \"tests\"\nrun = \"./check.sh\"\n",
	})
	root := filepath.Dir(dir)
	for k, v := range gh.actionsEnv(t, root) {
		env[k] = v
	}
	env["ANTHROPIC_API_KEY"] = modelKey
	reportDir := filepath.Join(root, "report")
	args := append([]string{"-p", "Make the tests pass.", "-y", "--model", "anthropic:claude-test", "--base-url", srv.URL,
		"--sandbox", "local", "--rubric", "r.toml", "--rubric-max-iterations", "1", "--report-dir", reportDir}, extra...)
	code, _, stderr := runTalkops(t, dir, env, 2*time.Minute, args...)
	path := filepath.Join(reportDir, "result.json")
	res, err := result.Read(path)
	if err != nil {
		t.Fatalf("result.json: %v\nstderr:\n%s", err, tail(stderr))
	}
	// Control: the sabotage really made the check unrunnable, not failed.
	if res.Verdict != result.VerdictError || res.Rubric == nil || len(res.Rubric.Items) == 0 ||
		res.Rubric.Items[0].Status != result.StatusError || res.Rubric.Items[0].Check == nil ||
		res.Rubric.Items[0].Check.ExitCode == nil || *res.Rubric.Items[0].Check.ExitCode != 127 {
		t.Fatalf("verdict %s, rubric %+v; want an error with the check exiting 127\nstderr:\n%s", res.Verdict, res.Rubric, tail(stderr))
	}
	return code, gh, path, env
}

// checkConclusions returns the conclusion of every check-run request that completed one.
func checkConclusions(t *testing.T, gh *githubFake) []string {
	t.Helper()
	var out []string
	for _, b := range gh.recorded() {
		head, body, _ := strings.Cut(b, "\n")
		if !strings.Contains(head, "/check-runs") {
			continue
		}
		var cr struct{ Conclusion string }
		if err := json.Unmarshal([]byte(body), &cr); err != nil {
			t.Fatalf("check run body: %v\n%s", err, b)
		}
		if cr.Conclusion != "" {
			out = append(out, cr.Conclusion)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no check run was completed; GitHub saw:\n%s", strings.Join(gh.recorded(), "\n---\n"))
	}
	return out
}

func wantConclusion(t *testing.T, what string, got []string, want string) {
	t.Helper()
	for _, c := range got {
		if c != want {
			t.Errorf("%s: check run conclusions %q, want only %s", what, got, want)
			return
		}
	}
}

func TestErroredRunIsAFailingCheck(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		code, gh, path, env := sabotagedRun(t)
		if code != 3 {
			t.Errorf("run: exit %d, want 3", code)
		}
		wantConclusion(t, "run", checkConclusions(t, gh), "failure")

		// The privileged job publishing the same result.json decides the same way.
		fresh := newGitHubFake(t)
		env["GITHUB_API_URL"] = fresh.srv.URL + "/api/v3"
		code, _, stderr := runTalkops(t, filepath.Dir(path), env, time.Minute, "report", "--from", path, "--exit-code")
		if code != 3 {
			t.Errorf("report --from --exit-code: exit %d, want 3\n%s", code, tail(stderr))
		}
		wantConclusion(t, "report --from", checkConclusions(t, fresh), "failure")

		neutral := newGitHubFake(t)
		env["GITHUB_API_URL"] = neutral.srv.URL + "/api/v3"
		if code, _, stderr := runTalkops(t, filepath.Dir(path), env, time.Minute, "report", "--from", path, "--error-conclusion", "neutral"); code != 0 {
			t.Errorf("report --from --error-conclusion neutral: exit %d, want 0\n%s", code, tail(stderr))
		}
		wantConclusion(t, "report --from --error-conclusion neutral", checkConclusions(t, neutral), "neutral")
	})
	t.Run("opting into neutral", func(t *testing.T) {
		t.Parallel()
		code, gh, _, _ := sabotagedRun(t, "--error-conclusion", "neutral")
		if code != 3 {
			t.Errorf("run: exit %d, want 3", code)
		}
		wantConclusion(t, "run --error-conclusion neutral", checkConclusions(t, gh), "neutral")
	})
}

// TestAdvisoryRunReportsLikeItExited: an advisory run that errors exits 0, and so does
// report --from --exit-code on its result.json (the mode is recorded there); the check
// run still fails, since advisory is about the job, not the gate.
func TestAdvisoryRunReportsLikeItExited(t *testing.T) {
	t.Parallel()
	code, gh, path, env := sabotagedRun(t, "--advisory")
	if code != 0 {
		t.Errorf("run --advisory: exit %d, want 0", code)
	}
	wantConclusion(t, "run --advisory", checkConclusions(t, gh), "failure")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"advisory": true`) {
		t.Errorf("result.json does not record advisory mode:\n%s", data)
	}
	fresh := newGitHubFake(t)
	env["GITHUB_API_URL"] = fresh.srv.URL + "/api/v3"
	code, _, stderr := runTalkops(t, filepath.Dir(path), env, time.Minute, "report", "--from", path, "--exit-code")
	if code != 0 {
		t.Errorf("report --from an advisory result --exit-code: exit %d, want 0\n%s", code, tail(stderr))
	}
}
