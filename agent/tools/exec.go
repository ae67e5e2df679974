package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// execOutputLimit is how much of each stream execute keeps (head and tail); the agent
// shows the model far less and saves this much in the report directory.
const execOutputLimit = 4 << 20

// nonInteractive keeps common tools from waiting for a terminal that is not there.
var nonInteractive = map[string]string{
	"PAGER":                   "cat",
	"GIT_PAGER":               "cat",
	"MANPAGER":                "cat",
	"AWS_PAGER":               "",
	"GIT_TERMINAL_PROMPT":     "0",
	"DEBIAN_FRONTEND":         "noninteractive",
	"TERM":                    "dumb",
	"NO_COLOR":                "1",
	"TF_IN_AUTOMATION":        "1",
	"TF_INPUT":                "0",
	"CLICOLOR":                "0",
	"PIP_NO_INPUT":            "1",
	"NPM_CONFIG_YES":          "true",
	"HOMEBREW_NO_AUTO_UPDATE": "1",
}

type execTool struct{ env *Env }

func (t *execTool) Kind() Kind { return Shell }

func (t *execTool) Def() model.Tool {
	return model.Tool{
		Name: "execute",
		Description: fmt.Sprintf("Run a shell command in the sandbox, in the working directory, and return its output and exit code. "+
			"Stdin is empty and nothing is interactive: pass flags like -y, --no-pager, -auto-approve. The default timeout is %s; "+
			"long output is cut to its beginning and end, so filter it (grep, tail, head) when you need a specific part.",
			t.env.toolTimeout()),
		Schema: schema([]string{"command"}, map[string]any{
			"command":         str("The shell command (sh/bash syntax)."),
			"timeout_seconds": integer(fmt.Sprintf("Timeout for this command, at most %d.", int(t.env.toolTimeout().Seconds()))),
		}),
	}
}

// progressWriter calls fn on every write: a command that prints is not stalled.
type progressWriter struct{ fn func() }

func (w progressWriter) Write(p []byte) (int, error) {
	if w.fn != nil && len(p) > 0 {
		w.fn()
	}
	return len(p), nil
}

func (t *execTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Command        string `json:"command"`
		TimeoutSeconds int    `json:"timeout_seconds"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	if strings.TrimSpace(in.Command) == "" {
		return errorf("command is required"), nil
	}
	timeout := t.env.toolTimeout()
	if in.TimeoutSeconds < 0 {
		return errorf("timeout_seconds must not be negative"), nil
	}
	if in.TimeoutSeconds > 0 {
		timeout = min(time.Duration(in.TimeoutSeconds)*time.Second, timeout)
	}
	shell, err := t.env.shellFor(ctx)
	if err != nil {
		return Result{}, err
	}
	env := maps.Clone(nonInteractive)
	maps.Copy(env, t.env.ExecEnv)
	argv := []string{shell, "-c", in.Command}
	res, err := t.env.Sandbox.Exec(ctx, providers.Cmd{
		Argv:        argv,
		Env:         env,
		Timeout:     timeout,
		OutputLimit: execOutputLimit,
		Stdout:      progressWriter{t.env.Progress},
		Stderr:      progressWriter{t.env.Progress},
	})
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInfra, err)
	}
	rec := &result.Command{
		Command:   in.Command,
		Argv:      argv,
		ExitCode:  res.ExitCode,
		TimedOut:  res.TimedOut,
		Stdout:    string(res.Stdout),
		Stderr:    string(res.Stderr),
		Duration:  res.Duration,
		Truncated: res.Truncated,
	}
	var b strings.Builder
	b.Write(res.Stdout)
	if len(res.Stderr) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.Write(res.Stderr)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(&b, "[timed out after %s and killed; exit code %d]", timeout, res.ExitCode)
	default:
		fmt.Fprintf(&b, "[exit code %d]", res.ExitCode)
	}
	if res.Truncated {
		fmt.Fprintf(&b, "\n[the sandbox kept only the first and last %d MiB of each stream]", execOutputLimit>>21)
	}
	return Result{Output: b.String(), Exec: rec}, nil
}

// shellFor returns the shell for execute: Env.Shell, else bash when the sandbox has it,
// else /bin/sh. The probe runs once (again after an infrastructure error).
func (e *Env) shellFor(ctx context.Context) (string, error) {
	if e.Shell != "" {
		return e.Shell, nil
	}
	if err := e.probe(ctx); err != nil {
		return "", err
	}
	return e.shell, nil
}

// Home returns the home directory execute's commands see: ExecEnv's HOME, else the
// sandbox's $HOME; "" when it is unset or not absolute. The sandbox is asked once, in the
// probe that also finds the shell.
func (e *Env) Home(ctx context.Context) (string, error) {
	if h, ok := e.ExecEnv["HOME"]; ok {
		return absoluteOrEmpty(h), nil
	}
	if err := e.probe(ctx); err != nil {
		return "", err
	}
	return e.home, nil
}

// probe learns, in one command, whether the sandbox has bash and what its $HOME is.
func (e *Env) probe(ctx context.Context) error {
	e.shellMu.Lock()
	defer e.shellMu.Unlock()
	if e.shell != "" {
		return nil
	}
	res, err := e.Sandbox.Exec(ctx, providers.Cmd{
		Argv:    []string{"/bin/sh", "-c", `printf '%s\n' "$HOME"; command -v bash`},
		Timeout: e.fileTimeout(),
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInfra, err)
	}
	home, bash, _ := strings.Cut(string(res.Stdout), "\n")
	e.home = absoluteOrEmpty(home)
	e.shell = "/bin/sh"
	if p := strings.TrimSpace(bash); res.ExitCode == 0 && strings.HasPrefix(p, "/") {
		e.shell = p
	}
	return nil
}

func absoluteOrEmpty(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	return p
}
