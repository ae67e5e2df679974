package main

import (
	"context"
	"errors"
	"os"
	"strconv"

	"github.com/alecthomas/kong"

	"github.com/talkops/talkops/internal/exit"
	"github.com/talkops/talkops/output"
	"github.com/talkops/talkops/report"
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
	ErrorConclusion     string   `name:"error-conclusion" enum:"failure,neutral" default:"failure" help:"GitHub check-run conclusion when the run reached no verdict, ran out of budget or failed on an unstable judge (${enum}). Branch protection counts neutral as passing, so neutral is not a gate."`
	RunID               string   `name:"run-id" placeholder:"ID" help:"Identify this run by ID (letters, digits, . _ -; up to 64) instead of a generated one, so a caller can reap exactly its sandboxes afterwards with sandbox gc --run-id."`

	flagsSet map[string]*kong.Flag
	report   report.Options // set by Run and plan
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
		return nil, nil, runner.Usagef("-y/--yes and --smart contradict each other: pick one approval mode")
	case c.Yes:
		vals["approval.mode"], names["approval.mode"] = "yes", "--yes"
	case c.Smart:
		vals["approval.mode"], names["approval.mode"] = "smart", "--smart"
	}
	if c.JSON {
		if v, ok := vals["run.output_format"]; ok && v != output.FormatJSON {
			return nil, nil, runner.Usagef("--json and --output-format %s contradict each other", v)
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
	cfg, err := a.providers.LoadConfig(ctx, a.configOptions(flags, names))
	if err != nil {
		return err
	}
	runID, err := runner.RunID(c.RunID)
	if err != nil {
		return err
	}
	log := output.Logger(a.stderr, cfg.Run.LogLevel, c.Quiet)
	ctx = log.WithContext(ctx)
	secrets := append(report.SecretsFromEnv(a.getenv, os.Environ, cfg.Redact.Env...), cfg.Sandbox.PassedValues(a.getenv)...)
	c.report = report.Options{Getenv: a.getenv, Stdout: a.stdout, Secrets: secrets, ErrorConclusion: c.ErrorConclusion}
	console := output.Console{Stdout: a.stdout, Stderr: a.stderr, Format: cfg.Run.OutputFormat, Quiet: c.Quiet,
		Actions: a.getenv("GITHUB_ACTIONS") == "true", Groups: report.Sink(c.report)}
	sink := console.Sink()

	plan, err := c.plan(ctx, a, cfg, runID, sink)
	if err != nil {
		return err
	}
	if err := report.MaskSecrets(c.report); err != nil {
		log.Warn().Err(err).Msg("could not mask secrets in the job log")
	}
	plan.Sink, plan.Force = sink, a.force
	res := runner.Run(ctx, plan)
	if err := console.Print(res); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exit.Reported(res.ExitCode, errors.New(res.Reason))
	}
	return nil
}
