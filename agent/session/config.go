package session

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/mcp"
	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/internal/version"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// approvalModes maps the configured approval mode to the agent's.
var approvalModes = map[string]agent.Mode{"default": agent.ModeDefault, "smart": agent.ModeSmart, "yes": agent.ModeYes}

// NewModel builds the model client for spec ("" follows the API key that is present).
// Missing credentials and bad specs are usage errors.
func NewModel(spec, baseURL string, getenv func(string) string) (model.Model, error) {
	m, err := model.New(spec, baseURL, getenv)
	if errors.Is(err, model.ErrNoCredentials) || errors.Is(err, model.ErrBadSpec) {
		return nil, &runner.UsageError{Err: err}
	}
	return m, err
}

// ModelName is how a model is recorded: the spec, or what the client calls itself.
func ModelName(spec string, m model.Model) string {
	if s, ok := m.(fmt.Stringer); ok {
		return s.String()
	}
	return spec
}

// FromConfig builds the session of a run with a prompt: the agent's options from the
// configuration, the MCP servers and their options. Every mistake is a usage error.
func FromConfig(cfg *config.Config, prompt string, m model.Model, modelName, reportDir string, servers mcp.Config,
	secrets []string, redactor agent.Redactor, sink events.Sink) (*Session, error) {
	opts, err := AgentOptions(cfg, m, modelName, reportDir, secrets, redactor, sink)
	if err != nil {
		return nil, err
	}
	return New(Options{Prompt: prompt, Agent: opts, MCP: servers,
		MCPOptions: MCPOptions(cfg, redactor.Redact, sink), Redact: redactor.Redact})
}

// AgentOptions builds the agent's options from the configuration (the sandbox comes
// later). A default cost cap the model's unknown price cannot enforce is dropped with a
// warning; a cap the user set on such a model is a usage error.
func AgentOptions(cfg *config.Config, m model.Model, name, reportDir string, secrets []string, redact agent.Redactor, sink events.Sink) (agent.Options, error) {
	opts := agent.Options{
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
	return opts, applyCostDefault(cfg, m, name, &opts, sink)
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
		return runner.Usagef("--max-cost-usd %g (from %s): the price of %s is not known, so the cap cannot be enforced; use a priced model or set 0",
			opts.MaxCostUSD, cfg.Source(config.KeyMaxCostUSD), name)
	}
	opts.MaxCostUSD = 0
	sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageAgent,
		Message: fmt.Sprintf("the price of %s is not known: running without the default $%g cost cap (use --max-turns and --timeout as budgets)", name, cfg.Agent.MaxCostUSD)})
	return nil
}

// MCPServers reads the MCP servers of [mcp.servers.NAME] and of file (--mcp-config; ""
// for none). Mistakes are usage errors: nothing is provisioned yet.
func MCPServers(cfg *config.Config, file string, getenv func(string) string) (mcp.Config, error) {
	servers, err := mcp.FromTables(cfg.MCPServers, getenv)
	if err != nil {
		return mcp.Config{}, &runner.UsageError{Err: err}
	}
	if file != "" {
		fromFile, err := mcp.ParseFile(file, getenv)
		if err == nil {
			err = servers.Merge(fromFile)
		}
		if err != nil {
			return mcp.Config{}, &runner.UsageError{Err: err}
		}
	}
	return servers, nil
}

// MCPOptions are the servers' options: a call is bounded like a shell command, and a
// server's warnings become (redacted) warning events.
func MCPOptions(cfg *config.Config, redact func(string) string, sink events.Sink) mcp.Options {
	return mcp.Options{
		CallTimeout: cfg.Agent.ToolTimeout,
		Version:     version.Get().Version,
		Warn: func(msg string) {
			sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageAgent, Message: redact(msg)})
		},
	}
}

// WarnLocalKeys warns when the agent's commands, approved without asking, run on this
// host while model keys are in talkops's environment: on local they can read it.
func WarnLocalKeys(getenv func(string) string, sink events.Sink) {
	var present []string
	for _, k := range model.KeyEnvs() {
		if getenv(k) != "" {
			present = append(present, k)
		}
	}
	if len(present) == 0 {
		return
	}
	sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageProvision,
		Message: fmt.Sprintf("the local provider runs the agent's commands on this host, approved with -y, while %s "+
			"is in talkops's environment: a command can read it (local is for trusted code only; "+
			"use --sandbox bwrap or docker for anything else)", strings.Join(present, ", "))})
}
