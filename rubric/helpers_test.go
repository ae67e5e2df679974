package rubric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
)

// fakeSandbox is an in-memory Sandbox: Exec answers from a function, Download from a map.
type fakeSandbox struct {
	workDir string
	exec    func(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error)
	files   map[string][]byte

	mu    sync.Mutex
	calls []providers.Cmd
}

var _ providers.Sandbox = (*fakeSandbox)(nil)

func (f *fakeSandbox) ID() string { return "fake-1" }

func (f *fakeSandbox) WorkDir() string {
	if f.workDir == "" {
		return "/workspace"
	}
	return f.workDir
}

func (f *fakeSandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, cmd)
	if len(cmd.Argv) == 4 && cmd.Argv[0] == "rm" && cmd.Argv[1] == "-f" && cmd.Argv[2] == "--" {
		delete(f.files, cmd.Argv[3]) // what the checker runs before a check with parse_file
		f.mu.Unlock()
		return providers.ExecResult{}, nil
	}
	f.mu.Unlock()
	res, err := f.exec(ctx, cmd)
	if err == nil {
		// Behave like a provider: stream what was captured.
		// Like providers, a failing caller's writer does not fail the command.
		if cmd.Stdout != nil {
			_, _ = cmd.Stdout.Write(res.Stdout)
		}
		if cmd.Stderr != nil {
			_, _ = cmd.Stderr.Write(res.Stderr)
		}
	}
	return res, err
}

func (f *fakeSandbox) Upload(context.Context, string, io.Reader) error {
	return providers.ErrNotSupported
}

func (f *fakeSandbox) Download(_ context.Context, p string) (io.ReadCloser, error) {
	f.mu.Lock()
	data, ok := f.files[p]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("download %s: %w", p, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (f *fakeSandbox) Close(context.Context) error { return nil }

func (f *fakeSandbox) argvs() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]string
	for _, c := range f.calls {
		out = append(out, c.Argv)
	}
	return out
}

// hostSandbox runs commands for real in a directory with a fixed environment. It is the
// least a Sandbox must do, enough to run checks and the example rubric with
// real tools; the provider packages have their own contract suite.
type hostSandbox struct {
	dir string
	env []string
}

var _ providers.Sandbox = (*hostSandbox)(nil)

func newHostSandbox(t *testing.T, dir string) *hostSandbox {
	t.Helper()
	return &hostSandbox{dir: dir, env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LC_ALL=C"}}
}

func (h *hostSandbox) ID() string      { return "host-1" }
func (h *hostSandbox) WorkDir() string { return h.dir }

func (h *hostSandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	c := exec.CommandContext(ctx, cmd.Argv[0], cmd.Argv[1:]...)
	c.Dir = h.dir
	c.Env = h.env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if cmd.Stdout != nil {
		c.Stdout = io.MultiWriter(&stdout, cmd.Stdout)
	}
	if cmd.Stderr != nil {
		c.Stderr = io.MultiWriter(&stderr, cmd.Stderr)
	}
	start := time.Now()
	err := c.Run()
	res := providers.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && cmd.Timeout > 0:
		res.ExitCode, res.TimedOut = 124, true
	case ctx.Err() != nil:
		return res, fmt.Errorf("exec: %w", ctx.Err())
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		return res, fmt.Errorf("exec: %w", err)
	}
	return res, nil
}

func (h *hostSandbox) Upload(context.Context, string, io.Reader) error {
	return providers.ErrNotSupported
}

func (h *hostSandbox) Download(_ context.Context, p string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(h.dir, p))
}

func (h *hostSandbox) Close(context.Context) error { return nil }

// recorder is an events.Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recorder) Emit(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) ofType(t events.Type) []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.Event
	for _, e := range r.events {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustParseTOML parses a TOML rubric given inline.
func mustParseTOML(t *testing.T, src string) *Rubric {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "rubric.toml", src)
	r, err := Parse("rubric.toml", dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}
