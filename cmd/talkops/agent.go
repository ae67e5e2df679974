package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/mcp"
	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/judge"
	"github.com/talkops/talkops/runner"
)

// approvalMode maps the configured mode to the agent's.
var approvalModes = map[string]agent.Mode{"default": agent.ModeDefault, "smart": agent.ModeSmart, "yes": agent.ModeYes}

// newModel builds the model client for spec ("" follows the API key that is present).
// Missing credentials and bad specs are usage errors.
func newModel(spec, baseURL string, getenv func(string) string) (model.Model, error) {
	m, err := model.New(spec, baseURL, getenv)
	if errors.Is(err, model.ErrNoCredentials) || errors.Is(err, model.ErrBadSpec) {
		return nil, usageErr(err)
	}
	return m, err
}

// modelName is how a model is recorded: the spec, or what the client calls itself.
func modelName(spec string, m model.Model) string {
	if s, ok := m.(fmt.Stringer); ok {
		return s.String()
	}
	return spec
}

// session is the agent of one run, shared by the runner (which drives it) and the
// rubric (which shows the judge what it did).
type session struct {
	opts   agent.Options
	prompt string

	// mcp are the MCP servers to start once the sandbox is ready; mcpOpts their options
	// (the sandbox comes later).
	mcp     mcp.Config
	mcpOpts mcp.Options
	servers *mcp.Set
	redact  func(string) string

	mu    sync.Mutex
	agent *agent.Agent
	last  *agent.Outcome
}

var _ runner.Agent = (*session)(nil)

// newAgent is the runner's agent factory: the sandbox exists only once provisioned.
// The MCP servers start here: after the sandbox and the setup script, before the first
// turn; a server that does not start fails the run with its name and stderr.
func (s *session) newAgent(ctx context.Context, sb providers.Sandbox) (runner.Agent, error) {
	opts := s.opts
	opts.Sandbox = sb
	if len(s.mcp.Servers) > 0 {
		mo := s.mcpOpts
		mo.Sandbox = sb
		set, err := mcp.Start(ctx, s.mcp.Servers, mo)
		if err != nil {
			return nil, errors.New(s.redact(err.Error()))
		}
		s.servers = set
		opts.ExtraTools = set.Tools()
	}
	a, err := agent.New(opts)
	if err != nil {
		s.servers.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	s.agent = a
	return s, nil
}

// Close stops the MCP servers (runner.AgentCloser): the runner calls it before teardown.
func (s *session) Close(ctx context.Context) { s.servers.Close(ctx) }

func (s *session) Run(ctx context.Context, prompt string) (runner.AgentOutcome, error) {
	out, err := s.agent.Run(ctx, prompt)
	return s.record(out), err
}

func (s *session) Revise(ctx context.Context, message string) (runner.AgentOutcome, error) {
	out, err := s.agent.Revise(ctx, message)
	return s.record(out), err
}

func (s *session) record(out *agent.Outcome) runner.AgentOutcome {
	if out == nil {
		return runner.AgentOutcome{}
	}
	s.mu.Lock()
	s.last = out
	s.mu.Unlock()
	ro := runner.AgentOutcome{
		Final: out.Final, Partial: out.Partial, StopReason: out.StopReason,
		Record: out.Record, Findings: out.Findings,
	}
	switch out.StopReason {
	case agent.StopRefused:
		ro.Unfinished = "the model refused the task"
	case agent.StopEmpty:
		ro.Unfinished = "the model ended without an answer"
	}
	return ro
}

// agentRecord is what the judge may see of the agent's passes so far.
func (s *session) agentRecord(int) rubric.AgentRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := rubric.AgentRecord{Prompt: s.prompt}
	if s.last == nil {
		return rec
	}
	rec.FinalMessage = s.last.Final
	rec.Commands = slices.Clone(s.last.Commands)
	return rec
}

// agentOptions builds the agent's options from the configuration (the sandbox comes later).
func agentOptions(cfg *config.Config, m model.Model, name, reportDir string, secrets []string, redact agent.Redactor, sink events.Sink) agent.Options {
	return agent.Options{
		Model:        m,
		ModelName:    name,
		Approval:     agent.Approval{Mode: approvalModes[cfg.Approval.Mode], Allow: cfg.Approval.Allow, Deny: cfg.Approval.Deny},
		MaxTurns:     int(cfg.Agent.MaxTurns),
		MaxCostUSD:   cfg.Agent.MaxCostUSD,
		StallTimeout: cfg.Agent.StallTimeout,
		ToolTimeout:  cfg.Agent.ToolTimeout,
		ReportDir:    reportDir,
		Sink:         sink,
		Secrets:      secrets,
		Redactor:     redact,
	}
}

// newJudge builds the judge for a rubric's criteria. Its model is --rubric-model (or
// rubric.model), else the rubric's [judge] model, else the agent's model.
func (c *runCmd) newJudge(cfg *config.Config, rb *rubric.Rubric, agentModel model.Model, agentSpec string,
	getenv func(string) string, redact func(string) string, sink events.Sink) (rubric.Judge, error) {
	spec := cmpOr(cfg.Rubric.Model, rb.Judge.Model)
	m := agentModel
	if spec != "" || m == nil {
		var err error
		if m, err = newModel(spec, cfg.Model.BaseURL, getenv); err != nil {
			return nil, fmt.Errorf("judge model: %w", err)
		}
		spec = modelName(spec, m)
	} else {
		spec = agentSpec
		sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageRubric,
			Message: "the judge uses the agent's own model; a judge from another model family (--rubric-model) is less biased"})
	}
	votes := 0 // the rubric's [judge] votes, unless the user set one
	if cfg.IsSet(config.KeyRubricVotes) {
		votes = int(cfg.Rubric.Votes)
	}
	j, err := judge.New(judge.Options{Model: m, ModelName: spec, Votes: votes, Redact: redact, Sink: sink})
	if errors.Is(err, judge.ErrOptions) {
		return nil, usageErr(err)
	}
	return j, err
}

// cmpOr returns the first non-empty string.
func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// rubricSpec resolves a relative rubric path against the working directory, so that
// --rubric means the same file wherever the project root is.
func rubricSpec(spec, workDir string) string {
	resolve := func(p string) string {
		if filepath.IsAbs(p) || strings.HasPrefix(p, "~/") {
			return p
		}
		return filepath.Join(workDir, p)
	}
	switch {
	case strings.HasPrefix(spec, "@"):
		return "@" + resolve(spec[1:])
	case strings.HasSuffix(spec, ".toml") && !strings.ContainsAny(spec, " \t\n"):
		return resolve(spec)
	}
	return spec
}

// applyCostDefault drops the default cost cap for a model without a known price (a local
// OpenAI-compatible server, a new model name), with a warning; a cap the user set on such
// a model is a usage error, because it could not be enforced.
func applyCostDefault(cfg *config.Config, m model.Model, name string, opts *agent.Options, sink events.Sink) error {
	if opts.MaxCostUSD == 0 {
		return nil
	}
	if p, ok := m.(model.Pricer); ok {
		if _, known := p.Price(); known {
			return nil
		}
	}
	if cfg.IsSet(config.KeyMaxCostUSD) {
		return usagef("--max-cost-usd %g (from %s): the price of %s is not known, so the cap cannot be enforced; use a priced model or set 0",
			opts.MaxCostUSD, cfg.Source(config.KeyMaxCostUSD), name)
	}
	opts.MaxCostUSD = 0
	sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageAgent,
		Message: fmt.Sprintf("the price of %s is not known: running without the default $%g cost cap (use --max-turns and --timeout as budgets)", name, cfg.Agent.MaxCostUSD)})
	return nil
}

// validateAgent builds the agent once against a placeholder sandbox, so that invalid
// options (approval patterns, budgets) are usage errors before anything is provisioned.
func validateAgent(opts agent.Options) error {
	opts.Sandbox = placeholderSandbox{}
	opts.ReportDir, opts.Sink = "", events.Discard
	if _, err := agent.New(opts); err != nil {
		return usageErr(err)
	}
	return nil
}

// placeholderSandbox satisfies providers.Sandbox for validateAgent; agent.New runs nothing.
type placeholderSandbox struct{}

var errPlaceholder = errors.New("placeholder sandbox")

func (placeholderSandbox) ID() string      { return "validate" }
func (placeholderSandbox) WorkDir() string { return "/workspace" }
func (placeholderSandbox) Exec(context.Context, providers.Cmd) (providers.ExecResult, error) {
	return providers.ExecResult{}, errPlaceholder
}
func (placeholderSandbox) Upload(context.Context, string, io.Reader) error { return errPlaceholder }
func (placeholderSandbox) Download(context.Context, string) (io.ReadCloser, error) {
	return nil, errPlaceholder
}
func (placeholderSandbox) Close(context.Context) error { return nil }
