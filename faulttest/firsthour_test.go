package faulttest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// gitProject makes dir a git work tree with files, tracking the ones in track.
func gitProject(t *testing.T, dir string, files map[string]string, track ...string) {
	t.Helper()
	writeFiles(t, dir, files)
	for _, args := range [][]string{{"init", "-q"}, append([]string{"add", "-f", "--"}, track...)} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// providerRunEnv is a hermetic environment (its own root, HOME and TMPDIR) for a run on
// provider, with its engine's variables.
func providerRunEnv(t *testing.T, provider string) (root string, env map[string]string) {
	t.Helper()
	engine := engineEnv(t, provider)
	root = t.TempDir()
	env = hermeticEnv(root, newMarker())
	for k, v := range engine {
		env[k] = v
	}
	for _, d := range []string{env["HOME"], env["TMPDIR"]} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return root, env
}

func readResultFile(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// A tracked source folder named like a skip-list entry (ko's pkg/build) arrives in the
// sandbox; an untracked build/ output folder does not, result.json and the summary say
// so, and a failing check that names it is flagged.
func TestSyncSendsTrackedFiles(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{pBwrap, pDocker} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			root, env := providerRunEnv(t, provider)
			project := filepath.Join(root, "project")
			gitProject(t, project, map[string]string{
				"README.md":          "x\n",
				"pkg/build/build.go": "package build\n",
				"build/out.txt":      "generated\n",
				".talkops/check.sh":  "#!/bin/sh\ntest -f pkg/build/build.go\n",
				"r.toml": `[[check]]
id = "tracked"
run = ".talkops/check.sh"
[[check]]
id = "untracked"
run = "test ! -e build"
[[check]]
id = "needs-output"
run = "cat build/out.txt"
[[check]]
id = "no-reports"
run = "test ! -e out"
`,
			}, "README.md", "pkg/build/build.go", ".talkops/check.sh", "r.toml")
			code, stdout, stderr := runTalkops(t, project, env, 3*time.Minute, "--sandbox", provider, "--rubric", "r.toml", "--report-dir", "out")
			if code != 1 {
				t.Fatalf("exit %d, want 1 (one check fails)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			r := readResultFile(t, filepath.Join(project, "out", "result.json"))
			items := map[string]map[string]any{}
			for _, it := range r["rubric"].(map[string]any)["items"].([]any) {
				m := it.(map[string]any)
				items[m["id"].(string)] = m
			}
			for id, want := range map[string]string{"tracked": "pass", "untracked": "pass", "needs-output": "fail", "no-reports": "pass"} {
				if got := items[id]["status"]; got != want {
					t.Errorf("check %s: %v, want %s (%v)", id, got, want, items[id])
				}
			}
			if reason, _ := items["needs-output"]["reason"].(string); !strings.Contains(reason, "build (skip_list)") || !strings.Contains(reason, "left out") {
				t.Errorf("the failing check's reason does not flag the left-out path: %q", reason)
			}
			if !strings.Contains(stderr, "left out of the sandbox") {
				t.Errorf("no warning on stderr about the left-out path:\n%s", stderr)
			}
			if st := r["rubric"].(map[string]any)["status"]; st != "failed" || strings.Contains(stdout+stderr, "needs_revision") {
				t.Errorf("a checks-only run's rubric status %v (or needs_revision printed), want failed: no agent can revise", st)
			}
			// Four: the report directory out/ (holding this run's result.json) is not sent.
			if !strings.Contains(stderr, "sync: 4 files") || !strings.Contains(stderr, ", done") {
				t.Errorf("stderr does not show the sync's total (4 files, done):\n%s", stderr)
			}
			sync := r["sync"].(map[string]any)
			if sync["git_tracked"] != true {
				t.Errorf("sync.git_tracked = %v, want true", sync["git_tracked"])
			}
			var left []string
			for _, l := range sync["left_out"].([]any) {
				m := l.(map[string]any)
				left = append(left, m["path"].(string)+":"+m["reason"].(string))
			}
			if !slices.Contains(left, "build:skip_list") || slices.ContainsFunc(left, func(s string) bool { return strings.HasPrefix(s, "pkg/") }) {
				t.Errorf("sync.left_out = %v, want build:skip_list and nothing under pkg/", left)
			}
			summary, err := os.ReadFile(filepath.Join(project, "out", "summary.md"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(summary), "Not synced into the sandbox") || !strings.Contains(string(summary), "\n- build (") {
				t.Errorf("summary.md does not list what was left out:\n%s", summary)
			}
		})
	}
}

// The README's advice works as written on every local provider: ro_binds makes a tool's
// bin directory part of PATH on bwrap, docker takes a path option, and [sandboxes] env
// and pass_env reach every provider's commands, with passed values masked in every
// output.
func TestSandboxPathAndEnv(t *testing.T) {
	t.Parallel()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	const token = "passed-value-7f3a9c"
	for _, provider := range []string{pLocal, pBwrap, pDocker} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			root, env := providerRunEnv(t, provider)
			env["HOST_TOKEN"] = token
			user := "[sandboxes]\nenv = [\"GREETING=hello world\"]\npass_env = [\"HOST_TOKEN\"]\n"
			tool := `[[check]]
id = "gofmt"
run = 'out=$(gofmt -l .) && test -z "$out" || { echo "$out"; exit 1; }'
`
			switch provider {
			case pBwrap:
				user += fmt.Sprintf("[sandboxes.providers.bwrap]\nro_binds = [%q]\n", strings.TrimSpace(string(goroot)))
			case pDocker:
				user += "[sandboxes.providers.docker]\npath = \"/workspace/tools:/usr/bin:/bin\"\n"
				tool = "[[check]]\nid = \"tool\"\nrun = \"hello-tool\"\n"
			}
			writeFiles(t, env["HOME"], map[string]string{".talkops/config.toml": user})
			project := filepath.Join(root, "project")
			writeFiles(t, project, map[string]string{
				"main.go":          "package main\n\nfunc main() {}\n",
				"tools/hello-tool": "#!/bin/sh\necho hello\n",
				"r.toml": tool + `[[check]]
id = "env"
run = 'test "$GREETING" = "hello world"'
[[check]]
id = "passed"
run = 'echo "token=$HOST_TOKEN"; exit 1'
required = false
weight = 0
`,
			})
			if err := os.Chmod(filepath.Join(project, "tools", "hello-tool"), 0o755); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runTalkops(t, project, env, 3*time.Minute, "--sandbox", provider, "--rubric", "r.toml", "--report-dir", "out")
			if code != 0 {
				t.Errorf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			r := readResultFile(t, filepath.Join(project, "out", "result.json"))
			var passed map[string]any
			for _, it := range r["rubric"].(map[string]any)["items"].([]any) {
				if m := it.(map[string]any); m["id"] == "passed" {
					passed = m
				}
			}
			if out, _ := passed["check"].(map[string]any)["stdout_tail"].(string); !strings.Contains(out, "token=***") {
				t.Errorf("the passed variable did not arrive masked: stdout_tail %q", out)
			}
			ents, _ := os.ReadDir(filepath.Join(project, "out"))
			for _, e := range ents {
				data, _ := os.ReadFile(filepath.Join(project, "out", e.Name()))
				if strings.Contains(string(data), token) {
					t.Errorf("%s holds the passed value unmasked", e.Name())
				}
			}
			if strings.Contains(stdout+stderr, token) {
				t.Errorf("stdout or stderr holds the passed value unmasked")
			}
		})
	}
}

// An unknown key names the file and line and lists the valid keys.
func TestUnknownSandboxKeyListsValidOnes(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pLocal)
	project := filepath.Join(root, "project")
	writeFiles(t, project, map[string]string{".talkops/config.toml": "[sandboxes]\npassenv = [\"GOPATH\"]\n", "README.md": "x\n"})
	code, _, stderr := runTalkops(t, project, env, time.Minute, "--rubric", "true")
	if code != 2 || !strings.Contains(stderr, "config.toml:2") || !strings.Contains(stderr, "pass_env") || !strings.Contains(stderr, "env") {
		t.Errorf("exit %d, want 2 with file:line and the valid keys (pass_env, env):\n%s", code, stderr)
	}
}

// A bare --sandbox runs the default provider that `talkops config` shows; a typo of a
// provider name is a usage error with a suggestion, not a prompt.
func TestSandboxFlagParsing(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pLocal)
	project := filepath.Join(root, "project")
	writeFiles(t, project, map[string]string{"README.md": "x\n", "r.toml": "[[check]]\nid = \"readme\"\nrun = \"test -f README.md\"\n"})
	code, stdout, stderr := runTalkops(t, project, env, time.Minute, "--sandbox", "--rubric", "r.toml", "--report-dir", "out")
	if code != 0 {
		t.Errorf("bare --sandbox: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if r := readResultFile(t, filepath.Join(project, "out", "result.json")); r["sandbox"].(map[string]any)["provider"] != "local" {
		t.Errorf("bare --sandbox ran on %v, want the default local", r["sandbox"])
	}
	code, _, stderr = runTalkops(t, project, env, time.Minute, "--sandbox", "dokcer", "--rubric", "r.toml")
	if code != 2 || !strings.Contains(stderr, `unknown provider "dokcer", did you mean docker?`) {
		t.Errorf("--sandbox dokcer: exit %d, want 2 with a did-you-mean:\n%s", code, stderr)
	}
}

// A check whose command is missing (127) or not executable (126) is an error (exit 3,
// covered by --advisory), not a rubric fail, and nothing evaluated means no score.
func TestMissingCommandIsAnError(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pLocal)
	project := filepath.Join(root, "project")
	writeFiles(t, project, map[string]string{
		"README.md":   "x\n",
		"lint.sh.txt": "#!/bin/sh\nexit 0\n",
		"r.toml":      "[[check]]\nid = \"missing\"\nrun = [\"talkops-no-such-linter\"]\n[[check]]\nid = \"not-executable\"\nrun = [\"./lint.sh.txt\"]\n",
	})
	code, stdout, stderr := runTalkops(t, project, env, time.Minute, "--rubric", "r.toml", "--report-dir", "out")
	if code != 3 {
		t.Errorf("exit %d, want 3 (error)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	r := readResultFile(t, filepath.Join(project, "out", "result.json"))
	if r["verdict"] != "error" {
		t.Errorf("verdict %v, want error", r["verdict"])
	}
	if s, ok := r["score"]; ok && s != nil {
		t.Errorf("score %v written although no item was evaluated", s)
	}
	if strings.Contains(stdout, "score") {
		t.Errorf("a score is printed although no item was evaluated:\n%s", stdout)
	}
	for _, it := range r["rubric"].(map[string]any)["items"].([]any) {
		m := it.(map[string]any)
		if m["status"] != "error" || !strings.Contains(m["reason"].(string), "not found or is not executable") {
			t.Errorf("item %v: %v (%v), want error: not found or not executable", m["id"], m["status"], m["reason"])
		}
	}
	if code, _, stderr := runTalkops(t, project, env, time.Minute, "--rubric", "r.toml", "--report-dir", "out2", "--advisory"); code != 0 {
		t.Errorf("--advisory: exit %d, want 0\n%s", code, stderr)
	}
}

// A report file left by an earlier run is not parsed as this run's: the tool fails
// before writing it, and no old finding is reported as current.
func TestStaleParseFileIsNotReported(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pLocal)
	project := filepath.Join(root, "project")
	stale := `{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"lint"}},"results":[{"ruleId":"OLD1","level":"error","message":{"text":"stale finding"},` +
		`"locations":[{"physicalLocation":{"artifactLocation":{"uri":"a.go"},"region":{"startLine":3}}}]}]}]}`
	writeFiles(t, project, map[string]string{
		"a.go":               "package a\n",
		"reports/lint.sarif": stale,
		"r.toml":             "[[check]]\nid = \"lint\"\nrun = \"echo the linter crashed >&2; exit 2\"\nparse = \"sarif\"\nparse_file = \"reports/lint.sarif\"\n",
	})
	code, stdout, stderr := runTalkops(t, project, env, time.Minute, "--rubric", "r.toml", "--report-dir", "out")
	if code != 1 {
		t.Errorf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(filepath.Join(project, "out", "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "OLD1") || strings.Contains(string(data), "stale finding") {
		t.Errorf("result.json reports the stale finding:\n%s", data)
	}
	if !strings.Contains(string(data), "read parse_file reports/lint.sarif") {
		t.Errorf("result.json does not say the report file was missing:\n%s", data)
	}
}

// `talkops --help` shows the run flags the seeds use as `talkops -p ...`.
func TestTopLevelHelpShowsRunFlags(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pLocal)
	code, stdout, stderr := runTalkops(t, root, env, time.Minute, "--help")
	for _, want := range []string{"Commands:", "sandbox", "--prompt=TEXT", "--sandbox=TYPE", "--rubric=RUBRIC"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("talkops --help (exit %d) lacks %q:\n%s%s", code, want, stdout, stderr)
		}
	}
}

// ANTHROPIC_BASE_URL sends the model calls to a gateway, as the official SDKs do.
func TestAnthropicBaseURLFromEnvironment(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pLocal)
	model := newScriptedModel(t, scriptOptions{command: "echo hello"})
	env["ANTHROPIC_API_KEY"] = modelKey
	env["ANTHROPIC_BASE_URL"] = model.URL
	project := filepath.Join(root, "project")
	writeFiles(t, project, map[string]string{"README.md": "x\n", "r.toml": "[[check]]\nid = \"readme\"\nrun = \"test -f README.md\"\n"})
	code, stdout, stderr := runTalkops(t, project, env, 2*time.Minute, "-p", "Run the task.", "-y", "--model", "anthropic:claude-test", "--rubric", "r.toml")
	if code != 0 || model.agentCalls.Load() == 0 {
		t.Errorf("exit %d with %d calls to ANTHROPIC_BASE_URL, want 0 and at least one\nstdout:\n%s\nstderr:\n%s", code, model.agentCalls.Load(), stdout, stderr)
	}
}
