//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/talkops/talkops/providers"
)

// Exec runs cmd.Argv directly (no shell) in its own process group, recorded in the state
// directory (if any) until the group is empty. On Linux the command is SIGKILLed by the
// kernel if talkops dies while it runs. A program that cannot
// be found is a result with exit code 127, one that cannot be executed 126, as a shell
// reports them. A command killed by a signal exits 128+signal. Cmd.Dir may name any host
// directory: the local provider does not confine commands, only Upload and Download.
func (s *sandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return providers.ExecResult{}, errors.New("local: exec: empty command (Cmd.Argv is empty)")
	}
	name := cmd.Argv[0]
	if err := checkEnv(cmd.Env); err != nil {
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: Cmd.Env: %w", name, err)
	}
	if cmd.Timeout < 0 {
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: negative Cmd.Timeout %v", name, cmd.Timeout)
	}
	if err := ctx.Err(); err != nil {
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: %w", name, err)
	}

	execCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: %w", name, providers.ErrClosed)
	}
	s.running[&cancel] = struct{}{}
	s.execs.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, &cancel)
		s.mu.Unlock()
		s.execs.Done()
	}()

	runCtx := execCtx
	if cmd.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(execCtx, cmd.Timeout)
		defer stop()
	}

	dir := cmd.Dir
	switch {
	case dir == "":
		dir = s.workDir
	case !filepath.IsAbs(dir):
		dir = filepath.Join(s.workDir, dir)
	}
	if fi, err := os.Stat(dir); err != nil {
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: working directory: %w", name, err)
	} else if !fi.IsDir() {
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: working directory %s is not a directory", name, dir)
	}
	env := s.environ(cmd.Env)

	start := time.Now()
	prog, code := lookPath(name, dir, lookupEnv(env, "PATH"))
	if code != 0 {
		return notRunnable(name, code, start), nil
	}

	stdout := providers.NewCappedBuffer(cmd.OutputLimit)
	stderr := providers.NewCappedBuffer(cmd.OutputLimit)
	token, err := s.recordToken()
	if err != nil {
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: %w", name, err)
	}
	env = append(env, tokenEnv+"="+token)
	c := exec.CommandContext(runCtx, prog, cmd.Argv[1:]...)
	c.Args[0] = name
	c.Dir = dir
	c.Env = env
	c.Stdin = cmd.Stdin
	c.Stdout = tee(stdout, cmd.Stdout)
	c.Stderr = tee(stderr, cmd.Stderr)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(c.SysProcAttr)
	c.WaitDelay = s.waitDelay
	var killed atomic.Bool
	c.Cancel = func() error {
		killed.Store(true)
		killGroup(c.Process.Pid)
		return nil
	}

	// The parent-death signal fires when the thread that forked the command exits, not
	// the process. Go ends a thread when a goroutine locked to it exits, so the thread
	// stays locked to this goroutine, and out of others' reach, until Wait returned.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	starting.RLock()
	err = c.Start()
	if err == nil {
		registerDirect(c.Process.Pid)
		defer unregisterDirect(c.Process.Pid)
	}
	starting.RUnlock()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return providers.ExecResult{}, fmt.Errorf("local: exec %s: %w", name, ctxErr)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return notRunnable(name, 127, start), nil
		case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
			return notRunnable(name, 126, start), nil
		}
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: %w", name, err)
	}
	pgid := c.Process.Pid
	s.mu.Lock()
	var recErr error
	if !s.closed {
		// After Close the command is being killed (its context is cancelled), and
		// Close removed the sandbox's record directory.
		s.groups[pgid] = struct{}{}
		recErr = s.recordGroup(pgid)
	}
	s.mu.Unlock()
	if recErr != nil {
		// A command that gc could not reap if talkops died must not run.
		killGroup(pgid)
		_ = c.Wait()
		s.forgetIfEmpty(pgid)
		return providers.ExecResult{}, fmt.Errorf("local: exec %s: %w", name, recErr)
	}

	werr := c.Wait()
	s.forgetIfEmpty(pgid)
	res := providers.ExecResult{
		ExitCode:  exitCode(c.ProcessState),
		Stdout:    stdout.Bytes(),
		Stderr:    stderr.Bytes(),
		Truncated: stdout.Truncated() || stderr.Truncated(),
		Duration:  time.Since(start),
	}
	if killed.Load() {
		switch {
		case ctx.Err() != nil:
			return res, fmt.Errorf("local: exec %s: %w", name, ctx.Err())
		case errors.Is(context.Cause(execCtx), providers.ErrClosed):
			return res, fmt.Errorf("local: exec %s: %w", name, providers.ErrClosed)
		case errors.Is(runCtx.Err(), context.DeadlineExceeded):
			res.TimedOut = true
			res.ExitCode = 124
			return res, nil
		}
	}
	var exitErr *exec.ExitError
	if werr != nil && !errors.As(werr, &exitErr) && !errors.Is(werr, exec.ErrWaitDelay) {
		return res, fmt.Errorf("local: exec %s: %w", name, werr)
	}
	return res, nil
}

// environ returns the command's environment: the sandbox's base plus extra, sorted.
func (s *sandbox) environ(extra map[string]string) []string {
	env := make([]string, 0, len(s.env)+len(extra))
	for k, v := range s.env {
		if _, ok := extra[k]; !ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

func lookupEnv(env []string, key string) string {
	for _, kv := range env {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return kv[len(key)+1:]
		}
	}
	return ""
}

// lookPath finds name as a shell would with the command's own PATH (not the host's): a
// name with a slash is taken relative to dir; otherwise the absolute PATH entries are
// searched (relative entries are skipped, as os/exec does since Go 1.19). It returns the
// program's path, or an exit code: 127 not found, 126 found but not executable.
func lookPath(name, dir, pathEnv string) (string, int) {
	if strings.ContainsRune(name, '/') {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p, statExecutable(p)
	}
	code := 127
	for _, d := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		switch statExecutable(p) {
		case 0:
			return p, 0
		case 126:
			code = 126
		}
	}
	return "", code
}

func notRunnable(name string, code int, start time.Time) providers.ExecResult {
	msg := "command not found"
	if code == 126 {
		msg = "permission denied or not an executable file"
	}
	return providers.ExecResult{
		ExitCode: code,
		Stderr:   []byte(name + ": " + msg + "\n"),
		Duration: max(time.Since(start), time.Nanosecond),
	}
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// tee sends output to the capture buffer and, if set, to the caller's writer. A failing
// caller writer is dropped rather than failing the command.
func tee(capture io.Writer, w io.Writer) io.Writer {
	if w == nil {
		return capture
	}
	return io.MultiWriter(capture, &lenientWriter{w: w})
}

type lenientWriter struct {
	w      io.Writer
	failed bool
}

func (l *lenientWriter) Write(p []byte) (int, error) {
	if !l.failed {
		if _, err := l.w.Write(p); err != nil {
			l.failed = true
		}
	}
	return len(p), nil
}

// killGroup sends SIGKILL to every process in the group.
func killGroup(pgid int) {
	if pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// groupExists reports whether any process (zombies included) is in the group.
func groupExists(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// groupRunning reports whether a process that is not a zombie is in the group. It reads
// /proc where there is one and falls back to groupExists.
func groupRunning(pgid int) bool {
	procs, err := readProcs()
	if err != nil {
		return groupExists(pgid)
	}
	for _, p := range procs {
		if p.PGID == pgid && !p.Zombie {
			return true
		}
	}
	return false
}

var _ providers.StreamExecer = (*sandbox)(nil)

// ExecStream starts cmd with its stdin and stdout as streams (providers.StreamExecer),
// with every rule of Exec: its own process group, recorded, killed with the sandbox.
func (s *sandbox) ExecStream(ctx context.Context, cmd providers.Cmd) (*providers.Stream, error) {
	return providers.StreamOverExec(ctx, s.Exec, cmd)
}
