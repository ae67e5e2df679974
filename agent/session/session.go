// Package session is the agent of one talkops run: it builds the agent once the sandbox
// exists (starting the run's MCP servers first), drives it for the runner, and keeps the
// record of its passes the rubric's judge may see.
//
// Everything that can be checked before a sandbox exists is checked by New, so a
// mistake is a usage error before anything is provisioned.
package session

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/mcp"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/runner"
)

// Options build a Session.
type Options struct {
	Prompt string
	// Agent are the agent's options; the sandbox comes later.
	Agent agent.Options
	// MCP are the MCP servers to start once the sandbox is ready, with their options
	// (the sandbox comes later too).
	MCP        mcp.Config
	MCPOptions mcp.Options
	// Redact masks secrets in a server's start-up error.
	Redact func(string) string
}

// Session is the agent of one run, shared by the runner (which drives it) and the
// rubric (which shows the judge what it did).
type Session struct {
	opts    Options
	servers *mcp.Set

	mu    sync.Mutex
	agent *agent.Agent
	last  *agent.Outcome
}

var _ runner.Agent = (*Session)(nil)

// New checks the agent's options (approval patterns, budgets, the cost cap) without a
// sandbox; a mistake is a usage error.
func New(opts Options) (*Session, error) {
	if err := opts.Agent.Validate(); err != nil {
		return nil, &runner.UsageError{Err: err}
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	return &Session{opts: opts}, nil
}

// NewAgent is the runner's agent factory: the sandbox exists only once provisioned.
// The MCP servers start here: after the sandbox and the setup script, before the first
// turn; a server that does not start fails the run with its name and stderr.
func (s *Session) NewAgent(ctx context.Context, sb providers.Sandbox) (runner.Agent, error) {
	opts := s.opts.Agent
	opts.Sandbox = sb
	if len(s.opts.MCP.Servers) > 0 {
		mo := s.opts.MCPOptions
		mo.Sandbox = sb
		set, err := mcp.Start(ctx, s.opts.MCP.Servers, mo)
		if err != nil {
			return nil, errors.New(s.opts.Redact(err.Error()))
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
func (s *Session) Close(ctx context.Context) { s.servers.Close(ctx) }

// Run runs the prompt.
func (s *Session) Run(ctx context.Context, prompt string) (runner.AgentOutcome, error) {
	out, err := s.agent.Run(ctx, prompt)
	return s.record(out), err
}

// Revise continues the conversation with the rubric's revision message.
func (s *Session) Revise(ctx context.Context, message string) (runner.AgentOutcome, error) {
	out, err := s.agent.Revise(ctx, message)
	return s.record(out), err
}

func (s *Session) record(out *agent.Outcome) runner.AgentOutcome {
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

// Record is what the judge may see of the agent's passes so far.
func (s *Session) Record(int) rubric.AgentRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := rubric.AgentRecord{Prompt: s.opts.Prompt}
	if s.last == nil {
		return rec
	}
	rec.FinalMessage = s.last.Final
	rec.Commands = slices.Clone(s.last.Commands)
	return rec
}
