package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/internal/actiontest"
)

// The GitHub Action (action.yml and .github/action/inputs.json) against the real command
// line: every input that maps to a flag must map to one talkops has. The action itself is
// run by a real Actions runner in internal/actiontest.

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
	{name: "sandbox", command: "run", flag: "--sandbox", def: "local"},
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

// actionMapping is what the action does with one input.
type actionMapping struct {
	command, flag, env string
	isBool             bool
}

// mappings reads which input becomes which flag or variable from .github/action/inputs.json,
// the table main.js builds talkops's arguments and environment from.
func mappings(t *testing.T, table *actiontest.Inputs) map[string][]actionMapping {
	t.Helper()
	out := map[string][]actionMapping{}
	for command, c := range table.Commands() {
		for name, flag := range c.Flags {
			out[name] = append(out[name], actionMapping{command: command, flag: flag})
		}
		for name, flag := range c.Switches {
			out[name] = append(out[name], actionMapping{command: command, flag: flag, isBool: true})
		}
		for name, env := range c.Env {
			out[name] = append(out[name], actionMapping{env: env})
		}
	}
	return out
}

// inputYAML is what to add when a pending input lands.
func inputYAML(p plannedInput) string {
	var entry string
	switch {
	case p.isBool:
		entry = fmt.Sprintf(`.github/action/inputs.json, %q.switches: %q: %q`, p.command, p.name, p.flag)
	case p.flag != "":
		entry = fmt.Sprintf(`.github/action/inputs.json, %q.flags: %q: %q`, p.command, p.name, p.flag)
	default:
		entry = fmt.Sprintf(`.github/action/inputs.json, "run".env: %q: %q`, p.name, p.env)
	}
	return fmt.Sprintf("action.yml inputs:\n  %s:\n    description: %s\n    required: false\n    default: %q\n%s\n",
		p.name, p.help, p.def, entry)
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
	table, err := actiontest.LoadInputs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	actual := mappings(t, table)
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
					t.Errorf("inputs.json maps input %s to %+v, want %+v", p.name, got, want)
				}
				if def := a.Inputs[p.name].Default; p.def != "" && (def == nil || *def != p.def) {
					t.Errorf("input %s defaults to %v in action.yml, want %q", p.name, def, p.def)
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
				t.Errorf("inputs.json passes input %s as a flag that does not exist: %v", name, err)
				continue
			}
			if f.IsBool() != m.isBool {
				t.Errorf("inputs.json passes input %s as %s with switch=%v, but the flag is bool=%v", name, m.flag, m.isBool, f.IsBool())
			}
		}
	}
	for name := range a.Inputs {
		if _, ok := planned[name]; !ok {
			t.Errorf("action.yml has input %s, which plannedInputs does not know", name)
		}
	}
	// main.js and post.js name these commands and flags themselves.
	for _, cf := range []struct{ command, flag string }{
		{"run", "--run-id"}, {"run", "--sandbox"}, {"sandbox gc", "--run-id"}, {"sandbox gc", "--older-than"}, {"report", "--from"},
	} {
		if _, err := lookupFlag(app, cf.command, cf.flag); err != nil {
			t.Errorf(".github/action/main.js or post.js calls talkops %s %s: %v", cf.command, cf.flag, err)
		}
	}
	// post.js names the run's provider to sandbox gc as the configured one, by this variable.
	if k, ok := config.Lookup("sandboxes.default"); !ok || !slices.Contains(k.Env, "TALKOPS_SANDBOX_PROVIDER") {
		t.Errorf(".github/action/post.js sets TALKOPS_SANDBOX_PROVIDER, which is not sandboxes.default's variable (%v)", k.Env)
	}
}
