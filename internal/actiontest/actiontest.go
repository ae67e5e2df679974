// Package actiontest runs a composite GitHub Action (action.yml) the way the Actions
// runner does, so tests can drive the talkops action end to end without GitHub.
//
// It reproduces what the action depends on: inputs with defaults, step env and if:
// conditions (a subset of the expression language; anything outside it is an error, not
// a guess), `shell: bash` run steps started as `bash --noprofile --norc -eo pipefail
// FILE`, the per-step file commands (GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH,
// GITHUB_STEP_SUMMARY, GITHUB_STATE), the event payload at GITHUB_EVENT_PATH, the
// action's outputs, and cancellation as the runner (actions/runner ProcessInvoker) does
// it: SIGINT to the step's process only, SIGTERM 7.5 s later, SIGKILL 2.5 s after that,
// then the remaining steps whose condition still holds (always()).
package actiontest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v4"
)

// Action is the part of action.yml the runner reads.
type Action struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Author      string            `yaml:"author"`
	Inputs      map[string]Input  `yaml:"inputs"`
	Outputs     map[string]Output `yaml:"outputs"`
	Runs        Runs              `yaml:"runs"`
	Branding    struct {
		Icon  string `yaml:"icon"`
		Color string `yaml:"color"`
	} `yaml:"branding"`
}

// Input is one entry of inputs:.
type Input struct {
	Description        string  `yaml:"description"`
	Required           bool    `yaml:"required"`
	Default            *string `yaml:"default"`
	DeprecationMessage string  `yaml:"deprecationMessage"`
}

// Output is one entry of outputs:.
type Output struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

// Runs is runs:. Only composite actions can be run here; the other fields are read so
// that a JavaScript or Docker action fails with that message rather than a parse error.
type Runs struct {
	Using          string            `yaml:"using"`
	Steps          []Step            `yaml:"steps"`
	Main           string            `yaml:"main"`
	Pre            string            `yaml:"pre"`
	PreIf          string            `yaml:"pre-if"`
	Post           string            `yaml:"post"`
	PostIf         string            `yaml:"post-if"`
	Image          string            `yaml:"image"`
	Entrypoint     string            `yaml:"entrypoint"`
	PreEntrypoint  string            `yaml:"pre-entrypoint"`
	PostEntrypoint string            `yaml:"post-entrypoint"`
	Args           []string          `yaml:"args"`
	Env            map[string]string `yaml:"env"`
}

// Step is one composite step.
type Step struct {
	ID               string            `yaml:"id"`
	Name             string            `yaml:"name"`
	If               string            `yaml:"if"`
	Shell            string            `yaml:"shell"`
	Run              string            `yaml:"run"`
	Uses             string            `yaml:"uses"`
	With             map[string]string `yaml:"with"`
	Env              map[string]string `yaml:"env"`
	WorkingDirectory string            `yaml:"working-directory"`
	ContinueOnError  string            `yaml:"continue-on-error"`
}

// Load reads dir/action.yml (or action.yaml), rejecting unknown keys.
func Load(dir string) (*Action, error) {
	var data []byte
	var path string
	var err error
	for _, name := range []string{"action.yml", "action.yaml"} {
		path = filepath.Join(dir, name)
		if data, err = os.ReadFile(path); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load action: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var a Action
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("load action %s: %w", path, err)
	}
	return &a, nil
}

// Job describes the job the action runs in.
type Job struct {
	// ActionDir holds action.yml; it is GITHUB_ACTION_PATH.
	ActionDir string
	// Workspace is GITHUB_WORKSPACE, where steps run unless working-directory says otherwise.
	Workspace string
	// Temp is RUNNER_TEMP and ToolCache RUNNER_TOOL_CACHE; both must exist.
	Temp, ToolCache string
	// Inputs are the caller's with: values.
	Inputs map[string]string
	// Env is the job's environment (PATH, HOME, GITHUB_REPOSITORY, ...). Nothing from the
	// test process leaks in besides it.
	Env map[string]string
	// EventName is GITHUB_EVENT_NAME, and Event the payload written to GITHUB_EVENT_PATH.
	EventName string
	Event     any
	// Token is github.token.
	Token string
	// Log receives every step's stdout and stderr (nil: discarded).
	Log io.Writer
	// OnStart, if set, is called with each step's process ID once it started.
	OnStart func(stepID string, pid int)
	// SigintGrace and SigtermGrace are the runner's waits after SIGINT and after SIGTERM
	// before it escalates (0: 7.5 s and 2.5 s, as actions/runner).
	SigintGrace, SigtermGrace time.Duration
}

// Outcomes of a step and of the action.
const (
	Success   = "success"
	Failure   = "failure"
	Cancelled = "cancelled"
	Skipped   = "skipped"
)

// StepResult is what one step did.
type StepResult struct {
	ID      string
	Outcome string
	// ExitCode is the process's exit status, -1 when a signal ended it or it did not run.
	ExitCode int
	// Signal names the signal that ended the process, if one did.
	Signal  string
	Outputs map[string]string
	// Summary is what the step appended to GITHUB_STEP_SUMMARY.
	Summary string
	// State is what the step saved to GITHUB_STATE.
	State map[string]string
	// Log is the step's combined stdout and stderr.
	Log string
}

// Result is what the action did.
type Result struct {
	Steps []StepResult
	// Outcome is success, failure or cancelled.
	Outcome string
	// Outputs are the action's outputs:, evaluated after the last step.
	Outputs map[string]string
	// Env and Path are what the steps added to GITHUB_ENV and GITHUB_PATH.
	Env  map[string]string
	Path []string
}

// Step returns the result of the step with the given id, or nil.
func (r *Result) Step(id string) *StepResult {
	for i := range r.Steps {
		if r.Steps[i].ID == id {
			return &r.Steps[i]
		}
	}
	return nil
}

// Summary is every step's summary, in order, as the job summary page shows them.
func (r *Result) Summary() string {
	var b strings.Builder
	for _, s := range r.Steps {
		b.WriteString(s.Summary)
	}
	return b.String()
}

// Run runs the action's steps. Cancelling ctx cancels the job, as the Cancel button
// does. A failing step is a result; the error reports a problem with the action or the
// simulation itself (bad metadata, an unsupported expression, a step that cannot start).
func Run(ctx context.Context, job Job) (*Result, error) {
	a, err := Load(job.ActionDir)
	if err != nil {
		return nil, err
	}
	if a.Runs.Using != "composite" {
		return nil, fmt.Errorf("run action: runs.using is %q; only composite actions can be simulated", a.Runs.Using)
	}
	for name := range job.Inputs {
		if _, ok := a.Inputs[name]; !ok {
			return nil, fmt.Errorf("run action: unexpected input %q (valid: %s)", name, strings.Join(slices.Sorted(maps.Keys(a.Inputs)), ", "))
		}
	}
	if job.SigintGrace == 0 {
		job.SigintGrace = 7500 * time.Millisecond
	}
	if job.SigtermGrace == 0 {
		job.SigtermGrace = 2500 * time.Millisecond
	}
	s := &sim{job: job, action: a, res: &Result{Outcome: Success, Env: map[string]string{}}, stepOut: map[string]*StepResult{}}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	for _, st := range a.Runs.Steps {
		if err := s.step(ctx, st); err != nil {
			return s.res, err
		}
	}
	s.res.Outputs = map[string]string{}
	for name, o := range a.Outputs {
		v, err := interpolate(o.Value, s.lookup, s.status(ctx))
		if err != nil {
			return s.res, fmt.Errorf("output %s: %w", name, err)
		}
		s.res.Outputs[name] = v
	}
	if ctx.Err() != nil {
		s.res.Outcome = Cancelled
	}
	return s.res, nil
}

type sim struct {
	job       Job
	action    *Action
	res       *Result
	stepOut   map[string]*StepResult
	inputs    map[string]string
	eventPath string
	failed    bool
	n         int
}

func (s *sim) prepare() error {
	for _, d := range []string{s.job.ActionDir, s.job.Workspace, s.job.Temp, s.job.ToolCache} {
		if d == "" || !filepath.IsAbs(d) {
			return fmt.Errorf("run action: ActionDir, Workspace, Temp and ToolCache must be absolute paths, got %q", d)
		}
	}
	ev := s.job.Event
	if ev == nil {
		ev = map[string]any{}
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("event payload: %w", err)
	}
	s.eventPath = filepath.Join(s.job.Temp, "_github_workflow", "event.json")
	if err := os.MkdirAll(filepath.Dir(s.eventPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(s.eventPath, data, 0o644); err != nil {
		return err
	}
	s.inputs = map[string]string{}
	for name, in := range s.action.Inputs {
		v, given := s.job.Inputs[name]
		if !given && in.Default != nil {
			// Defaults may use the github and runner contexts (e.g. ${{ github.token }}).
			d, err := interpolate(*in.Default, s.lookup, status{})
			if err != nil {
				return fmt.Errorf("default of input %s: %w", name, err)
			}
			v = d
		}
		s.inputs[name] = v
	}
	return nil
}

func (s *sim) status(ctx context.Context) status {
	return status{failed: s.failed, cancelled: ctx.Err() != nil}
}

func runnerArch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "ARM64"
	case "arm":
		return "ARM"
	case "386":
		return "X86"
	}
	return "X64"
}

func (s *sim) lookup(path []string) (value, bool) {
	get := func(m map[string]string, k string) value {
		if v, ok := m[k]; ok {
			return v
		}
		return nil
	}
	switch path[0] {
	case "inputs":
		if len(path) != 2 {
			return nil, false
		}
		if _, ok := s.action.Inputs[path[1]]; !ok {
			return nil, false // an undeclared input is a bug in the action
		}
		return get(s.inputs, path[1]), true
	case "steps":
		if len(path) < 3 {
			return nil, false
		}
		st := s.stepOut[path[1]]
		if st == nil {
			return nil, true
		}
		switch {
		case len(path) == 4 && path[2] == "outputs":
			return get(st.Outputs, path[3]), true
		case len(path) == 3 && (path[2] == "outcome" || path[2] == "conclusion"):
			return st.Outcome, true
		}
		return nil, false
	case "runner":
		if len(path) != 2 {
			return nil, false
		}
		switch path[1] {
		case "os":
			return "Linux", true
		case "arch":
			return runnerArch(), true
		case "temp":
			return s.job.Temp, true
		case "tool_cache":
			return s.job.ToolCache, true
		case "name":
			return "actiontest", true
		}
	case "github":
		if len(path) != 2 {
			return nil, false
		}
		switch path[1] {
		case "action_path":
			return s.job.ActionDir, true
		case "workspace":
			return s.job.Workspace, true
		case "token":
			return s.job.Token, true
		case "event_name":
			return s.job.EventName, true
		case "action_ref", "action_repository":
			return "", true // uses: ./ has neither
		}
		if v, ok := s.job.Env["GITHUB_"+strings.ToUpper(path[1])]; ok {
			return v, true
		}
		return nil, false
	case "env":
		if len(path) != 2 {
			return nil, false
		}
		return get(s.job.Env, path[1]), true
	}
	return nil, false
}

func (s *sim) step(ctx context.Context, st Step) error {
	s.n++
	id := st.ID
	if id == "" {
		id = fmt.Sprintf("__%d", s.n)
	}
	sr := &StepResult{ID: id, ExitCode: -1, Outputs: map[string]string{}, State: map[string]string{}}
	defer func() {
		s.stepOut[id] = sr
		s.res.Steps = append(s.res.Steps, *sr)
	}()
	ok, err := condition(st.If, s.lookup, s.status(ctx))
	if err != nil {
		return fmt.Errorf("step %s: if: %w", id, err)
	}
	if !ok {
		sr.Outcome = Skipped
		return nil
	}
	cmd, files, cleanup, err := s.command(ctx, id, st)
	if err != nil {
		return fmt.Errorf("step %s: %w", id, err)
	}
	defer cleanup()
	var log bytes.Buffer
	var w io.Writer = &log
	if s.job.Log != nil {
		w = io.MultiWriter(&log, s.job.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		sr.Outcome, sr.Log = Failure, err.Error()
		s.failed, s.res.Outcome = true, Failure // a step that cannot start fails, as on the runner
		return nil
	}
	if s.job.OnStart != nil {
		s.job.OnStart(id, cmd.Process.Pid)
	}
	cancelled, werr := s.wait(ctx, cmd)
	sr.Log = log.String()
	sr.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sr.Signal = ws.Signal().String()
	}
	if err := s.readFiles(sr, files); err != nil {
		return fmt.Errorf("step %s: %w", id, err)
	}
	return s.conclude(ctx, st, sr, werr, cancelled)
}

// command builds the step's process as the runner would start it: the script in a file
// under RUNNER_TEMP, the shell's arguments, the job's environment with the GITHUB_* and
// RUNNER_* variables, fresh file-command files, and the working directory.
func (s *sim) command(ctx context.Context, id string, st Step) (*exec.Cmd, map[string]string, func(), error) {
	if st.Uses != "" {
		return nil, nil, nil, errors.New("uses: steps are not supported by the simulation")
	}
	if st.Run == "" {
		return nil, nil, nil, errors.New("no run: script")
	}
	var shell []string
	switch st.Shell {
	case "bash":
		shell = []string{"bash", "--noprofile", "--norc", "-eo", "pipefail"}
	case "sh":
		shell = []string{"sh", "-e"}
	case "":
		return nil, nil, nil, errors.New("composite run steps need shell:, the runner refuses them without")
	default:
		return nil, nil, nil, fmt.Errorf("shell %q is not supported by the simulation", st.Shell)
	}
	files := map[string]string{}
	for _, k := range []string{"GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_STATE"} {
		p := filepath.Join(s.job.Temp, "_runner_file_commands", strings.ToLower(k)+"_"+randHex())
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, nil, nil, err
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return nil, nil, nil, err
		}
		files[k] = p
	}
	env, err := s.env(ctx, id, st, files)
	if err != nil {
		return nil, nil, nil, err
	}
	dir := s.job.Workspace
	if st.WorkingDirectory != "" {
		wd, err := interpolate(st.WorkingDirectory, s.lookup, s.status(ctx))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("working-directory: %w", err)
		}
		if !filepath.IsAbs(wd) {
			wd = filepath.Join(s.job.Workspace, wd)
		}
		dir = wd
	}
	script := filepath.Join(s.job.Temp, randHex()+".sh")
	if err := os.WriteFile(script, []byte(st.Run), 0o644); err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(shell[0], append(shell[1:], script)...)
	cmd.Dir = dir
	cmd.Env = envList(env)
	// A killed step can leave children holding the output pipe; do not wait for them.
	cmd.WaitDelay = 5 * time.Second
	return cmd, files, func() { os.Remove(script) }, nil
}

// env is the step's environment: the job's, what earlier steps added to GITHUB_ENV and
// GITHUB_PATH, the runner's variables, and the step's env: (interpolated).
func (s *sim) env(ctx context.Context, id string, st Step, files map[string]string) (map[string]string, error) {
	env := maps.Clone(s.job.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, s.res.Env)
	if len(s.res.Path) > 0 {
		env["PATH"] = strings.Join(append(slices.Clone(s.res.Path), env["PATH"]), string(os.PathListSeparator))
	}
	maps.Copy(env, map[string]string{
		"CI": "true", "GITHUB_ACTIONS": "true",
		"GITHUB_WORKSPACE": s.job.Workspace, "GITHUB_ACTION_PATH": s.job.ActionDir,
		"GITHUB_EVENT_PATH": s.eventPath, "GITHUB_EVENT_NAME": s.job.EventName,
		"GITHUB_ACTION": id,
		"RUNNER_OS":     "Linux", "RUNNER_ARCH": runnerArch(),
		"RUNNER_TEMP": s.job.Temp, "RUNNER_TOOL_CACHE": s.job.ToolCache,
	})
	maps.Copy(env, files)
	for k, v := range st.Env {
		iv, err := interpolate(v, s.lookup, s.status(ctx))
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		env[k] = iv
	}
	return env, nil
}

// wait waits for the step's process; when the job is cancelled meanwhile it cancels the
// step the runner's way. A step that starts after the job was cancelled (if: always())
// runs to the end, as the runner gives it a fresh cancellation token.
func (s *sim) wait(ctx context.Context, cmd *exec.Cmd) (cancelled bool, err error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := ctx.Done()
	if ctx.Err() != nil {
		stop = nil
	}
	select {
	case err = <-done:
		return false, err
	case <-stop:
		return true, s.cancel(cmd, done)
	}
}

// conclude sets the step's outcome and the job's status from how the process ended.
func (s *sim) conclude(ctx context.Context, st Step, sr *StepResult, werr error, cancelled bool) error {
	var exitErr *exec.ExitError
	switch {
	case cancelled:
		sr.Outcome = Cancelled
		s.res.Outcome = Cancelled
		return nil
	case werr == nil:
		sr.Outcome = Success
		return nil
	case errors.As(werr, &exitErr) || errors.Is(werr, exec.ErrWaitDelay):
		sr.Outcome = Failure
	default:
		return fmt.Errorf("step %s: %w", sr.ID, werr)
	}
	coe, err := interpolate(st.ContinueOnError, s.lookup, s.status(ctx))
	if err != nil {
		return fmt.Errorf("step %s: continue-on-error: %w", sr.ID, err)
	}
	if strings.TrimSpace(coe) != "true" {
		s.failed = true
		s.res.Outcome = Failure
	}
	return nil
}

// cancel does what actions/runner does to a step on job cancellation: SIGINT to the
// process (not its group), SIGTERM after the SIGINT grace, then kill.
func (s *sim) cancel(cmd *exec.Cmd, done <-chan error) error {
	p := cmd.Process
	for _, step := range []struct {
		sig   syscall.Signal
		grace time.Duration
	}{{syscall.SIGINT, s.job.SigintGrace}, {syscall.SIGTERM, s.job.SigtermGrace}} {
		_ = syscall.Kill(p.Pid, step.sig)
		select {
		case err := <-done:
			return err
		case <-time.After(step.grace):
		}
	}
	_ = p.Kill()
	return <-done
}

func (s *sim) readFiles(sr *StepResult, files map[string]string) error {
	out, err := readKV(files["GITHUB_OUTPUT"])
	if err != nil {
		return fmt.Errorf("GITHUB_OUTPUT: %w", err)
	}
	sr.Outputs = out
	state, err := readKV(files["GITHUB_STATE"])
	if err != nil {
		return fmt.Errorf("GITHUB_STATE: %w", err)
	}
	sr.State = state
	env, err := readKV(files["GITHUB_ENV"])
	if err != nil {
		return fmt.Errorf("GITHUB_ENV: %w", err)
	}
	maps.Copy(s.res.Env, env)
	paths, err := os.ReadFile(files["GITHUB_PATH"])
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(paths), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			s.res.Path = append([]string{line}, s.res.Path...)
		}
	}
	summary, err := os.ReadFile(files["GITHUB_STEP_SUMMARY"])
	if err != nil {
		return err
	}
	sr.Summary = string(summary)
	return nil
}

// readKV parses a file-command file: NAME=VALUE lines and NAME<<DELIMITER blocks.
func readKV(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		if l == "" {
			continue
		}
		if name, delim, ok := strings.Cut(l, "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			closed := false
			for sc.Scan() {
				line++
				if sc.Text() == delim {
					closed = true
					break
				}
				val = append(val, sc.Text())
			}
			if !closed {
				return nil, fmt.Errorf("line %d: %s<<%s is never closed", line, name, delim)
			}
			kv[name] = strings.Join(val, "\n")
			continue
		}
		name, val, ok := strings.Cut(l, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: %q is neither NAME=VALUE nor NAME<<DELIMITER", line, l)
		}
		kv[name] = val
	}
	return kv, sc.Err()
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func randHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
