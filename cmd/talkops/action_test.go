package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/internal/actiontest"
	"github.com/talkops/talkops/result"
)

// The GitHub Action (action.yml) against the real command line: every input that maps to
// a flag must map to one talkops has, and the action must work end to end in a simulated
// Actions job with the real binary.

// plannedInput is one input the action has or will have, and what it becomes.
type plannedInput struct {
	name    string
	command string // the talkops command whose flag it sets ("run", "report")
	flag    string // --flag it sets, for flag and switch inputs
	isBool  bool   // a switch: true/false becomes --flag or nothing
	env     string // the environment variable it sets, for env inputs
	needs   string // "command --flag" an env input is useless without
	help    string // its description in action.yml
	def     string // its default in action.yml
}

// plannedInputs is every input the action is designed to have. Inputs whose flag is in
// pendingFlags stay out of action.yml until the flag lands.
var plannedInputs = []plannedInput{
	{name: "prompt", command: "run", flag: "--prompt", help: "The task for the agent (talkops -p)."},
	{name: "prompt-file", command: "run", flag: "--prompt-file", help: "Read the task from this file instead (relative to working-directory)."},
	{name: "rubric", command: "run", flag: "--rubric"},
	{name: "sandbox", command: "run", flag: "--sandbox"},
	{name: "sandbox-setup", command: "run", flag: "--sandbox-setup"},
	{name: "sandbox-id", command: "run", flag: "--sandbox-id"},
	{name: "sandbox-snapshot-name", command: "run", flag: "--sandbox-snapshot-name"},
	{name: "model", command: "run", flag: "--model", help: "Model for the agent as PROVIDER:NAME, e.g. anthropic:claude-sonnet-4-5."},
	{name: "base-url", command: "run", flag: "--base-url", help: "Base URL of an OpenAI- or Anthropic-compatible endpoint (a proxy, Azure, a local model)."},
	{name: "max-turns", command: "run", flag: "--max-turns", help: "Stop the agent after this many turns (exit 124, partial result published)."},
	{name: "max-cost-usd", command: "run", flag: "--max-cost-usd", help: "Stop the agent once the model calls cost this many US dollars (exit 124)."},
	{name: "auto-approve", command: "run", flag: "--yes", isBool: true, def: "false", help: "true: approve every tool call (talkops -y); the sandbox is the boundary."},
	{name: "smart-approve", command: "run", flag: "--smart", isBool: true, def: "false", help: "true: approve tool calls the policy judges safe, deny the rest (talkops --smart)."},
	{name: "rubric-model", command: "run", flag: "--rubric-model", help: "Model for the rubric's judge (default: the agent's); another model family is recommended."},
	{name: "rubric-max-iterations", command: "run", flag: "--rubric-max-iterations", help: "How many times the agent may revise after the judge's feedback."},
	{name: "rubric-votes", command: "run", flag: "--rubric-votes", help: "Judge each criterion this many times and take the majority."},
	{name: "timeout", command: "run", flag: "--timeout"},
	{name: "report-dir", command: "run", flag: "--report-dir"},
	{name: "advisory", command: "run", flag: "--advisory", isBool: true},
	{name: "anthropic-api-key", env: "ANTHROPIC_API_KEY", needs: "run --model", help: "Anthropic API key (pass a secret); sets ANTHROPIC_API_KEY only when not empty."},
	{name: "openai-api-key", env: "OPENAI_API_KEY", needs: "run --model", help: "OpenAI API key (pass a secret); sets OPENAI_API_KEY only when not empty."},
	{name: "github-token", env: "GITHUB_TOKEN"},
	{name: "report-from", command: "report", flag: "--from"},
	{name: "extra-args"},
	{name: "working-directory"},
	{name: "version"},
}

// pendingFlags are the flags planned inputs map to that talkops does not have yet. The
// test fails once one of them exists: delete it here and add its input to action.yml
// (`go test -run TestActionInputsMatchFlags -v ./cmd/talkops` prints the YAML).
var pendingFlags = []string{}

// grammar returns the real kong model of the talkops command line.
func grammar(t *testing.T) *kong.Application {
	t.Helper()
	var g cli
	k, err := kong.New(&g, kong.Name("talkops"), helpVars(), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatalf("build the kong grammar: %v", err)
	}
	return k.Model
}

// lookupFlag finds --name on the command at path ("run", "sandbox gc") or its parents.
func lookupFlag(app *kong.Application, command, name string) (*kong.Flag, error) {
	n := app.Node
	for _, word := range strings.Fields(command) {
		var next *kong.Node
		for _, c := range n.Children {
			if c.Type == kong.CommandNode && c.Name == word {
				next = c
			}
		}
		if next == nil {
			return nil, fmt.Errorf("talkops has no command %q", command)
		}
		n = next
	}
	var names []string
	for node := n; node != nil; node = node.Parent {
		for _, f := range node.Flags {
			if "--"+f.Name == name {
				return f, nil
			}
			names = append(names, "--"+f.Name)
		}
	}
	slices.Sort(names)
	return nil, fmt.Errorf("talkops %s has no flag %s (it has %s)", command, name, strings.Join(names, " "))
}

// actionMapping is what action.yml does with one input.
type actionMapping struct {
	command, flag, env string
	isBool             bool
}

var inputExpr = regexp.MustCompile(`^\$\{\{ inputs\.([A-Za-z0-9_-]+) \}\}$`)

// mappings reads which input becomes which flag or variable from the run.sh protocol in
// action.yml's step env (TALKOPS_ACTION_FLAG_X -> --x, _SWITCH_X -> --x, _ENV_NAME).
func mappings(t *testing.T, a *actiontest.Action) map[string][]actionMapping {
	t.Helper()
	flagName := func(suffix string) string {
		return "--" + strings.ReplaceAll(strings.ToLower(suffix), "_", "-")
	}
	out := map[string][]actionMapping{}
	for _, st := range a.Runs.Steps {
		command := st.Env["TALKOPS_ACTION_COMMAND"]
		for k, v := range st.Env {
			m := inputExpr.FindStringSubmatch(v)
			if m == nil {
				continue
			}
			var am actionMapping
			switch {
			case strings.HasPrefix(k, "TALKOPS_ACTION_FLAG_"):
				am = actionMapping{command: command, flag: flagName(strings.TrimPrefix(k, "TALKOPS_ACTION_FLAG_"))}
			case strings.HasPrefix(k, "TALKOPS_ACTION_SWITCH_"):
				am = actionMapping{command: command, flag: flagName(strings.TrimPrefix(k, "TALKOPS_ACTION_SWITCH_")), isBool: true}
			case strings.HasPrefix(k, "TALKOPS_ACTION_ENV_"):
				am = actionMapping{env: strings.TrimPrefix(k, "TALKOPS_ACTION_ENV_")}
			default:
				continue
			}
			if am.flag != "" && command == "" {
				t.Errorf("step %s maps input %s to %s but sets no TALKOPS_ACTION_COMMAND", st.ID, m[1], am.flag)
			}
			out[m[1]] = append(out[m[1]], am)
		}
	}
	return out
}

// inputYAML is what to paste into action.yml when a pending input lands.
func inputYAML(p plannedInput) string {
	def := p.def
	var envLine string
	switch {
	case p.isBool:
		envLine = fmt.Sprintf("TALKOPS_ACTION_SWITCH_%s: ${{ inputs.%s }}", envSuffix(p.flag), p.name)
	case p.flag != "":
		envLine = fmt.Sprintf("TALKOPS_ACTION_FLAG_%s: ${{ inputs.%s }}", envSuffix(p.flag), p.name)
	default:
		envLine = fmt.Sprintf("TALKOPS_ACTION_ENV_%s: ${{ inputs.%s }}", p.env, p.name)
	}
	return fmt.Sprintf("inputs:\n  %s:\n    description: %s\n    required: false\n    default: %q\n# env of the %q step:\n        %s\n",
		p.name, p.help, def, "run", envLine)
}

func envSuffix(flag string) string {
	return strings.ReplaceAll(strings.ToUpper(strings.TrimPrefix(flag, "--")), "-", "_")
}

// TestActionInputsMatchFlags fails when an input of action.yml maps to a flag the real
// kong grammar does not have, when a pending flag has landed (so its input can be
// added), or when action.yml and plannedInputs disagree.
func TestActionInputsMatchFlags(t *testing.T) {
	t.Parallel()
	app := grammar(t)
	a, err := actiontest.Load(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	actual := mappings(t, a)
	planned := map[string]plannedInput{}
	for _, p := range plannedInputs {
		planned[p.name] = p
	}
	for _, pf := range pendingFlags {
		command, flag, _ := strings.Cut(pf, " ")
		if _, err := lookupFlag(app, command, flag); err == nil {
			var adds []string
			for _, p := range plannedInputs {
				if (p.command == command && p.flag == flag) || p.needs == pf {
					adds = append(adds, inputYAML(p))
				}
			}
			t.Errorf("talkops %s now exists: remove %q from pendingFlags and add to action.yml:\n%s", pf, pf, strings.Join(adds, "\n"))
		}
	}

	for _, p := range plannedInputs {
		t.Run(p.name, func(t *testing.T) {
			_, inAction := a.Inputs[p.name]
			pendingOn := ""
			for _, pf := range pendingFlags {
				if pf == p.command+" "+p.flag || pf == p.needs {
					pendingOn = pf
				}
			}
			if pendingOn != "" {
				if inAction {
					t.Errorf("input %s is in action.yml, but talkops %s does not exist yet (pendingFlags): keep it out until it lands", p.name, pendingOn)
				}
				t.Logf("pending on talkops %s; when it lands add:\n%s", pendingOn, inputYAML(p))
				return
			}
			if !inAction {
				t.Fatalf("input %s is planned and nothing it needs is pending, but action.yml does not have it:\n%s", p.name, inputYAML(p))
			}
			got := actual[p.name]
			switch {
			case p.flag != "":
				f, err := lookupFlag(app, p.command, p.flag)
				if err != nil {
					t.Fatalf("input %s maps to a flag that does not exist: %v", p.name, err)
				}
				if f.IsBool() != p.isBool {
					t.Errorf("talkops %s %s is bool=%v, but the input is planned as a switch=%v", p.command, p.flag, f.IsBool(), p.isBool)
				}
				want := []actionMapping{{command: p.command, flag: p.flag, isBool: p.isBool}}
				if !slices.Equal(got, want) {
					t.Errorf("action.yml maps input %s to %+v, want %+v", p.name, got, want)
				}
			case p.env != "":
				if len(got) == 0 {
					t.Errorf("action.yml does not pass input %s on as %s", p.name, p.env)
				}
				for _, m := range got {
					if m != (actionMapping{env: p.env}) {
						t.Errorf("action.yml maps input %s to %+v, want env %s", p.name, m, p.env)
					}
				}
			default:
				if len(got) > 0 {
					t.Errorf("input %s is the action's own, but action.yml maps it to %+v", p.name, got)
				}
			}
		})
	}
	// Whatever the plan says, every flag action.yml passes must exist, with its kind.
	for _, name := range slices.Sorted(maps.Keys(actual)) {
		for _, m := range actual[name] {
			if m.flag == "" {
				continue
			}
			f, err := lookupFlag(app, m.command, m.flag)
			if err != nil {
				t.Errorf("action.yml passes input %s as a flag that does not exist: %v", name, err)
				continue
			}
			if f.IsBool() != m.isBool {
				t.Errorf("action.yml passes input %s as %s with switch=%v, but the flag is bool=%v", name, m.flag, m.isBool, f.IsBool())
			}
		}
	}
	for name := range a.Inputs {
		if _, ok := planned[name]; !ok {
			t.Errorf("action.yml has input %s, which plannedInputs does not know", name)
		}
	}
	// The scripts name these commands and flags themselves.
	for _, cf := range []struct{ command, flag string }{
		{"sandbox gc", "--older-than"}, {"sandbox gc", "--provider"}, {"report", "--from"},
	} {
		if _, err := lookupFlag(app, cf.command, cf.flag); err != nil {
			t.Errorf(".github/action scripts call talkops %s %s: %v", cf.command, cf.flag, err)
		}
	}
}

// simJob is a simulated Actions job that runs this repository's action with the test
// binary standing in for the released talkops (TALKOPS_TEST_BE_MAIN=1, see TestMain).
type simJob struct {
	job       actiontest.Job
	project   string
	stateHome string
}

func newSimJob(t *testing.T, rubric string, inputs map[string]string) *simJob {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"work", "temp", "toolcache", "home"} {
		dirs[d] = filepath.Join(root, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	arch := map[string]string{"amd64": "amd64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		t.Skipf("the action supports amd64 and arm64 runners, not %s", runtime.GOARCH)
	}
	// The cached "release" install.sh finds: a wrapper that execs the test binary, so the
	// runner's signals still reach talkops directly.
	bin := filepath.Join(dirs["toolcache"], "talkops", "v0.0.0-test", "linux-"+arch, "talkops")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nTALKOPS_TEST_BE_MAIN=1 exec %q \"$@\"\n", exe)
	if err := os.WriteFile(bin, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	proj := project(t, map[string]string{"rubric.toml": rubric, "README.md": "a project\n"})
	in := map[string]string{"version": "v0.0.0-test", "rubric": "rubric.toml"}
	maps.Copy(in, inputs)
	state := filepath.Join(dirs["home"], "state")
	return &simJob{
		project:   proj,
		stateHome: state,
		job: actiontest.Job{
			ActionDir: mustAbs(t, filepath.Join("..", "..")),
			Workspace: proj,
			Temp:      dirs["temp"],
			ToolCache: dirs["toolcache"],
			Inputs:    in,
			Env: map[string]string{
				"PATH": os.Getenv("PATH"), "HOME": dirs["home"], "XDG_STATE_HOME": state,
				"GITHUB_REPOSITORY": "octo/repo", "GITHUB_SHA": strings.Repeat("a", 40),
				"GITHUB_SERVER_URL": "https://github.com", "GITHUB_API_URL": "http://127.0.0.1:9", // nothing listens
				"GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "1",
			},
			EventName: "pull_request",
			Event: map[string]any{"pull_request": map[string]any{
				"number": 7,
				"head":   map[string]any{"sha": strings.Repeat("b", 40), "repo": map[string]any{"full_name": "octo/repo"}},
				"base":   map[string]any{"repo": map[string]any{"full_name": "octo/repo"}},
			}},
		},
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const actionPassRubric = "name = \"sim\"\n\n[[check]]\nid = \"readme\"\ntitle = \"README exists\"\nrun = [\"test\", \"-s\", \"README.md\"]\n"
const actionFailRubric = "name = \"sim\"\n\n[[check]]\nid = \"missing\"\ntitle = \"a file that is not there\"\nrun = [\"test\", \"-s\", \"MISSING.md\"]\n"
const actionSlowRubric = "name = \"sim\"\n\n[[check]]\nid = \"slow\"\ntitle = \"sleeps\"\nrun = [\"sleep\", \"120\"]\ntimeout = \"5m\"\n"

func outcomes(res *actiontest.Result) map[string]string {
	m := map[string]string{}
	for _, s := range res.Steps {
		m[s.ID] = s.Outcome
	}
	return m
}

// TestActionSimulated runs action.yml in a simulated GitHub Actions job (event payload,
// GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_STATE, GITHUB_PATH) with the real talkops.
func TestActionSimulated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		rubric       string
		inputs       map[string]string
		wantOutcomes map[string]string
		wantExit     int
		wantOutputs  map[string]string // exact values; result-json and summary-path are checked separately
		wantLog      string            // in the run step's log
	}{
		{
			name:         "pass",
			rubric:       actionPassRubric,
			inputs:       map[string]string{"report-dir": "out"},
			wantOutcomes: map[string]string{"install": "success", "bwrap": "skipped", "run": "success", "report": "skipped", "reap": "success"},
			wantOutputs:  map[string]string{"verdict": "pass", "score": "1", "exit-code": "0"},
		},
		{
			name:         "a failed rubric fails the step, and the sweep still runs",
			rubric:       actionFailRubric,
			inputs:       map[string]string{"report-dir": "out"},
			wantOutcomes: map[string]string{"install": "success", "bwrap": "skipped", "run": "failure", "report": "skipped", "reap": "success"},
			wantExit:     1,
			wantOutputs:  map[string]string{"verdict": "fail", "score": "0", "exit-code": "1"},
		},
		{
			name:         "advisory does not change a failed verdict",
			rubric:       actionFailRubric,
			inputs:       map[string]string{"report-dir": "out", "advisory": "true"},
			wantOutcomes: map[string]string{"run": "failure", "reap": "success"},
			wantExit:     1,
			wantOutputs:  map[string]string{"verdict": "fail", "exit-code": "1"},
		},
		{
			name:         "a bad extra argument is a usage error",
			rubric:       actionPassRubric,
			inputs:       map[string]string{"extra-args": "--no-such-flag"},
			wantOutcomes: map[string]string{"run": "failure", "reap": "success"},
			wantExit:     2,
			wantLog:      "--no-such-flag",
		},
		{
			name:         "a bad switch value stops before talkops",
			rubric:       actionPassRubric,
			inputs:       map[string]string{"advisory": "yes"},
			wantOutcomes: map[string]string{"run": "failure", "reap": "success"},
			wantExit:     2,
			wantLog:      `the input that sets --advisory must be true or false, got "yes"`,
		},
		{
			name:         "an input value is one argument, never shell",
			rubric:       actionPassRubric,
			inputs:       map[string]string{"sandbox-setup": "setup.sh; touch INJECTED"},
			wantOutcomes: map[string]string{"run": "failure", "reap": "success"},
			wantExit:     2,
			wantLog:      "setup.sh; touch INJECTED",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sj := newSimJob(t, tt.rubric, tt.inputs)
			res, err := actiontest.Run(t.Context(), sj.job)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			got := outcomes(res)
			for id, want := range tt.wantOutcomes {
				if got[id] != want {
					t.Errorf("step %s: %s, want %s\nlog:\n%s", id, got[id], want, res.Step(id).Log)
				}
			}
			run := res.Step("run")
			if run.ExitCode != tt.wantExit {
				t.Errorf("run step exit %d, want %d\nlog:\n%s", run.ExitCode, tt.wantExit, run.Log)
			}
			if !strings.Contains(run.Log, tt.wantLog) {
				t.Errorf("run step log does not contain %q:\n%s", tt.wantLog, run.Log)
			}
			if _, err := os.Stat(filepath.Join(sj.project, "INJECTED")); err == nil {
				t.Error("an input value ran as shell code")
			}
			if !strings.Contains(res.Step("install").Log, "Using cached talkops v0.0.0-test") {
				t.Errorf("install step log:\n%s", res.Step("install").Log)
			}
			if tt.wantOutputs == nil {
				return
			}
			for k, want := range tt.wantOutputs {
				if res.Outputs[k] != want {
					t.Errorf("output %s = %q, want %q", k, res.Outputs[k], want)
				}
			}
			wantResult := filepath.Join(sj.project, "out", "result.json")
			if res.Outputs["result-json"] != wantResult {
				t.Errorf("output result-json = %q, want %q", res.Outputs["result-json"], wantResult)
			}
			r, err := result.Read(res.Outputs["result-json"])
			if err != nil {
				t.Fatalf("result.json: %v", err)
			}
			if r.Verdict != tt.wantOutputs["verdict"] || r.ExitCode != tt.wantExit {
				t.Errorf("result.json says %s exit %d, want %s exit %d", r.Verdict, r.ExitCode, tt.wantOutputs["verdict"], tt.wantExit)
			}
			if r.Run.CI == nil || r.Run.CI.Provider != "github" || r.Run.CI.PR != 7 {
				t.Errorf("result.json run.ci = %+v, want github PR 7 from the event payload", r.Run.CI)
			}
			if !strings.HasPrefix(res.Outputs["summary"], tt.wantOutputs["verdict"]+":") {
				t.Errorf("output summary = %q, want a headline starting %q", res.Outputs["summary"], tt.wantOutputs["verdict"]+":")
			}
			if _, err := os.Stat(res.Outputs["summary-path"]); err != nil {
				t.Errorf("output summary-path: %v", err)
			}
			if s := run.Summary; !strings.Contains(s, "talkops") || !strings.Contains(s, "README exists") && !strings.Contains(s, "a file that is not there") {
				t.Errorf("step summary does not show the scorecard:\n%s", s)
			}
		})
	}
}

// TestActionSimulatedToken checks that the github-token input reaches the publisher: it
// calls the GitHub API with it.
func TestActionSimulatedToken(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodGet:
			_, _ = w.Write([]byte("[]"))
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id": 1, "html_url": "https://github.com/octo/repo/runs/1"}`))
		default:
			_, _ = w.Write([]byte(`{"id": 1}`))
		}
	}))
	t.Cleanup(srv.Close)
	sj := newSimJob(t, actionPassRubric, map[string]string{"report-dir": "out", "github-token": "ghs_simulated"})
	sj.job.Env["GITHUB_API_URL"] = srv.URL
	res, err := actiontest.Run(t.Context(), sj.job)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Step("run").Outcome; got != actiontest.Success {
		t.Fatalf("run step: %s\n%s", got, res.Step("run").Log)
	}
	mu.Lock()
	defer mu.Unlock()
	authorized := false
	for _, a := range auths {
		if strings.HasSuffix(a, " Bearer ghs_simulated") || strings.HasSuffix(a, " token ghs_simulated") {
			authorized = true
		}
	}
	if !authorized {
		t.Errorf("the publisher never called the GitHub API with the github-token input; requests:\n%s", strings.Join(auths, "\n"))
	}
	// The only place the token may appear is the ::add-mask:: command that hides it.
	for _, line := range strings.Split(res.Step("run").Log, "\n") {
		if strings.Contains(line, "ghs_simulated") && line != "::add-mask::ghs_simulated" {
			t.Errorf("the token appears in the step log: %q", line)
		}
	}
}

// TestActionSimulatedAgent runs the agent through the action's prompt, model, base-url
// and API-key inputs against the scripted fake model server (OpenAI wire format): the
// key must reach the server as the variable the input names, and never the log.
func TestActionSimulatedAgent(t *testing.T) {
	t.Parallel()
	const key = "sk-action-simulated"
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "The repository has a README."}}},
		modeltest.WithAPIKey(key))
	t.Cleanup(srv.Close)
	sj := newSimJob(t, actionPassRubric, map[string]string{
		"report-dir":     "out",
		"prompt":         "Check that the repository has a README; answer in one sentence.",
		"model":          "openai:gpt-4.1",
		"base-url":       srv.OpenAIURL(),
		"openai-api-key": key,
		"auto-approve":   "true",
		"max-turns":      "3",
	})
	res, err := actiontest.Run(t.Context(), sj.job)
	if err != nil {
		t.Fatal(err)
	}
	run := res.Step("run")
	if run.Outcome != actiontest.Success || res.Outputs["verdict"] != "pass" {
		t.Fatalf("run step %s, verdict %q\n%s", run.Outcome, res.Outputs["verdict"], run.Log)
	}
	if n := len(srv.Calls()); n != 1 {
		t.Errorf("the fake model got %d calls, want 1", n)
	}
	r, err := result.Read(res.Outputs["result-json"])
	if err != nil {
		t.Fatal(err)
	}
	if r.Agent == nil || r.Agent.FinalAnswer != "The repository has a README." {
		t.Errorf("result.json agent = %+v, want the scripted answer", r.Agent)
	}
	for _, line := range strings.Split(run.Log, "\n") {
		if strings.Contains(line, key) && line != "::add-mask::"+key {
			t.Errorf("the API key appears in the step log: %q", line)
		}
	}
}

// TestActionSimulatedReportFrom publishes a finished run's result.json through the
// action's report-from mode, as the fork-safe workflow_run job does.
func TestActionSimulatedReportFrom(t *testing.T) {
	t.Parallel()
	first := newSimJob(t, actionFailRubric, map[string]string{"report-dir": "out"})
	if _, err := actiontest.Run(t.Context(), first.job); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(first.project, "out", "result.json")
	pub := newSimJob(t, actionPassRubric, map[string]string{"report-from": src})
	delete(pub.job.Inputs, "rubric")
	pub.job.EventName = "workflow_run"
	res, err := actiontest.Run(t.Context(), pub.job)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"install": "success", "bwrap": "skipped", "run": "skipped", "report": "success", "reap": "skipped"}
	if got := outcomes(res); !maps.Equal(got, want) {
		t.Errorf("steps %v, want %v\nreport log:\n%s", got, want, res.Step("report").Log)
	}
	if res.Outputs["verdict"] != "fail" || res.Outputs["exit-code"] != "1" || res.Outputs["result-json"] != src {
		t.Errorf("outputs %v, want the published run's verdict fail, exit-code 1, result-json %s", res.Outputs, src)
	}
	if !strings.Contains(res.Step("report").Summary, "fail") {
		t.Errorf("report step summary:\n%s", res.Step("report").Summary)
	}
}

// TestActionSimulatedCancel cancels the job while a check runs, as the Cancel button
// does: the runner sends SIGINT to the step's process only, and the action's exec chain
// must make that process talkops, which then tears down and exits 130.
func TestActionSimulatedCancel(t *testing.T) {
	t.Parallel()
	sj := newSimJob(t, actionSlowRubric, map[string]string{"report-dir": "out"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resultPath := filepath.Join(sj.project, "out", "result.json")
	sj.job.OnStart = func(id string, _ int) {
		if id != "run" {
			return
		}
		go func() {
			waitFor(t, 30*time.Second, func() bool {
				data, err := os.ReadFile(resultPath)
				return err == nil && strings.Contains(string(data), `"rubric"`)
			})
			cancel()
		}()
	}
	// A grace long enough that only talkops handling SIGINT itself ends the step.
	sj.job.SigintGrace, sj.job.SigtermGrace = 60*time.Second, time.Second
	start := time.Now()
	res, err := actiontest.Run(ctx, sj.job)
	if err != nil {
		t.Fatal(err)
	}
	run := res.Step("run")
	if run.Outcome != actiontest.Cancelled || run.ExitCode != 130 {
		t.Fatalf("run step %s exit %d signal %q after %s, want cancelled, exit 130 (talkops after SIGINT)\n%s",
			run.Outcome, run.ExitCode, run.Signal, time.Since(start), run.Log)
	}
	if got := res.Step("reap").Outcome; got != actiontest.Success {
		t.Errorf("reap step after a cancel: %s, want success (if: always())\n%s", got, res.Step("reap").Log)
	}
	r, err := result.Read(resultPath)
	if err != nil {
		t.Fatal(err)
	}
	if r.Interrupted != "SIGINT" || r.ExitCode != 130 {
		t.Errorf("result.json interrupted %q exit %d, want SIGINT 130", r.Interrupted, r.ExitCode)
	}
}

// TestActionSimulatedReap kills talkops with SIGKILL mid-run, as the runner does when
// the 10 s cancel window runs out, leaving a bwrap sandbox behind; the action's always()
// step must delete it.
func TestActionSimulatedReap(t *testing.T) {
	t.Parallel()
	if err := exec.Command("bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap does not work here and CI=true: %v", err)
		}
		t.Skipf("bubblewrap does not work here: %v", err)
	}
	sj := newSimJob(t, actionSlowRubric, map[string]string{"report-dir": "out", "sandbox": "bwrap"})
	ledger := filepath.Join(sj.stateHome, "talkops", "sandboxes")
	sj.job.OnStart = func(id string, pid int) {
		if id != "run" {
			return
		}
		go func() {
			// Kill once the sandbox is in the ledger and the check runs in it.
			waitFor(t, 30*time.Second, func() bool {
				entries, _ := os.ReadDir(ledger)
				data, err := os.ReadFile(filepath.Join(sj.project, "out", "result.json"))
				return len(entries) > 0 && err == nil && strings.Contains(string(data), `"rubric"`)
			})
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}()
	}
	res, err := actiontest.Run(t.Context(), sj.job)
	if err != nil {
		t.Fatal(err)
	}
	if run := res.Step("run"); run.Signal != "killed" {
		t.Fatalf("run step ended with exit %d signal %q, want killed\n%s", run.ExitCode, run.Signal, run.Log)
	}
	reap := res.Step("reap")
	if reap.Outcome != actiontest.Success || !strings.Contains(reap.Log, "1 deleted") {
		t.Errorf("reap step %s, want it to delete the sandbox:\n%s", reap.Outcome, reap.Log)
	}
	// Nothing is left: ask talkops itself.
	ls := exec.CommandContext(t.Context(), filepath.Join(sj.job.ToolCache, "talkops", "v0.0.0-test", "linux-"+runtime.GOARCH, "talkops"),
		"sandbox", "ls", "--json", "--provider", "bwrap", "--state-dir", ledger)
	for _, k := range []string{"PATH", "HOME", "XDG_STATE_HOME"} {
		ls.Env = append(ls.Env, k+"="+sj.job.Env[k])
	}
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("talkops sandbox ls: %v", err)
	}
	var left []json.RawMessage
	if err := json.Unmarshal(out, &left); err != nil || len(left) != 0 {
		t.Errorf("talkops sandbox ls after the reap: %s (%v)", out, err)
	}
}

func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("condition not met within %s", limit)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
