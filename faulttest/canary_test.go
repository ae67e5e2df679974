package faulttest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// canaries are planted secrets: host environment variables, and a .env and an id_rsa in
// the project. Every value is unique to the test run and shares prefix, which the
// sandbox-side searches look for (the prefix is assembled at run time, so it never
// appears whole in a file).
type canaries struct {
	prefix string
	env    map[string]string // host environment variable → value
	files  map[string]string // project file → the secret value in it
}

func newCanaries() canaries {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "cnry" + hex.EncodeToString(b)
	return canaries{
		prefix: prefix,
		env: map[string]string{
			"ANTHROPIC_API_KEY":     "sk-ant-api03-" + prefix + "anthropic",
			"OPENAI_API_KEY":        "sk-proj-" + prefix + "openai",
			"GITHUB_TOKEN":          "ghs_" + prefix + "github",
			"AWS_SECRET_ACCESS_KEY": prefix + "awssecret",
			"AWS_ACCESS_KEY_ID":     "AKIA" + strings.ToUpper(prefix) + "ID",
		},
		files: map[string]string{
			".env":   prefix + "dotenv",
			"id_rsa": prefix + "idrsa",
		},
	}
}

// prefixShell sets $p to the prefix without writing it whole.
func (c canaries) prefixShell() string {
	return fmt.Sprintf(`p=%s; p="${p}%s"`, c.prefix[:4], c.prefix[4:])
}

// canaryRubric has the checks print the environment and the secret files, then fail if
// any canary is in the sandbox's environment or (except on local, whose file system is
// the project) anywhere in its working directory, $HOME or its private /tmp.
func canaryRubric(c canaries, provider string) string {
	envCheck := "env; printenv; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; " + c.prefixShell() +
		`; if env | grep -F "$p"; then echo "canary in the sandbox environment" >&2; exit 1; fi`
	var files string
	switch provider {
	case pLocal:
		files = "cat .env; cat id_rsa; true"
	default:
		where := `. "$HOME"`
		if provider == pBwrap || provider == pDocker {
			where += " /tmp" // a private /tmp; the host-backed fakes share the host's
		}
		files = "cat .env; cat id_rsa; ls -la; " + c.prefixShell() + "; if grep -rlF \"$p\" " + where +
			` 2>/dev/null; then echo "canary in the sandbox file system" >&2; exit 1; fi; test ! -e .env && test ! -e id_rsa`
	}
	return fmt.Sprintf("name = \"canary\"\n[[check]]\nid = \"env\"\nrun = %q\n[[check]]\nid = \"files\"\nrun = %q\n", envCheck, files)
}

// TestSecretCanaries plants secrets in the host environment and in the project, runs the
// real binary as a GitHub Actions job on a pull request (fake GitHub API, workflow
// command files) with an agent that runs `env`, `printenv`, `cat .env` and `cat id_rsa`
// in the sandbox, and checks that no planted value appears in stdout, stderr, the report
// directory (result.json, transcript.jsonl, tool outputs, summary.md, junit.xml, SARIF,
// Code Quality, rdjsonl), the Actions files, the bodies sent to GitHub or to the model,
// the state directory, or the sandbox's environment and file system. The local provider
// runs in the project itself, so its .env and id_rsa are visible there by design (the
// README says local isolates nothing); for it only the environment canaries are checked.
func TestSecretCanaries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real binary on every provider; skipped with -short")
	}
	talkopsBin(t)
	for _, provider := range []string{pLocal, pFake, pBwrap, pDocker, pDaytona} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			c := newCanaries()
			root := t.TempDir()
			marker := newMarker()
			tg := newTarget(t, provider, root, "")

			dir := filepath.Join(root, "project")
			files := map[string]string{
				"README.md": "# canary\n",
				"r.toml":    canaryRubric(c, provider),
				".env":      "DB_PASSWORD=" + c.files[".env"] + "\n",
				"id_rsa":    "-----BEGIN OPENSSH PRIVATE KEY-----\n" + c.files["id_rsa"] + "\n-----END OPENSSH PRIVATE KEY-----\n",
				"setup.sh":  "env\ncat .env || true\n",
			}
			for k, v := range tg.files {
				files[k] = v
			}
			writeFiles(t, dir, files)
			for _, d := range []string{filepath.Join(dir, ".git"), filepath.Join(root, "home"), filepath.Join(root, "tmp")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}

			gh := newGitHubFake(t)
			gh.token = c.env["GITHUB_TOKEN"]
			model := newScriptedModel(t, scriptOptions{command: "env; printenv; cat .env; cat id_rsa; cat /proc/1/environ | tr '\\0' '\\n'"})

			env := hermeticEnv(root, marker)
			for k, v := range tg.env {
				env[k] = v
			}
			for k, v := range gh.actionsEnv(t, root) {
				env[k] = v
			}
			for k, v := range c.env {
				env[k] = v
			}
			reportDir := filepath.Join(root, "report")
			code, stdout, stderr := runTalkops(t, dir, env, 2*time.Minute,
				"-p", "Print the environment and the secret files.", "-y", "--model", "anthropic:claude-test", "--base-url", model.URL,
				"--sandbox", provider, "--sandbox-setup", "setup.sh", "--rubric", "r.toml", "--report-dir", reportDir)
			if code != 0 {
				t.Errorf("exit %d, want 0 (a canary check failed in the sandbox, or the run broke)\nstdout:\n%s\nstderr:\n%s", code, tail(stdout), tail(stderr))
			}
			// The run must really have done what the test relies on: the agent ran its
			// command (its output is in the transcript), both checks ran and passed.
			res, err := result.Read(filepath.Join(reportDir, "result.json"))
			if err != nil {
				t.Fatalf("result.json: %v", err)
			}
			if res.Agent == nil || res.Agent.ToolCalls == 0 {
				t.Errorf("the agent made no tool call: %+v", res.Agent)
			}
			if tr, err := os.ReadFile(filepath.Join(reportDir, "transcript.jsonl")); err != nil || !strings.Contains(string(tr), "PATH=") {
				t.Errorf("transcript.jsonl lacks the output of the agent's `env` (%v)", err)
			}
			if res.Rubric == nil {
				t.Fatal("result.json has no rubric")
			}
			checks := 0
			for _, it := range res.Rubric.Items {
				if it.Status != result.StatusPass {
					t.Errorf("%s %s: %s (%s)", it.Kind, it.ID, it.Status, it.Reason)
				}
				if it.Kind != "check" {
					continue
				}
				checks++
				if it.ID == "env" && (it.Check == nil || !strings.Contains(it.Check.StdoutTail, "PATH=")) {
					t.Errorf("check env printed no environment: %+v", it.Check)
				}
			}
			if checks != 2 {
				t.Errorf("%d checks ran, want the two canary checks", checks)
			}
			if provider == pLocal {
				// Control: local has no file isolation, so `cat .env` in a check puts the
				// file into result.json. The scan below must be able to see such a thing.
				data, _ := os.ReadFile(filepath.Join(reportDir, "result.json"))
				if !strings.Contains(string(data), c.files[".env"]) {
					t.Errorf("control failed: the .env canary that local's `cat .env` printed is not in result.json")
				}
			}

			secrets := map[string]string{}
			for k, v := range c.env {
				secrets["$"+k] = v
			}
			if provider != pLocal {
				for k, v := range c.files {
					secrets[k] = v
				}
			}
			var masked []string
			var kept []string
			for line := range strings.SplitSeq(stdout, "\n") {
				if v, ok := strings.CutPrefix(line, "::add-mask::"); ok {
					masked = append(masked, v) // GitHub's log masking needs the value itself
					continue
				}
				kept = append(kept, line)
			}
			sources := map[string]string{"stdout": strings.Join(kept, "\n"), "stderr": stderr}
			for i, b := range gh.recorded() {
				sources[fmt.Sprintf("GitHub API request %d", i+1)] = b
			}
			for _, call := range model.srv.Calls() {
				sources[fmt.Sprintf("model request %d", call.N)] = string(call.Body)
			}
			for _, d := range []string{reportDir, filepath.Join(root, "gha"), filepath.Join(root, "state"), filepath.Join(root, "home")} {
				addFiles(t, sources, d)
			}
			for name, text := range sources {
				for what, v := range secrets {
					if strings.Contains(text, v) {
						t.Errorf("%s leaked into %s", what, name)
					}
				}
			}
			for _, name := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
				if !slices.Contains(masked, c.env[name]) {
					t.Errorf("$%s was not registered with ::add-mask:: (GitHub would print it unmasked)", name)
				}
			}
			if len(gh.recorded()) == 0 {
				t.Errorf("talkops made no GitHub API call: the publish path was not exercised")
			}
			if left := waitNoLeftovers(marker, root, 5*time.Second); len(left) > 0 {
				t.Errorf("processes left behind: %v", left)
			}
		})
	}
}

// addFiles adds every regular file under dir to sources, by path.
func addFiles(t *testing.T, sources map[string]string, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("read %s: %v", p, err)
			return nil
		}
		sources[p] = string(data)
		return nil
	})
}
