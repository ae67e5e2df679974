// Package tools holds the agent's tools: shell and file tools that run inside a
// providers.Sandbox (built only on its Exec, so every provider gets them), web_fetch, which
// runs on the host, and report_finding, which records a structured diagnostic.
//
// File tools are confined to the sandbox's working directory: a path is cleaned on the
// host (so "../etc/passwd" is refused before anything runs), then resolved with realpath
// inside the sandbox, so a symlink that leads out of the working directory is refused too.
// Paths and patterns reach the sandbox as separate argv entries and file content as stdin;
// no model-supplied text is ever interpolated into a shell string. The scripts use only
// POSIX sh and commands busybox also provides (realpath or readlink -f, sed, find, grep,
// head, tr, wc, cat, mkdir).
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// Kind classifies a tool for the approval policy.
type Kind int

// Tool kinds.
const (
	// ReadOnly tools only look (read_file, ls, glob, grep) or only record
	// (report_finding).
	ReadOnly Kind = iota
	// Mutating tools change files in the sandbox (write_file, edit_file).
	Mutating
	// Shell is execute: anything can happen, within the sandbox.
	Shell
	// Network tools reach the internet from the host (web_fetch).
	Network
	// External tools belong to an MCP server (mcp__SERVER__TOOL): what a call does is
	// the server's business, so only -y or a --smart allow pattern naming it runs one.
	External
)

func (k Kind) String() string {
	switch k {
	case ReadOnly:
		return "read-only"
	case Mutating:
		return "mutating"
	case Shell:
		return "shell"
	case Network:
		return "network"
	case External:
		return "external"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Tool is one tool the model can call.
type Tool interface {
	// Def is the definition sent to the model.
	Def() model.Tool
	// Kind says how the approval policy treats the tool.
	Kind() Kind
	// Run executes one call. Bad arguments, a missing file or a failing command are a
	// Result with IsError set; err is reserved for infrastructure (the sandbox stopped
	// working, ctx ended).
	Run(ctx context.Context, input json.RawMessage) (Result, error)
}

// Result is the outcome of one tool call.
type Result struct {
	// Output is the text for the model (the agent truncates it for the model and keeps
	// the whole of it in the report directory).
	Output  string
	IsError bool
	// Exec records the command of an execute call (the exec fields; the agent adds the
	// rest).
	Exec *result.Command
	// Finding is set by report_finding.
	Finding *result.Finding
}

// Env is what the tools need to run.
type Env struct {
	Sandbox providers.Sandbox
	// Shell runs commands. "" means /bin/sh for the file tools, and for execute bash
	// when the sandbox has it, else /bin/sh.
	Shell string
	// ToolTimeout bounds one execute call (the model may ask for less); default 10 min.
	ToolTimeout time.Duration
	// FileTimeout bounds one file-tool command; default 1 min.
	FileTimeout time.Duration
	// Progress, when set, is called whenever a command produces output (the stall
	// watchdog's heartbeat). It must be cheap and safe for concurrent use.
	Progress func()
	// HTTPClient is web_fetch's client; nil builds one that refuses private addresses.
	HTTPClient *http.Client
	// MaxOutput is roughly how many bytes of output a tool should return; read_file stops
	// its window there (with a note on how to continue). Default 30000.
	MaxOutput int
	// ExecEnv is added to every execute command's environment (after the defaults that
	// keep tools non-interactive: PAGER=cat, GIT_TERMINAL_PROMPT=0, ...).
	ExecEnv map[string]string
	// Withheld, when set, reports the files whose content the model must not see (the
	// credentials files the approval policy refuses to read_file); a grep over a
	// directory leaves out their lines. It is given paths relative to the working
	// directory.
	Withheld func(path string) bool

	shellMu sync.Mutex
	shell   string
	home    string // the sandbox's $HOME, learnt with shell

	fetchOnce    sync.Once
	defaultFetch *http.Client
}

// DefaultToolTimeout is Env.ToolTimeout when it is 0.
const DefaultToolTimeout = 10 * time.Minute

// DefaultFileTimeout is Env.FileTimeout when it is 0.
const DefaultFileTimeout = time.Minute

// ErrInfra marks errors that come from the sandbox rather than the call.
var ErrInfra = errors.New("sandbox error")

// All returns every tool in the order they are offered to the model.
func All(env *Env) []Tool {
	return []Tool{
		&execTool{env: env},
		&readTool{env: env},
		&writeTool{env: env},
		&editTool{env: env},
		&lsTool{env: env},
		&globTool{env: env},
		&grepTool{env: env},
		&fetchTool{env: env},
		&findingTool{env: env},
	}
}

// DefaultMaxOutput is Env.MaxOutput when it is 0.
const DefaultMaxOutput = 30000

func (e *Env) maxOutput() int {
	if e.MaxOutput > 0 {
		return e.MaxOutput
	}
	return DefaultMaxOutput
}

func (e *Env) fileTimeout() time.Duration {
	if e.FileTimeout > 0 {
		return e.FileTimeout
	}
	return DefaultFileTimeout
}

func (e *Env) toolTimeout() time.Duration {
	if e.ToolTimeout > 0 {
		return e.ToolTimeout
	}
	return DefaultToolTimeout
}

// decode unmarshals tool input strictly and reports problems in words a model can act on.
func decode(input json.RawMessage, v any) error {
	trimmed := strings.TrimSpace(string(input))
	if trimmed == "" {
		trimmed = "{}"
	}
	if !strings.HasPrefix(trimmed, "{") {
		return fmt.Errorf("arguments must be a JSON object, got %s", shorten(trimmed, 200))
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments are not valid for this tool: %w", err)
	}
	return nil
}

func invalid(err error) Result {
	return Result{Output: "Error: " + err.Error(), IsError: true}
}

func errorf(format string, args ...any) Result {
	return Result{Output: "Error: " + fmt.Sprintf(format, args...), IsError: true}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// schema builds a JSON Schema object from a list of properties.
func schema(required []string, props map[string]any) json.RawMessage {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	b, err := json.Marshal(s)
	if err != nil {
		// The schemas are literals in this package; failing to marshal one is a bug
		// caught by the tests.
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func integer(desc string) map[string]any {
	return map[string]any{"type": "integer", "description": desc}
}
func boolean(desc string) map[string]any {
	return map[string]any{"type": "boolean", "description": desc}
}
