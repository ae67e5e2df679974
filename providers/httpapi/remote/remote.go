// Package remote implements providers.Sandbox for sandboxes reached over an HTTP API, on
// top of a four-call Driver (run a shell script, write a file, read a file, delete).
//
// Everything the contract asks beyond those calls is done here once for every remote
// provider: Cmd.Argv, Env, Dir and Stdin become one POSIX sh script with every word
// quoted; Cmd.Timeout is enforced inside the sandbox with `timeout` (which also puts the
// command's process tree into one process group, so a cancel can kill all of it) and again
// on the client; a cancelled Exec kills its command with a second script; output is
// captured head and tail up to Cmd.OutputLimit; Upload sends the whole gzip tar as one file
// and unpacks it with tar (or hands it to a driver that accepts tar natively); Close is
// idempotent, kills what is still running and deletes only sandboxes this process created.
//
// Scripts need sh, printf, cat, rm, kill and sleep in the sandbox, tar for Upload, and
// optionally `timeout` (GNU coreutils or busybox); without `timeout`, the server-side and
// client-side bounds still apply but a timeout or cancel kills only the command's process,
// not its children.
package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
)

// Driver is what a provider implements to get a full providers.Sandbox.
type Driver interface {
	// Run runs a POSIX sh script in the sandbox and waits for it. A script that runs and
	// exits non-zero is a Result, not an error.
	Run(ctx context.Context, r Run) (Result, error)
	// WriteFile creates or replaces the file at the absolute path with body.
	WriteFile(ctx context.Context, path string, body *httpapi.Body) error
	// ReadFile opens the file at the absolute path; a missing file wraps fs.ErrNotExist.
	ReadFile(ctx context.Context, path string) (io.ReadCloser, error)
	// Delete deletes the sandbox; one that is already gone is not an error.
	Delete(ctx context.Context) error
}

// TarUploader is implemented by drivers whose API extracts a gzip tar itself.
type TarUploader interface {
	UploadTarGz(ctx context.Context, dir string, body *httpapi.Body) error
}

// Run is one script to run.
type Run struct {
	Script string
	// Timeout is the server-side bound to ask for (the command's own timeout plus a
	// grace period), 0 for none.
	Timeout time.Duration
	// Stdout and Stderr receive output as it arrives, for drivers that stream; a
	// driver that does set Result.Streamed.
	Stdout, Stderr io.Writer
	// Repeatable says running the script twice does no harm (mkdir -p), so a driver may
	// send it again after a failure that leaves unknown whether it ran. Other scripts
	// are never sent twice by drivers whose API has no idempotency key.
	Repeatable bool
}

// Retry is how a driver whose API takes no idempotency key sends the script: never again
// after it may have started (httpapi.RetryUnprocessed), unless it is Repeatable.
func (r Run) Retry() httpapi.RetryMode {
	if r.Repeatable {
		return httpapi.RetryIdempotent
	}
	return httpapi.RetryUnprocessed
}

// Result is what a script produced.
type Result struct {
	// Stdout and Stderr are the script's output. A driver whose API only returns
	// combined output puts it all in Stdout and is configured with SplitStderr.
	Stdout, Stderr []byte
	ExitCode       int
	// TimedOut is set when the server killed the script for its Run.Timeout.
	TimedOut bool
	// Streamed is set when the output was already written to Run.Stdout/Stderr.
	Streamed bool
	// Truncated is set when the API returned only part of the output; the exact output
	// is then read from the files the script kept (see Config.KeepLines).
	Truncated bool
}

// Config describes a sandbox handle.
type Config struct {
	// Provider names the provider in errors.
	Provider string
	ID       string
	WorkDir  string
	// Owned is true when this process created the sandbox: Close deletes it. An
	// attached sandbox is never deleted.
	Owned bool
	// Env is set in every command (Spec.Env); Cmd.Env overrides it per key.
	Env map[string]string
	// SplitStderr is set for drivers that only return combined output.
	SplitStderr bool
	// MaxScript is the longest script sent inline (argv and API limits); a longer one
	// is written to a file first. 0 means 96 KiB.
	MaxScript int
	// TempDir is where scripts stage files in the sandbox; "" means /tmp.
	TempDir string
	// Grace is added to Cmd.Timeout for the server-side and client-side bounds, so the
	// in-sandbox `timeout` fires first and partial output survives. 0 means 10 s.
	Grace time.Duration
	// KillTimeout bounds the script that kills a cancelled command; 0 means 15 s.
	KillTimeout time.Duration
	// KeepLines and KeepBytes are for APIs that return only the end of the output: a
	// stream with more lines or bytes than that is kept in a file for the client to read
	// when the driver reports Result.Truncated. 0 means the API returns all output.
	KeepLines, KeepBytes int
}

// Sandbox is a providers.Sandbox over a Driver.
type Sandbox struct {
	cfg    Config
	driver Driver

	mu      sync.Mutex
	closed  bool
	running map[string]struct{} // temp prefixes of commands in flight
	bg      sync.WaitGroup      // kill scripts in flight
}

var _ providers.Sandbox = (*Sandbox)(nil)

// New returns a Sandbox handle; the sandbox must already be ready.
func New(cfg Config, d Driver) *Sandbox {
	if cfg.MaxScript <= 0 {
		cfg.MaxScript = 96 << 10
	}
	if cfg.TempDir == "" {
		cfg.TempDir = "/tmp"
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.KillTimeout <= 0 {
		cfg.KillTimeout = 15 * time.Second
	}
	return &Sandbox{cfg: cfg, driver: d, running: map[string]struct{}{}}
}

// ID returns the provider's sandbox id.
func (s *Sandbox) ID() string { return s.cfg.ID }

// WorkDir returns the absolute working directory.
func (s *Sandbox) WorkDir() string { return s.cfg.WorkDir }

// Driver returns the driver, for provider-specific calls.
func (s *Sandbox) Driver() Driver { return s.driver }

// maxInlineStdin is the largest stdin written by the script itself; a larger one is
// uploaded as a file first.
const maxInlineStdin = 16 << 10

// Exec runs cmd; see providers.Sandbox.
func (s *Sandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	if err := s.checkCmd(cmd); err != nil {
		return providers.ExecResult{}, err
	}
	prefix := s.cfg.TempDir + "/.talkops-" + nonce()
	if err := s.begin(prefix); err != nil {
		return providers.ExecResult{}, err
	}
	defer s.end(prefix)

	env, err := s.execEnv(cmd.Env)
	if err != nil {
		return providers.ExecResult{}, err
	}
	spec := scriptSpec{
		argv:        cmd.Argv,
		env:         env,
		dir:         resolve(s.cfg.WorkDir, cmd.Dir),
		timeout:     cmd.Timeout,
		splitStderr: s.cfg.SplitStderr,
		keepLines:   s.cfg.KeepLines,
		keepBytes:   s.cfg.KeepBytes,
		prefix:      prefix,
		marker:      "--talkops-stderr-" + nonce() + "--",
	}
	var staged []string // this command's files in the sandbox, removed when it ends
	defer func() {
		if len(staged) > 0 {
			s.cleanup(ctx, staged)
		}
	}()
	script, files, err := s.stageInputs(ctx, &spec, cmd.Stdin)
	staged = append(staged, files...)
	if err != nil {
		return providers.ExecResult{}, err
	}

	run := Run{Script: script, Stdout: cmd.Stdout, Stderr: cmd.Stderr}
	rctx := ctx
	if cmd.Timeout > 0 {
		run.Timeout = cmd.Timeout + s.cfg.Grace
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, run.Timeout+s.cfg.Grace)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return providers.ExecResult{}, fmt.Errorf("%s: exec %s: %w", s.cfg.Provider, cmd.Argv[0], err)
	}
	start := time.Now()
	res, err := s.driver.Run(rctx, run)
	elapsed := time.Since(start)
	if err != nil {
		return s.runFailed(ctx, rctx, cmd, prefix, elapsed, err)
	}
	out, files := s.output(ctx, spec, res)
	staged = append(staged, files...)
	if !res.Streamed {
		if cmd.Stdout != nil && len(out.stdout) > 0 {
			_, _ = cmd.Stdout.Write(out.stdout)
		}
		if cmd.Stderr != nil && len(out.stderr) > 0 {
			_, _ = cmd.Stderr.Write(out.stderr)
		}
	}
	return execResult(cmd, res, elapsed, out), nil
}

// checkCmd rejects what cannot be written into a shell script: no argv, an environment
// name that is not a shell name, a NUL byte in an argument.
func (s *Sandbox) checkCmd(cmd providers.Cmd) error {
	if len(cmd.Argv) == 0 {
		return fmt.Errorf("%s: exec: empty argv", s.cfg.Provider)
	}
	for k := range cmd.Env {
		if !ValidEnvName(k) {
			return fmt.Errorf("%s: exec: environment variable name %q is not a valid shell name (letters, digits, _; not starting with a digit)", s.cfg.Provider, k)
		}
	}
	for _, a := range cmd.Argv {
		if containsNUL(a) {
			return fmt.Errorf("%s: exec: argument contains a NUL byte", s.cfg.Provider)
		}
	}
	return nil
}

// execEnv is the sandbox's environment with the command's on top, checked as a whole.
func (s *Sandbox) execEnv(cmdEnv map[string]string) (map[string]string, error) {
	env := maps.Clone(s.cfg.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cmdEnv)
	for k, v := range env {
		if !ValidEnvName(k) {
			return nil, fmt.Errorf("%s: exec: environment variable name %q is not a valid shell name", s.cfg.Provider, k)
		}
		if containsNUL(v) {
			return nil, fmt.Errorf("%s: exec: environment variable %s contains a NUL byte", s.cfg.Provider, k)
		}
	}
	return env, nil
}

// stageInputs puts stdin into spec, inline when small and as an uploaded file otherwise,
// and returns the script to run: the script itself, or a call of it uploaded as a file
// when it is longer than the API takes. files are what it uploaded, also on an error.
func (s *Sandbox) stageInputs(ctx context.Context, spec *scriptSpec, stdin io.Reader) (script string, files []string, err error) {
	if stdin != nil {
		in, err := io.ReadAll(io.LimitReader(stdin, maxInlineStdin+1))
		if err != nil {
			return "", files, fmt.Errorf("%s: exec: read stdin: %w", s.cfg.Provider, err)
		}
		if len(in) > maxInlineStdin {
			f := spec.prefix + ".stdin"
			if err := s.stageStream(ctx, f, io.MultiReader(bytes.NewReader(in), stdin)); err != nil {
				return "", files, fmt.Errorf("%s: exec: stage stdin: %w", s.cfg.Provider, err)
			}
			files = append(files, f)
			spec.stdinFile = f
		} else {
			spec.stdinInline = in
		}
	}
	script = spec.build()
	if len(script) > s.cfg.MaxScript {
		f := spec.prefix + ".sh"
		if err := s.driver.WriteFile(ctx, f, httpapi.BytesBody([]byte(script), "application/octet-stream")); err != nil {
			return "", files, fmt.Errorf("%s: exec: stage script: %w", s.cfg.Provider, err)
		}
		files = append(files, f)
		script = "sh " + Quote(f) + "\n"
	}
	return script, files, nil
}

// runFailed turns a failed Run into Exec's answer: the caller's cancellation is an error,
// the client-side bound a timed-out result, anything else an error. Both bounds kill what
// may still run in the sandbox.
func (s *Sandbox) runFailed(ctx, rctx context.Context, cmd providers.Cmd, prefix string, elapsed time.Duration, err error) (providers.ExecResult, error) {
	switch {
	case ctx.Err() != nil:
		s.kill(ctx, prefix)
		return providers.ExecResult{Duration: elapsed}, fmt.Errorf("%s: exec %s: %w", s.cfg.Provider, cmd.Argv[0], ctx.Err())
	case rctx.Err() != nil:
		// The client-side bound: neither the sandbox nor the server stopped it.
		s.kill(ctx, prefix)
		return providers.ExecResult{ExitCode: 124, TimedOut: true, Duration: elapsed,
			Stderr: fmt.Appendf(nil, "talkops: command timed out after %s\n", cmd.Timeout)}, nil
	}
	return providers.ExecResult{Duration: elapsed}, fmt.Errorf("%s: exec %s: %w", s.cfg.Provider, cmd.Argv[0], err)
}

// commandOutput is what a command wrote, as exact as the sandbox could give it.
type commandOutput struct {
	stdout, stderr []byte
	apiTruncated   bool // the API cut the output and the script kept no exact copy
}

// output separates the command's stdout and stderr and, when the API's copy may be cut
// or mangled, reads the exact one the script kept. files are the kept copies to remove.
func (s *Sandbox) output(ctx context.Context, spec scriptSpec, res Result) (out commandOutput, files []string) {
	out.stdout, out.stderr = res.Stdout, res.Stderr
	if s.cfg.SplitStderr {
		out.stdout, out.stderr = splitOutput(res.Stdout, spec.marker)
	}
	kept := []string{spec.prefix + ".out", spec.prefix + ".err"}
	switch {
	case res.Truncated || bytes.Contains(out.stdout, replacementChar) || bytes.Contains(out.stderr, replacementChar):
		// Output the API cut short, or possibly bytes that are not UTF-8 mangled by the
		// JSON transport: the script kept the exact output in files in that case.
		if o, e, ok := s.exactOutput(ctx, spec.prefix); ok {
			out.stdout, out.stderr = o, e
		} else {
			out.apiTruncated = res.Truncated
		}
		return out, kept
	case !isASCII(out.stdout) || !isASCII(out.stderr), s.cfg.KeepLines > 0 && (s.big(out.stdout) || s.big(out.stderr)):
		// The script may have kept the files (a sandbox without iconv keeps them for
		// any non-ASCII output): remove them.
		return out, kept
	}
	return out, nil
}

// execResult is the result of a command that ran: a timeout as the sandbox or the
// script's own timeout reported it, the output capped at cmd.OutputLimit.
func execResult(cmd providers.Cmd, res Result, elapsed time.Duration, o commandOutput) providers.ExecResult {
	out := providers.ExecResult{ExitCode: res.ExitCode, Duration: elapsed}
	switch {
	case res.TimedOut:
		out.TimedOut, out.ExitCode = true, 124
	case cmd.Timeout > 0 && (res.ExitCode == 124 || res.ExitCode == 137) && elapsed >= cmd.Timeout:
		out.TimedOut, out.ExitCode = true, 124
	}
	limit := cmd.OutputLimit
	so, se := providers.NewCappedBuffer(limit), providers.NewCappedBuffer(limit)
	_, _ = so.Write(o.stdout)
	_, _ = se.Write(o.stderr)
	out.Stdout, out.Stderr = so.Bytes(), se.Bytes()
	out.Truncated = so.Truncated() || se.Truncated() || o.apiTruncated
	if out.Stdout == nil {
		out.Stdout = []byte{}
	}
	if out.Stderr == nil {
		out.Stderr = []byte{}
	}
	return out
}

// Upload extracts the gzip tar stream into dir; see providers.Sandbox. The stream is
// spooled to a temporary file on the host so a retried request can send it again.
func (s *Sandbox) Upload(ctx context.Context, dir string, tgz io.Reader) error {
	if err := s.check(); err != nil {
		return err
	}
	dir = resolve(s.cfg.WorkDir, dir)
	f, err := os.CreateTemp("", "talkops-upload-*.tgz")
	if err != nil {
		return fmt.Errorf("%s: upload: spool: %w", s.cfg.Provider, err)
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, tgz)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: upload: spool: %w", s.cfg.Provider, err)
	}
	body, err := httpapi.FileBody(f.Name(), "application/gzip")
	if err != nil {
		return fmt.Errorf("%s: upload: %w", s.cfg.Provider, err)
	}
	if tu, ok := s.driver.(TarUploader); ok {
		if err := tu.UploadTarGz(ctx, dir, body); err != nil {
			return fmt.Errorf("%s: upload to %s: %w", s.cfg.Provider, dir, err)
		}
		return nil
	}
	archive := s.cfg.TempDir + "/.talkops-upload-" + nonce() + ".tgz"
	if err := s.driver.WriteFile(ctx, archive, body); err != nil {
		return fmt.Errorf("%s: upload to %s: %w", s.cfg.Provider, dir, err)
	}
	res, err := s.driver.Run(ctx, Run{Script: untarScript(archive, dir)})
	if err != nil {
		s.cleanup(ctx, []string{archive})
		return fmt.Errorf("%s: upload: extract into %s: %w", s.cfg.Provider, dir, err)
	}
	if res.ExitCode != 0 {
		msg := res.Stderr
		if len(msg) == 0 {
			msg = res.Stdout
		}
		return fmt.Errorf("%s: upload: tar -xzf into %s exited %d: %s", s.cfg.Provider, dir, res.ExitCode, clip(msg, 2000))
	}
	return nil
}

// Download opens one file; see providers.Sandbox.
func (s *Sandbox) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	p = resolve(s.cfg.WorkDir, p)
	rc, err := s.driver.ReadFile(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%s: download %s: %w", s.cfg.Provider, p, err)
	}
	return rc, nil
}

// Close kills the commands still running and deletes the sandbox when this process
// created it. It is idempotent; a failed delete is returned and retried by the next Close.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	inflight := make([]string, 0, len(s.running))
	for p := range s.running {
		inflight = append(inflight, p)
	}
	s.mu.Unlock()

	if !s.cfg.Owned {
		// Deleting would kill them; an attached sandbox stays, so kill them one by one.
		var wg sync.WaitGroup
		for _, p := range inflight {
			wg.Go(func() { s.kill(ctx, p) })
		}
		wg.Wait()
		s.waitBackground(ctx)
		return nil
	}
	err := s.driver.Delete(ctx)
	s.waitBackground(ctx)
	if err != nil {
		s.mu.Lock()
		s.closed = false // let a later Close try again
		s.mu.Unlock()
		return fmt.Errorf("%s: delete sandbox %s: %w", s.cfg.Provider, s.cfg.ID, err)
	}
	return nil
}

func (s *Sandbox) waitBackground(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (s *Sandbox) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%s: sandbox %s: %w", s.cfg.Provider, s.cfg.ID, providers.ErrClosed)
	}
	return nil
}

func (s *Sandbox) begin(prefix string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%s: sandbox %s: %w", s.cfg.Provider, s.cfg.ID, providers.ErrClosed)
	}
	s.running[prefix] = struct{}{}
	return nil
}

func (s *Sandbox) end(prefix string) {
	s.mu.Lock()
	delete(s.running, prefix)
	s.mu.Unlock()
}

// killWait is how long Exec waits for the kill of its command before it returns anyway.
const killWait = 5 * time.Second

// kill stops the command started with prefix and waits up to killWait for that; the kill
// goes on in the background after that (Exec must return promptly), and Close waits for
// it. Failures are ignored: the sandbox may be gone already. It keeps ctx's values but
// not its cancellation, which is usually why the command is being killed.
func (s *Sandbox) kill(ctx context.Context, prefix string) {
	done := make(chan struct{})
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer close(done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.KillTimeout)
		defer cancel()
		_, _ = s.driver.Run(ctx, Run{Script: killScript(prefix), Timeout: s.cfg.KillTimeout})
	}()
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// cleanup removes staged files, best effort, without blocking the caller, and on ctx's
// values without its cancellation (an Exec that was cancelled still cleans up).
func (s *Sandbox) cleanup(ctx context.Context, files []string) {
	script := "rm -f"
	for _, f := range files {
		script += " " + Quote(f)
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.KillTimeout)
		defer cancel()
		_, _ = s.driver.Run(ctx, Run{Script: script + "\n"})
	}()
}

// stageStream writes r to path in the sandbox via a temporary host file (replayable).
func (s *Sandbox) stageStream(ctx context.Context, path string, r io.Reader) error {
	f, err := os.CreateTemp("", "talkops-stage-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	body, err := httpapi.FileBody(f.Name(), "application/octet-stream")
	if err != nil {
		return err
	}
	return s.driver.WriteFile(ctx, path, body)
}

// replacementChar is U+FFFD in UTF-8, what JSON encoders put in place of invalid bytes.
var replacementChar = []byte("\uFFFD")

// exactOutput reads the output files a script kept.
func (s *Sandbox) exactOutput(ctx context.Context, prefix string) (stdout, stderr []byte, ok bool) {
	read := func(p string) ([]byte, bool) {
		rc, err := s.driver.ReadFile(ctx, p)
		if err != nil {
			return nil, false
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return b, err == nil
	}
	stdout, ok1 := read(prefix + ".out")
	if !ok1 {
		return nil, nil, false
	}
	stderr, ok2 := read(prefix + ".err")
	return stdout, stderr, ok2
}

// big reports whether the script kept a stream's file for its size.
func (s *Sandbox) big(b []byte) bool {
	return bytes.Count(b, []byte("\n")) > s.cfg.KeepLines || len(b) > s.cfg.KeepBytes
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// nonce returns 16 random hex digits.
func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "…"...)
	}
	return b
}

// Name returns a sandbox name for a run: "talkops-<run id>-<random>", lower case, only
// letters, digits and dashes, at most maxLen bytes (the random suffix always survives).
func Name(runID string, maxLen int) string {
	var b []byte
	for _, r := range strings.ToLower(runID) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b = append(b, byte(r))
		case len(b) > 0 && b[len(b)-1] != '-':
			b = append(b, '-')
		}
	}
	id := strings.Trim(string(b), "-")
	suffix := nonce()[:8]
	room := maxLen - len("talkops-") - len(suffix) - 1
	if room < len(id) {
		id = strings.TrimRight(id[:max(room, 0)], "-")
	}
	if id == "" {
		return "talkops-" + suffix
	}
	return "talkops-" + id + "-" + suffix
}

// InfoFromLabels fills a providers.Info from a sandbox's labels.
func InfoFromLabels(provider, id, state string, created time.Time, labels map[string]string) providers.Info {
	info := providers.Info{Provider: provider, ID: id, State: state, CreatedAt: created, Labels: labels, RunID: labels[providers.LabelRunID]}
	if t, err := time.Parse(time.RFC3339, labels[providers.LabelExpiresAt]); err == nil {
		info.ExpiresAt = t
	}
	return info
}

// CleanupTimeout bounds the delete that undoes a failed Create.
const CleanupTimeout = 30 * time.Second

// Undo deletes what a failed Create allocated, on a context that survives ctx's
// cancellation, and joins a delete failure to cause.
func Undo(ctx context.Context, cause error, del func(context.Context) error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	defer cancel()
	if err := del(dctx); err != nil {
		return errors.Join(cause, fmt.Errorf("and deleting the half-created sandbox failed (talkops sandbox gc will find it by its labels): %w", err))
	}
	return cause
}
