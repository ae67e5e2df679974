package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/internal/version"
	"github.com/talkops/talkops/output"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/providers/workspace"
	"github.com/talkops/talkops/report"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

// runCmd is `talkops run`, the default command. Flags tagged config:"KEY" are a layer of
// the configuration (flags > TALKOPS_* env > env > project file > user file > defaults).
type runCmd struct {
	Prompt              string   `short:"p" placeholder:"TEXT" help:"The task for the agent. Also -n, a positional argument, --prompt-file, or piped stdin (prepended)."`
	NonInteractive      string   `short:"n" name:"non-interactive" placeholder:"TEXT" help:"Alias for --prompt (as in ops -n)."`
	PromptFile          string   `name:"prompt-file" placeholder:"PATH" help:"Read the prompt from a file (- for stdin)."`
	Words               []string `arg:"" optional:"" name:"prompt" help:"The prompt, as words."`
	Model               string   `placeholder:"PROVIDER:NAME" config:"model.name" help:"Model, e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4.1; unset follows the API key present (ANTHROPIC_API_KEY, OPENAI_API_KEY). ${cfg_model_name}"`
	BaseURL             string   `name:"base-url" placeholder:"URL" config:"model.base_url" help:"API base URL for OpenAI-compatible servers (Ollama, vLLM, LiteLLM, OpenRouter, Azure OpenAI). ${cfg_model_base_url}"`
	Yes                 bool     `short:"y" help:"Approve every tool call (deny patterns still apply). (config [approval] mode = \"yes\"; env TALKOPS_APPROVAL_MODE=yes)"`
	Smart               bool     `help:"Approve tool calls by policy: read-only tools, and shell commands that pass the allow/deny patterns and the built-in deny list. (config [approval] mode = \"smart\")"`
	MaxTurns            string   `name:"max-turns" placeholder:"N" config:"agent.max_turns" help:"Model turns before the agent must answer; running out exits 124. ${cfg_agent_max_turns}"`
	MaxCostUSD          string   `name:"max-cost-usd" placeholder:"USD" config:"agent.max_cost_usd" help:"Model spend before the agent must answer (0 = no limit); running out exits 124. ${cfg_agent_max_cost_usd}"`
	Sandbox             string   `placeholder:"TYPE" config:"sandboxes.default" help:"Sandbox provider: ${providers}. A bare --sandbox uses the configured default. ${cfg_sandboxes_default}"`
	SandboxID           string   `name:"sandbox-id" placeholder:"ID" config:"sandboxes.sandbox_id" help:"Attach to a running sandbox instead of creating one; it is never deleted. ${cfg_sandboxes_sandbox_id}"`
	SandboxSnapshotName string   `name:"sandbox-snapshot-name" placeholder:"NAME" config:"sandboxes.snapshot_name" help:"Snapshot, blueprint or image a new sandbox starts from. ${cfg_sandboxes_snapshot_name}"`
	SandboxSetup        string   `name:"sandbox-setup" placeholder:"PATH" config:"sandboxes.setup_script_path" help:"Script run with bash inside the sandbox after the workspace sync; a non-zero exit aborts the run (exit 3). ${cfg_sandboxes_setup_script_path}"`
	NoSync              bool     `name:"no-sync" config:"sandboxes.sync_workspace" help:"Do not upload the project into the sandbox. (env TALKOPS_SANDBOX_SYNC_WORKSPACE=false, SANDBOX_SYNC_WORKSPACE=false; config [sandboxes] sync_workspace = false)"`
	MCPConfig           string   `name:"mcp-config" placeholder:"FILE" type:"existingfile" help:"MCP servers for the agent, in the common {\"mcpServers\": {...}} JSON format; their tools are mcp__SERVER__TOOL. Also [mcp.servers.NAME] in ~/.talkops/config.toml."`
	Rubric              string   `placeholder:"RUBRIC" help:"Acceptance criteria: free text (one criterion per line or bullet), @FILE, or a FILE.toml with [[check]] and [[criterion]] entries."`
	RubricModel         string   `name:"rubric-model" placeholder:"PROVIDER:NAME" config:"rubric.model" help:"Judge model for criteria; prefer another model family than the agent's. ${cfg_rubric_model}"`
	RubricMaxIterations string   `name:"rubric-max-iterations" placeholder:"N" config:"rubric.max_iterations" help:"Agent passes the revision loop allows. ${cfg_rubric_max_iterations}"`
	RubricVotes         string   `name:"rubric-votes" placeholder:"N" config:"rubric.votes" help:"Judge calls per criterion (odd); the majority decides. ${cfg_rubric_votes}"`
	RubricVerify        string   `name:"rubric-verify" placeholder:"MODE" config:"rubric.verify" help:"clean: after an agent, run checks in a fresh sandbox holding its change set, protected paths restored; in-place: in the agent's own sandbox (the verdict then trusts it). ${cfg_rubric_verify}"`
	Quiet               bool     `short:"q" help:"Print only the agent's final answer (or, without an agent, the verdict line) on stdout; nothing on stderr but errors."`
	OutputFormat        string   `name:"output-format" placeholder:"FORMAT" config:"run.output_format" help:"text, json (one object at the end) or stream-json (one event per line). ${cfg_run_output_format}"`
	JSON                bool     `name:"json" help:"Alias for --output-format json."`
	Timeout             string   `placeholder:"DURATION" config:"run.timeout" help:"Budget for everything before teardown, e.g. 20m; running out exits 124. ${cfg_run_timeout}"`
	ReportDir           string   `name:"report-dir" placeholder:"DIR" config:"run.report_dir" help:"Where result.json and reports are written. ${cfg_run_report_dir}"`
	LogLevel            string   `name:"log-level" placeholder:"LEVEL" config:"run.log_level" help:"debug, info, warn or error. ${cfg_run_log_level}"`
	TrustProjectConfig  bool     `name:"trust-project-config" config:"trust_project_config" help:"Let the project's .talkops/config.toml set trusted-only keys (base URLs, approval, binds, ...) and paths outside the project. Only for repositories whose every change you trust. ${cfg_trust_project_config}"`
	Advisory            bool     `help:"Exit 0 instead of 3 (error) or 124 (budget): infrastructure trouble does not fail the job."`
	RunID               string   `name:"run-id" placeholder:"ID" help:"Identify this run by ID (letters, digits, . _ -; up to 64) instead of a generated one, so a caller can reap exactly its sandboxes afterwards with sandbox gc --run-id."`

	flagsSet map[string]*kong.Flag
	report   report.Options         // set by Run and plan
	session  *session               // the agent, when there is a prompt
	caps     providers.Capabilities // the provider's, set by planSandbox
}

// configFlags turns the flags the user gave into the top configuration layer.
func (c *runCmd) configFlags() (vals, names map[string]string, err error) {
	vals, names = map[string]string{}, map[string]string{}
	for name, f := range c.flagsSet {
		key := f.Tag.Get("config")
		if key == "" {
			continue
		}
		names[key] = "--" + name
		switch name {
		case "no-sync":
			vals[key] = "false"
		case "trust-project-config":
			vals[key] = strconv.FormatBool(c.TrustProjectConfig)
		case "sandbox":
			if c.Sandbox == sandboxBare {
				vals[key] = ""
			} else {
				vals[key] = c.Sandbox
			}
		default:
			vals[key] = f.Value.Target.String()
		}
	}
	switch {
	case c.Yes && c.Smart:
		return nil, nil, usagef("-y/--yes and --smart contradict each other: pick one approval mode")
	case c.Yes:
		vals["approval.mode"], names["approval.mode"] = "yes", "--yes"
	case c.Smart:
		vals["approval.mode"], names["approval.mode"] = "smart", "--smart"
	}
	if c.JSON {
		if v, ok := vals["run.output_format"]; ok && v != output.FormatJSON {
			return nil, nil, usagef("--json and --output-format %s contradict each other", v)
		}
		vals["run.output_format"] = output.FormatJSON
		names["run.output_format"] = "--json"
	}
	return vals, names, nil
}

// Run resolves the configuration, validates everything that can be validated before a
// sandbox exists, runs the pipeline and prints the outcome.
func (c *runCmd) Run(ctx context.Context, a *app) error {
	flags, names, err := c.configFlags()
	if err != nil {
		return err
	}
	cfg, err := a.providers.LoadConfig(ctx, a.configOptions(config.Options{Flags: flags, FlagNames: names}))
	if err != nil {
		return err
	}
	runID, err := c.runID()
	if err != nil {
		return err
	}
	log := newLogger(a.stderr, cfg.Run.LogLevel, c.Quiet)
	ctx = log.WithContext(ctx)
	secrets := append(report.SecretsFromEnv(a.getenv, cfg.Redact.Env...), passedValues(cfg, a.getenv)...)
	c.report = report.Options{Getenv: a.getenv, Stdout: a.stdout, Secrets: secrets}

	sinks := []events.Sink{}
	format := cfg.Run.OutputFormat
	inActions := a.getenv("GITHUB_ACTIONS") == "true"
	switch {
	case format == output.FormatStreamJSON:
		sinks = append(sinks, output.JSONLines(a.stdout))
	case inActions && format == output.FormatText && !c.Quiet:
		// ::group:: per stage on stdout; it echoes command output inside the group.
		sinks = append(sinks, report.Sink(c.report))
	}
	if !c.Quiet {
		progress := output.Progress(a.stderr, isTerminal(a.stderr))
		if inActions && format == output.FormatText {
			progress = withoutOutputLines(progress)
		}
		sinks = append(sinks, progress)
	}
	sink := events.Multi(sinks...)

	plan, err := c.plan(ctx, a, cfg, runID, sink)
	if err != nil {
		return err
	}
	if err := report.MaskSecrets(c.report); err != nil {
		log.Warn().Err(err).Msg("could not mask secrets in the job log")
	}
	plan.Sink = sink
	plan.Force = a.force

	res := runner.Run(ctx, plan)

	if inActions && format == output.FormatText {
		// The answer and the reasons are untrusted text: GitHub must not run workflow
		// commands hidden in them.
		resume := stopCommands(a.stdout)
		defer resume()
	}
	switch {
	case c.Quiet:
		fmt.Fprintln(a.stdout, quietLine(res))
	case format == output.FormatJSON:
		if err := output.JSON(a.stdout, res); err != nil {
			return err
		}
	case format == output.FormatText:
		output.Text(a.stdout, res)
	}
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode, err: errors.New(res.Reason), reported: true}
	}
	return nil
}

// quietLine is what -q prints: the agent's final answer when there is one, else the
// verdict line.
func quietLine(r *result.Result) string {
	if a := output.Answer(r); a != "" {
		return a
	}
	return output.VerdictLine(r)
}

// plan validates the inputs and builds the runner's options. Everything here happens
// before provisioning, so every failure is a usage error and nothing leaks.
func (c *runCmd) plan(ctx context.Context, a *app, cfg *config.Config, runID string, sink events.Sink) (runner.Options, error) {
	v := version.Get()
	opts := runner.Options{
		RunID:         runID,
		Version:       v.Version,
		Commit:        v.Commit,
		ProjectDir:    cfg.ProjectDir,
		ProviderName:  cfg.Sandbox.Provider,
		AttachID:      cfg.Sandbox.ID,
		Timeout:       cfg.Run.Timeout,
		Config:        cfg.Values(),
		Advisory:      c.Advisory,
		CI:            report.CI(a.getenv),
		MaxIterations: 1,
	}
	for _, step := range []func(*app, *config.Config, *runner.Options, events.Sink) error{
		c.planWork, c.planSandbox, c.planReports, c.planVerification,
	} {
		if err := step(a, cfg, &opts, sink); err != nil {
			return opts, err
		}
	}
	opts.Ledger = newLedger(cfg.Sandbox.Provider, a.getenv, cfg.ProjectDir)
	return opts, nil
}

// planWork resolves what the run is for: the prompt and its agent, the rubric and its
// judge. The agent's model is built first, because the judge defaults to it.
func (c *runCmd) planWork(a *app, cfg *config.Config, opts *runner.Options, sink events.Sink) error {
	if c.Prompt != "" && c.NonInteractive != "" {
		return usagef("give the prompt once: -p/--prompt or -n")
	}
	prompt, err := resolvePrompt(promptInput{
		flag: cmpOr(c.Prompt, c.NonInteractive), positional: c.Words, file: c.PromptFile,
		readFile: readPromptFile, stdin: a.stdin,
	})
	if err != nil {
		return err
	}
	if prompt == "" && c.Rubric == "" {
		return usagef("nothing to do: give a prompt (-p \"...\") for the agent, a rubric (--rubric) to check, or both")
	}
	opts.Prompt = prompt
	servers, err := c.mcpServers(cfg, a.getenv)
	if err != nil {
		return err
	}
	// Env and header values of MCP servers are secrets like the API keys.
	c.report.Secrets = append(c.report.Secrets, servers.Secrets...)
	redactor := hygiene.NewRedactor(c.report.Secrets...)
	opts.Redact = redactor.Redact

	var agentModel model.Model
	agentSpec := cfg.Model.Name
	if prompt != "" {
		if agentModel, err = newModel(agentSpec, cfg.Model.BaseURL, a.getenv); err != nil {
			return err
		}
		agentSpec = modelName(agentSpec, agentModel)
	}
	var rr *rubricRunner
	if c.Rubric != "" {
		rb, err := rubric.Parse(rubricSpec(c.Rubric, a.workDir), cfg.ProjectDir)
		if err != nil {
			return err
		}
		rr = &rubricRunner{r: rb, checker: rubric.Checker{Redact: redactor.Redact}, sink: sink,
			maxIter: int(cfg.Rubric.MaxIterations)}
		if prompt == "" {
			rr.maxIter = 1 // no agent can revise: a failed evaluation is final, never needs_revision
		}
		if len(rb.Criteria) > 0 {
			if rr.judge, err = c.newJudge(cfg, rb, agentModel, agentSpec, a.getenv, redactor.Redact, sink); err != nil {
				return err
			}
		}
		opts.Rubric = rr
	}
	if prompt == "" {
		return nil
	}
	s := &session{prompt: prompt, mcp: servers, redact: redactor.Redact}
	s.opts = agentOptions(cfg, agentModel, agentSpec, "", c.report.Secrets, redactor, sink)
	s.mcpOpts = mcpOptions(cfg, redactor.Redact, sink)
	if err := applyCostDefault(cfg, agentModel, agentSpec, &s.opts, sink); err != nil {
		return err
	}
	if err := validateAgent(s.opts); err != nil {
		return err
	}
	opts.NewAgent = s.newAgent
	if rr != nil {
		rr.session = s
		opts.MaxIterations = int(cfg.Rubric.MaxIterations)
	}
	c.session = s
	return nil
}

// planSandbox builds the provider and checks that the sandbox flags make sense for it,
// then the spec, the setup script and the workspace sync.
func (c *runCmd) planSandbox(a *app, cfg *config.Config, opts *runner.Options, sink events.Sink) error {
	name := cfg.Sandbox.Provider
	prov, err := a.providers.Build(cfg, name, a.getenv)
	if err != nil {
		return err
	}
	caps := providers.CapabilitiesOf(prov)
	opts.Provider = prov
	if name == local.Name && c.session != nil && cfg.Approval.Mode == "yes" {
		warnLocalKeys(a.getenv, sink)
	}
	c.caps = caps
	snapshot := cfg.Sandbox.Snapshot
	if cfg.Source("sandboxes.snapshot_name") == "default" && !caps.DefaultSnapshot {
		snapshot = "" // the seeds' default snapshot name only means something to providers that have one
	}
	if snapshot != "" && !caps.Snapshot {
		return usagef("--sandbox-snapshot-name: the %s provider cannot start from a snapshot (from %s)",
			name, cfg.Source("sandboxes.snapshot_name"))
	}
	if opts.AttachID != "" && !caps.Attach {
		return usagef("--sandbox-id: the %s provider cannot attach to a running sandbox (from %s)",
			name, cfg.Source("sandboxes.sandbox_id"))
	}
	opts.Spec = sandboxSpec(opts.RunID, cfg, snapshot)
	opts.Spec.Env = sandboxEnv(cfg, a.getenv)
	if cfg.Sandbox.SetupScript != "" {
		if opts.SetupScript, err = runner.LoadSetupScript(cfg.Sandbox.SetupScript); err != nil {
			return err
		}
	}
	caches, cacheNotes, err := cache.Resolve(context.Background(), cfg.Sandbox.Caches, a.getenv)
	if err != nil {
		return usagef("[sandboxes] caches (from %s): %v", cfg.Source("sandboxes.caches"), err)
	}
	opts.Spec.Caches = caches
	if cfg.Sandbox.SyncWorkspace && caps.OwnFilesystem && opts.AttachID == "" {
		var synced func(*result.Sync)
		if rr, ok := opts.Rubric.(*rubricRunner); ok {
			synced = func(s *result.Sync) { rr.leftOut = s.LeftOut }
		}
		opts.Sync = syncer(cfg, synced, cacheNotes)
	}
	return nil
}

// warnLocalKeys warns when the agent's commands, approved without asking, run on this
// host while model keys are in talkops's environment: on local they can read it.
func warnLocalKeys(getenv func(string) string, sink events.Sink) {
	var present []string
	for _, k := range model.KeyEnvs() {
		if getenv(k) != "" {
			present = append(present, k)
		}
	}
	if len(present) == 0 {
		return
	}
	sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: runner.StageProvision,
		Message: fmt.Sprintf("the local provider runs the agent's commands on this host, approved with -y, while %s "+
			"is in talkops's environment: a command can read it (local is for trusted code only; "+
			"use --sandbox bwrap or docker for anything else)", strings.Join(present, ", "))})
}

// sandboxSpec labels the sandbox with the run id and an expiry, and gives providers that
// support one a server-side lifetime: the run's timeout plus half an hour.
func sandboxSpec(runID string, cfg *config.Config, snapshot string) providers.Spec {
	ttl := cfg.Run.Timeout + 30*time.Minute
	if cfg.Run.Timeout == 0 {
		ttl = 24 * time.Hour
	}
	return providers.Spec{
		RunID:      runID,
		ProjectDir: cfg.ProjectDir,
		Snapshot:   snapshot,
		WorkDir:    cfg.Providers[cfg.Sandbox.Provider].WorkingDir,
		TTL:        ttl,
		Labels: map[string]string{
			providers.LabelRunID:     runID,
			providers.LabelCreatedBy: "talkops",
			providers.LabelExpiresAt: time.Now().Add(ttl).UTC().Format(time.RFC3339),
		},
	}
}

// sandboxEnv is what every sandbox command gets on top of the provider's base
// environment: [sandboxes] env, then the host values of [sandboxes] pass_env (a
// variable unset on the host is left out).
func sandboxEnv(cfg *config.Config, getenv func(string) string) map[string]string {
	env := map[string]string{}
	for _, kv := range cfg.Sandbox.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, k := range cfg.Sandbox.PassEnv {
		if v := getenv(k); v != "" {
			env[k] = v
		}
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// passedValues are the host values pass_env brings into the sandbox: they are masked
// like secrets wherever talkops publishes text.
func passedValues(cfg *config.Config, getenv func(string) string) []string {
	var out []string
	for _, k := range cfg.Sandbox.PassEnv {
		if v := getenv(k); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// syncer uploads the project with the sync engine, reporting progress as events, records
// how the workspace and the shared caches reached the sandbox, and hands what it sent to
// synced (when not nil).
func syncer(cfg *config.Config, synced func(*result.Sync), cacheNotes []string) runner.Syncer {
	syncOpts := workspace.Options{
		Include: cfg.Sandbox.Sync.Include, Exclude: cfg.Sandbox.Sync.Exclude, MaxFileSize: cfg.Sandbox.Sync.MaxFileSize,
	}
	root := cfg.ProjectDir
	return func(ctx context.Context, sb providers.Sandbox, sink events.Sink) (*result.Sync, error) {
		o := syncOpts
		o.Progress = func(s workspace.Stats) {
			sink.Emit(events.Event{Time: time.Now(), Type: events.SyncProgress, Stage: runner.StageSync,
				Message: fmt.Sprintf("%d files, %s", s.Files, humanBytes(s.BytesSent)),
				Data:    map[string]any{"files": s.Files, "bytes": s.Bytes, "bytes_sent": s.BytesSent}})
		}
		stats, err := workspace.Sync(ctx, sb, root, "", o)
		if err == nil {
			// The total: throttled views (CI logs) may have shown only a count from the
			// middle of the sync.
			sink.Emit(events.Event{Time: time.Now(), Type: events.SyncProgress, Stage: runner.StageSync,
				Message: fmt.Sprintf("%d files, %s, done", stats.Files, humanBytes(stats.BytesSent)),
				Data:    map[string]any{"files": stats.Files, "bytes": stats.Bytes, "bytes_sent": stats.BytesSent, "done": true}})
		}
		rec := stats.Result()
		rec.CacheNotes = slices.Clone(cacheNotes)
		if cs, ok := sb.(providers.CacheSharer); ok {
			shared, notes := cs.SharedCaches()
			for _, c := range shared {
				rec.Caches = append(rec.Caches, c.Name)
			}
			rec.CacheNotes = append(rec.CacheNotes, notes...)
		} else if len(cfg.Sandbox.Caches) > 0 {
			rec.CacheNotes = append(rec.CacheNotes, "caches not shared: the "+cfg.Sandbox.Provider+" provider does not share host caches")
		}
		if stats.ModeNote != "" {
			sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: runner.StageSync,
				Message: "workspace copied instead of layered: " + stats.ModeNote})
		}
		for _, n := range rec.CacheNotes {
			sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: runner.StageSync, Message: n})
		}
		if synced != nil {
			synced(rec)
		}
		return rec, err
	}
}

// planReports creates the report directory (a failure is a usage error: nothing has been
// provisioned yet) and picks the publishers for this environment.
func (c *runCmd) planReports(_ *app, cfg *config.Config, opts *runner.Options, _ events.Sink) error {
	reportDir := cfg.Run.ReportDir
	if cfg.Source("run.report_dir") == "default" {
		reportDir = filepath.Join(reportDir, opts.RunID) // one directory per run
	}
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		return usagef("--report-dir %s: %v", reportDir, err)
	}
	opts.ReportDir = reportDir
	c.report.Dir, c.report.ResultPath = reportDir, filepath.Join(reportDir, "result.json")
	if c.session != nil {
		c.session.opts.ReportDir = reportDir
	}
	for _, p := range report.Detect(c.report) {
		opts.Publishers = append(opts.Publishers, p)
	}
	return nil
}

// stopCommands turns off GitHub's workflow-command processing on w until the returned
// func is called.
func stopCommands(w io.Writer) func() {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := "talkops-" + hex.EncodeToString(b[:])
	fmt.Fprintf(w, "::stop-commands::%s\n", token)
	return func() { fmt.Fprintf(w, "::%s::\n", token) }
}

// withoutOutputLines drops command output from a sink (another sink already shows it).
func withoutOutputLines(s events.Sink) events.Sink {
	return events.Func(func(e events.Event) {
		if e.Type != events.Output {
			s.Emit(e)
		}
	})
}

// runIDPattern is what --run-id accepts: the ID names a report directory and labels the
// sandbox at every provider, so it stays a plain path element and label value.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// runID is --run-id when given, else a new one.
func (c *runCmd) runID() (string, error) {
	if c.RunID == "" {
		return newRunID(), nil
	}
	if !runIDPattern.MatchString(c.RunID) {
		return "", usagef("--run-id %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", c.RunID)
	}
	return c.RunID, nil
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// newLogger writes zerolog to stderr: console lines on a terminal, JSON otherwise.
func newLogger(w io.Writer, level string, quiet bool) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	if quiet && lvl < zerolog.ErrorLevel {
		lvl = zerolog.ErrorLevel
	}
	if isTerminal(w) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
