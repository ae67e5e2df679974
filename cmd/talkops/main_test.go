package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/providers/builtin"
	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/result"
)

// TestMain lets the test binary act as the talkops binary for process-level tests: a
// child started with TALKOPS_TEST_BE_MAIN=1 runs main() and exits.
func TestMain(m *testing.M) {
	if os.Getenv("TALKOPS_TEST_BE_MAIN") == "1" {
		os.Args = append([]string{"talkops"}, os.Args[1:]...)
		os.Exit(runProcess(testRegistry(os.Getenv)))
	}
	os.Exit(m.Run())
}

// testRegistry is what a test build of the binary offers: the release providers, and the
// fake when getenv enables it (fake.EnvEnable).
func testRegistry(getenv func(string) string) builtin.Registry {
	return builtin.Providers().With(fake.CLIProviders(getenv))
}

// project makes a project directory (a git root) with the given files and returns it.
func project(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testEnv is a hermetic environment: its own HOME and state dir, nothing from the host.
func testEnv(t *testing.T, extra map[string]string) map[string]string {
	t.Helper()
	home := t.TempDir()
	env := map[string]string{
		"HOME":           home,
		"XDG_STATE_HOME": filepath.Join(home, "state"),
		"PATH":           os.Getenv("PATH"),
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

type runOutcome struct {
	code           int
	stdout, stderr string
	dir            string
}

// runIn drives the whole program in-process, as main would, in dir.
func runIn(t *testing.T, dir string, env map[string]string, args ...string) runOutcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string { return env[k] }
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		getenv: getenv, workDir: dir, providers: testRegistry(getenv)}
	err := a.run(context.Background(), args)
	code := exit.Code(err)
	if err != nil && !exit.IsReported(err) {
		stderr.WriteString("talkops: " + err.Error() + "\n")
	}
	return runOutcome{code: code, stdout: stdout.String(), stderr: stderr.String(), dir: dir}
}

// readResult loads the single result.json under dir/.talkops/runs.
func readResult(t *testing.T, dir string) *result.Result {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, ".talkops", "runs", "*", "result.json"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("want exactly one result.json under %s/.talkops/runs, got %v (%v)", dir, matches, err)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var r result.Result
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("result.json: %v\n%s", err, data)
	}
	return &r
}

func stageStatus(r *result.Result, name result.StageName) result.StageStatus {
	status := result.StageStatus("")
	for _, s := range r.Stages {
		if s.Name == name {
			status = s.Status
		}
	}
	return status
}

const passRubric = `
name = "smoke"
[[check]]
id = "true"
run = ["true"]
[[check]]
id = "file"
run = "test -f README.md"
`

const failRubric = `
name = "smoke"
[[check]]
id = "false"
title = "always fails"
run = "echo nope >&2; exit 4"
`

func TestExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		files     map[string]string
		args      []string
		want      int
		stderr    string // substring of stderr
		noResult  bool   // nothing must be provisioned or written
		verdict   string
		teardown  result.TeardownStatus
		setupExit int
	}{
		{name: "pass", files: map[string]string{"r.toml": passRubric, "README.md": "hi"},
			args: []string{"--rubric", "r.toml"}, want: 0, verdict: "pass", teardown: "deleted"},
		{name: "fail", files: map[string]string{"r.toml": failRubric},
			args: []string{"--rubric", "r.toml"}, want: 1, verdict: "fail", teardown: "deleted"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, want: 2, stderr: "--no-such-flag", noResult: true},
		{name: "nothing to do", args: []string{}, want: 2, stderr: "nothing to do", noResult: true},
		{name: "unknown provider", files: map[string]string{"r.toml": passRubric},
			args: []string{"--rubric", "r.toml", "--sandbox=nosuch"}, want: 2, stderr: "bwrap", noResult: true},
		{name: "missing setup script", files: map[string]string{"r.toml": passRubric},
			args: []string{"--rubric", "r.toml", "--sandbox-setup", "missing.sh"}, want: 2, stderr: "missing.sh", noResult: true},
		{name: "bad rubric", files: map[string]string{"r.toml": "[[check]]\nid = 1\n"},
			args: []string{"--rubric", "r.toml"}, want: 2, stderr: "r.toml:2", noResult: true},
		{name: "bad config", files: map[string]string{"r.toml": passRubric, ".talkops/config.toml": "[sandboxes]\ndefualt = \"local\"\n"},
			args: []string{"--rubric", "r.toml"}, want: 2, stderr: "config.toml:2", noResult: true},
		{name: "setup fails", files: map[string]string{"r.toml": passRubric, "setup.sh": "echo preparing\necho broken >&2\nexit 7\n"},
			args: []string{"--rubric", "r.toml", "--sandbox-setup", "setup.sh"}, want: 3, stderr: "exited with code 7",
			verdict: "error", teardown: "deleted", setupExit: 7},
		{name: "setup fails advisory", files: map[string]string{"r.toml": passRubric, "setup.sh": "exit 7\n"},
			args: []string{"--rubric", "r.toml", "--sandbox-setup", "setup.sh", "--advisory"}, want: 0,
			verdict: "error", teardown: "deleted", setupExit: 7},
		{name: "timeout", files: map[string]string{"r.toml": "[[check]]\nid = \"slow\"\nrun = \"sleep 30\"\n"},
			args: []string{"--rubric", "r.toml", "--timeout", "1s"}, want: 124, verdict: "fail", teardown: "deleted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, tc.files)
			env := testEnv(t, nil)
			got := runIn(t, dir, env, tc.args...)
			if got.code != tc.want {
				t.Fatalf("talkops %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, got.code, tc.want, got.stdout, got.stderr)
			}
			if tc.stderr != "" && !strings.Contains(got.stderr+got.stdout, tc.stderr) {
				t.Errorf("output does not mention %q\nstdout:\n%s\nstderr:\n%s", tc.stderr, got.stdout, got.stderr)
			}
			if tc.noResult {
				if _, err := os.Stat(filepath.Join(dir, ".talkops", "runs")); !os.IsNotExist(err) {
					t.Errorf("a usage error wrote a report dir: %v", err)
				}
				if entries, _ := os.ReadDir(filepath.Join(env["XDG_STATE_HOME"], "talkops", "sandboxes")); len(entries) != 0 {
					t.Errorf("a usage error recorded sandboxes: %v", entries)
				}
				return
			}
			r := readResult(t, dir)
			if r.Verdict != tc.verdict || r.ExitCode != tc.want {
				t.Errorf("result.json verdict %q exit %d, want %q exit %d", r.Verdict, r.ExitCode, tc.verdict, tc.want)
			}
			if r.Teardown == nil || r.Teardown.Status != tc.teardown {
				t.Errorf("result.json teardown = %+v, want status %q", r.Teardown, tc.teardown)
			}
			if tc.setupExit != 0 && (r.Setup == nil || r.Setup.ExitCode != tc.setupExit) {
				t.Errorf("result.json setup = %+v, want exit %d", r.Setup, tc.setupExit)
			}
		})
	}
}

func TestQuietPrintsOnlyTheVerdict(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "x"})
	got := runIn(t, dir, testEnv(t, nil), "-q", "--rubric", "r.toml")
	if got.code != 0 {
		t.Fatalf("exit %d: %s", got.code, got.stderr)
	}
	lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "talkops: pass") {
		t.Errorf("-q stdout = %q, want one verdict line", got.stdout)
	}
	if got.stderr != "" {
		t.Errorf("-q stderr = %q, want nothing", got.stderr)
	}
}

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "x"})
		got := runIn(t, dir, testEnv(t, nil), "--json", "--rubric", "r.toml")
		var r result.Result
		if err := json.Unmarshal([]byte(got.stdout), &r); err != nil {
			t.Fatalf("--json stdout is not one JSON object: %v\n%s", err, got.stdout)
		}
		if r.Verdict != "pass" || r.Rubric == nil || len(r.Rubric.Items) != 2 {
			t.Errorf("--json result = verdict %q rubric %+v", r.Verdict, r.Rubric)
		}
	})
	t.Run("stream-json", func(t *testing.T) {
		t.Parallel()
		dir := project(t, map[string]string{"r.toml": passRubric, "README.md": "x"})
		got := runIn(t, dir, testEnv(t, nil), "--output-format", "stream-json", "--rubric", "r.toml")
		var types []string
		for _, line := range strings.Split(strings.TrimSpace(got.stdout), "\n") {
			var e struct{ Type string }
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("stream-json line is not JSON: %q", line)
			}
			types = append(types, e.Type)
		}
		if len(types) < 4 || types[0] != "run.started" || types[len(types)-1] != "run.finished" {
			t.Errorf("stream-json event types = %v, want run.started … run.finished", types)
		}
	})
	t.Run("contradiction", func(t *testing.T) {
		t.Parallel()
		got := runIn(t, project(t, nil), testEnv(t, nil), "--json", "--output-format", "text")
		if got.code != 2 {
			t.Errorf("--json with --output-format text: exit %d, want 2", got.code)
		}
	})
}

func TestHelpNamesEnvAndConfig(t *testing.T) {
	t.Parallel()
	got := runIn(t, project(t, nil), testEnv(t, nil), "run", "--help")
	if got.code != 0 {
		t.Fatalf("--help exit %d: %s", got.code, got.stderr)
	}
	for _, want := range []string{"TALKOPS_SANDBOX_PROVIDER", "[sandboxes] default", "TALKOPS_TIMEOUT", "default 30m", "bwrap"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("help does not mention %q:\n%s", want, got.stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	got := runIn(t, project(t, nil), testEnv(t, nil), "version")
	if got.code != 0 || !strings.HasPrefix(got.stdout, "talkops ") || !strings.Contains(got.stdout, "commit ") {
		t.Errorf("version: exit %d, stdout %q", got.code, got.stdout)
	}
}

func TestConfigShowsSources(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{".talkops/config.toml": "[sandboxes]\nsync_workspace = false\n"})
	got := runIn(t, dir, testEnv(t, map[string]string{"TALKOPS_SANDBOX_PROVIDER": "bwrap"}), "config")
	if got.code != 0 {
		t.Fatalf("config: exit %d: %s", got.code, got.stderr)
	}
	for _, want := range []string{"env TALKOPS_SANDBOX_PROVIDER", "config.toml:2", "default"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("talkops config does not show source %q:\n%s", want, got.stdout)
		}
	}
}

func TestBareSandboxFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--sandbox"}, []string{"--sandbox=" + sandboxBare}},
		{[]string{"--sandbox", "bwrap", "-q"}, []string{"--sandbox=bwrap", "-q"}},
		{[]string{"--sandbox", "-q"}, []string{"--sandbox=" + sandboxBare, "-q"}},
		{[]string{"--sandbox", "not-a-provider"}, []string{"--sandbox=" + sandboxBare, "not-a-provider"}},
		{[]string{"--sandbox", "dokcer"}, []string{"--sandbox=dokcer"}},
		{[]string{"--", "--sandbox"}, []string{"--", "--sandbox"}},
	}
	for _, tc := range tests {
		if got := normalizeArgs(tc.args, builtin.Providers().Names()); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("normalizeArgs(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// In GitHub Actions, the final text is untrusted: workflow commands inside it are inert.
func TestActionsOutputIsInert(t *testing.T) {
	t.Parallel()
	rubric := "[[check]]\nid = \"evil\"\ntitle = \"::error::pwned\"\nrun = \"false\"\n"
	dir := project(t, map[string]string{"r.toml": rubric})
	env := testEnv(t, map[string]string{"GITHUB_ACTIONS": "true"})
	got := runIn(t, dir, env, "--rubric", "r.toml")
	start := strings.Index(got.stdout, "::stop-commands::")
	if start < 0 {
		t.Fatalf("no ::stop-commands:: before the summary:\n%s", got.stdout)
	}
	token := strings.TrimSpace(strings.SplitN(got.stdout[start+len("::stop-commands::"):], "\n", 2)[0])
	end := strings.LastIndex(got.stdout, "::"+token+"::")
	if end < 0 || !strings.Contains(got.stdout[start:end], "::error::pwned") {
		t.Errorf("the check title is not inside the stop-commands block:\n%s", got.stdout)
	}
}
