package actiontest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/internal/actiontest"
)

// job returns a Job for the action in actionDir with fresh runner directories.
func job(t *testing.T, actionDir string, inputs map[string]string) actiontest.Job {
	t.Helper()
	root := t.TempDir()
	j := actiontest.Job{
		ActionDir: actionDir,
		Workspace: filepath.Join(root, "work"),
		Temp:      filepath.Join(root, "temp"),
		ToolCache: filepath.Join(root, "toolcache"),
		Inputs:    inputs,
		Env:       map[string]string{"PATH": os.Getenv("PATH"), "HOME": filepath.Join(root, "home")},
		EventName: "pull_request",
		Event:     map[string]any{"pull_request": map[string]any{"number": 7}},
	}
	for _, d := range []string{j.Workspace, j.Temp, j.ToolCache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

func writeAction(t *testing.T, yml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "action.yml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const probeAction = `
name: probe
description: exercises the simulation
inputs:
  word:
    description: a word
    default: hello
  fail:
    description: fail the middle step
    default: "false"
outputs:
  said:
    description: what was said
    value: ${{ steps.say.outputs.said }}
  multi:
    description: a multi-line output
    value: ${{ steps.say.outputs.multi }}
runs:
  using: composite
  steps:
    - id: say
      shell: bash
      env:
        WORD: ${{ inputs.word }}
      run: |
        echo "said=$WORD" >>"$GITHUB_OUTPUT"
        printf 'multi<<EOF_1\nline 1\nline 2\nEOF_1\n' >>"$GITHUB_OUTPUT"
        echo "## summary of $WORD" >>"$GITHUB_STEP_SUMMARY"
        echo "FROM_SAY=1" >>"$GITHUB_ENV"
        echo "/opt/probe/bin" >>"$GITHUB_PATH"
        echo "k=v" >>"$GITHUB_STATE"
        test "$GITHUB_ACTIONS" = true
        test -s "$GITHUB_EVENT_PATH"
    - id: mid
      shell: bash
      env:
        FAIL: ${{ inputs.fail }}
      run: |
        test "$FROM_SAY" = 1
        case "$PATH" in /opt/probe/bin:*) ;; *) exit 9 ;; esac
        test "$FAIL" != true
    - id: after
      shell: bash
      run: echo skipped when mid fails
    - id: cleanup
      if: always()
      shell: bash
      run: echo "cleaned=yes" >>"$GITHUB_OUTPUT"
`

func TestRunComposite(t *testing.T) {
	t.Parallel()
	dir := writeAction(t, probeAction)
	tests := []struct {
		name         string
		inputs       map[string]string
		wantOutcome  string
		wantOutcomes []string
		wantOutputs  map[string]string
	}{
		{
			name:         "success",
			inputs:       map[string]string{"word": "it's \"quoted\" $HOME"},
			wantOutcome:  actiontest.Success,
			wantOutcomes: []string{"success", "success", "success", "success"},
			wantOutputs:  map[string]string{"said": "it's \"quoted\" $HOME", "multi": "line 1\nline 2"},
		},
		{
			name:         "a failed step skips the rest but always()",
			inputs:       map[string]string{"fail": "true"},
			wantOutcome:  actiontest.Failure,
			wantOutcomes: []string{"success", "failure", "skipped", "success"},
			wantOutputs:  map[string]string{"said": "hello", "multi": "line 1\nline 2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := actiontest.Run(t.Context(), job(t, dir, tt.inputs))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			var outcomes []string
			for _, s := range res.Steps {
				outcomes = append(outcomes, s.Outcome)
			}
			if diff := cmp.Diff(tt.wantOutcomes, outcomes); diff != "" {
				t.Errorf("step outcomes (-want +got):\n%s\nlogs: %+v", diff, res.Steps)
			}
			if res.Outcome != tt.wantOutcome {
				t.Errorf("Outcome = %s, want %s", res.Outcome, tt.wantOutcome)
			}
			if diff := cmp.Diff(tt.wantOutputs, res.Outputs); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if got := res.Summary(); !strings.Contains(got, "## summary of") {
				t.Errorf("Summary() = %q, want the step summary", got)
			}
			if got := res.Step("say").State["k"]; got != "v" {
				t.Errorf("state k = %q, want v", got)
			}
			if got := res.Step("cleanup").Outputs["cleaned"]; got != "yes" {
				t.Errorf("cleanup output = %q, want yes", got)
			}
		})
	}
}

func TestRunRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yml string
		inputs    map[string]string
		want      string
	}{
		{"unknown input", probeAction, map[string]string{"wrod": "x"}, `unexpected input "wrod"`},
		{"undeclared input in env", strings.Replace(probeAction, "inputs.word", "inputs.wrod", 1), nil, "unsupported context inputs.wrod"},
		{"run step without shell", "name: x\ndescription: x\nruns:\n  using: composite\n  steps:\n    - run: echo hi\n", nil, "need shell"},
		{"unknown key", "name: x\ndescription: x\nruns:\n  using: composite\n  steps:\n    - run: echo hi\n      shell: bash\n      working_directory: x\n", nil, "working_directory"},
		{"not composite", "name: x\ndescription: x\nruns:\n  using: node24\n  main: index.js\n", nil, "only composite actions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := actiontest.Run(t.Context(), job(t, writeAction(t, tt.yml), tt.inputs))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestRunCancel checks the runner's cancellation: SIGINT reaches the step's process
// (only it), the step is cancelled, and an always() step still runs.
func TestRunCancel(t *testing.T) {
	t.Parallel()
	dir := writeAction(t, `
name: cancel
description: traps SIGINT
runs:
  using: composite
  steps:
    - id: wait
      shell: bash
      run: |
        trap 'kill $! 2>/dev/null; echo "got=INT" >>"$GITHUB_OUTPUT"; exit 130' INT
        echo started
        sleep 30 & wait
    - id: skipped
      shell: bash
      run: echo never
    - id: reap
      if: always()
      shell: bash
      run: echo "ran=yes" >>"$GITHUB_OUTPUT"
`)
	ctx, cancel := context.WithCancel(t.Context())
	j := job(t, dir, nil)
	j.SigintGrace, j.SigtermGrace = 5*time.Second, time.Second
	j.OnStart = func(id string, _ int) {
		if id == "wait" {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
	}
	res, err := actiontest.Run(ctx, j)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := res.Step("wait"); got.Outcome != actiontest.Cancelled || got.Outputs["got"] != "INT" || got.ExitCode != 130 {
		t.Errorf("wait step = %+v, want cancelled after handling SIGINT (exit 130)", got)
	}
	if got := res.Step("skipped").Outcome; got != actiontest.Skipped {
		t.Errorf("skipped step outcome = %s, want skipped", got)
	}
	if got := res.Step("reap").Outputs["ran"]; got != "yes" {
		t.Errorf("always() step did not run after the cancel: %+v", res.Step("reap"))
	}
	if res.Outcome != actiontest.Cancelled {
		t.Errorf("Outcome = %s, want cancelled", res.Outcome)
	}
}
