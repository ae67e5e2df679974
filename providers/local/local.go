// Package local is the sandbox provider that runs commands directly on the host, in the
// project folder.
//
// It isolates nothing: commands see the host's files, network and processes. What it does
// guarantee is that the host's environment stays out (a command starts from PATH, HOME,
// LANG, TERM, TMPDIR, USER and SHELL plus what the run names in Spec.Env and Cmd.Env, so
// API keys and GITHUB_TOKEN are not inherited), that every command runs in its own process
// group which a cancel, a Cmd.Timeout or Close kills as a whole, and that Upload and
// Download cannot reach outside the working directory.
//
// Commands left running in the background by a command that exited (`server &`) keep
// running, as they would in a container, until Close kills their process group. Every
// process a command starts carries the command's token in its environment, which
// setsid, double forks and nohup keep: Close, and `sandbox gc` after a SIGKILLed run,
// find and kill such detached processes by it. A process that also clears its
// environment (env -i setsid ...) is found only when the process called BecomeSubreaper,
// and only by Close: local is for trusted code only.
//
// A talkops process that is SIGKILLed cannot run Close. On Linux each command gets
// SIGKILL from the kernel when talkops dies (the parent-death signal), which reaches the
// command but not what it started. For the rest, a provider given Options.StateDir
// records each sandbox and each of its process groups there while they exist, and
// implements providers.Lister: `talkops sandbox gc` lists what a dead run left and its
// Delete kills the recorded groups, after checking on /proc that each group is still the
// one recorded.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/internal/safename"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
)

// Name is the provider's name as the user types it.
const Name = "local"

// ErrOutsideWorkDir is wrapped by Upload and Download errors for paths that resolve outside
// the working directory.
var ErrOutsideWorkDir = errors.New("path is outside the working directory")

// BaseEnv lists the host variables every command inherits (when set on the host).
var BaseEnv = []string{"PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER", "SHELL"}

// DefaultPath is the PATH commands get when the host has none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// DefaultWaitDelay is Options.WaitDelay when it is 0.
const DefaultWaitDelay = 2 * time.Second

// Options configure the provider.
type Options struct {
	// Getenv reads the host environment for BaseEnv and PassEnv; nil means os.Getenv.
	Getenv func(string) string
	// PassEnv names further host variables to pass to every command (for example
	// GOPATH). Nothing else of the host environment is passed.
	PassEnv []string
	// WaitDelay bounds how long Exec waits for the command's output pipes to close after
	// the command exited or was killed (a background child may hold them open);
	// 0 means DefaultWaitDelay.
	WaitDelay time.Duration
	// StateDir, when set, is where the provider records each open sandbox and the
	// process groups of its commands, for List and Delete in this or a later process
	// (DefaultStateDir is the CLI's). "" records nothing: List then finds nothing, and
	// a SIGKILLed run's background processes cannot be reaped.
	StateDir string
}

// Provider creates local sandboxes. It is safe for concurrent use.
type Provider struct {
	opts Options

	mu        sync.Mutex
	sandboxes map[*sandbox]struct{} // created and not yet known to be fully gone
}

var _ providers.Provider = (*Provider)(nil)

// New returns a local provider.
func New(opts Options) *Provider {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.WaitDelay <= 0 {
		opts.WaitDelay = DefaultWaitDelay
	}
	return &Provider{opts: opts, sandboxes: map[*sandbox]struct{}{}}
}

// Name returns "local".
func (p *Provider) Name() string { return Name }

// Create returns a sandbox whose working directory is spec.WorkDir (absolute, or relative
// to spec.ProjectDir) or else spec.ProjectDir. The id is "local-" and spec.RunID (or a
// random one when the run id is not a safe name). With Options.StateDir the sandbox is
// recorded there, and when another recorded sandbox already has the id a random suffix
// is added. A Snapshot is not supported.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: create: %w", err)
	}
	if spec.Snapshot != "" {
		return nil, fmt.Errorf("local: create from snapshot %q: %w", spec.Snapshot, providers.ErrNotSupported)
	}
	wd := spec.WorkDir
	if wd == "" || !filepath.IsAbs(wd) {
		if spec.ProjectDir == "" {
			return nil, errors.New("local: create: no project directory (Spec.ProjectDir is empty)")
		}
		wd = filepath.Join(spec.ProjectDir, wd)
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, fmt.Errorf("local: create: working directory: %w", err)
	}
	fi, err := os.Stat(wd)
	if err != nil {
		return nil, fmt.Errorf("local: create: working directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local: create: working directory %s is not a directory", wd)
	}
	env := map[string]string{}
	for _, k := range slices.Concat(BaseEnv, p.opts.PassEnv) {
		if v := p.opts.Getenv(k); v != "" {
			env[k] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = DefaultPath
	}
	if err := checkEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("local: create: Spec.Env: %w", err)
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	id := spec.RunID
	if !safename.Valid(id, 63) {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	id = "local-" + id
	var stateDir string
	if p.opts.StateDir != "" {
		if id, stateDir, err = p.record(spec, id, wd); err != nil {
			return nil, fmt.Errorf("local: create: %w", err)
		}
	}
	sb := &sandbox{
		id:        id,
		stateDir:  stateDir,
		workDir:   wd,
		env:       env,
		waitDelay: p.opts.WaitDelay,
		running:   map[*context.CancelCauseFunc]struct{}{},
		groups:    map[int]struct{}{},
	}
	p.mu.Lock()
	p.sandboxes[sb] = struct{}{}
	p.mu.Unlock()
	registerOpen(sb)
	return sb, nil
}

// record claims the sandbox's directory in the state directory and writes its record.
func (p *Provider) record(spec providers.Spec, id, wd string) (string, string, error) {
	id, err := claimDir(p.opts.StateDir, id)
	if err != nil {
		return "", "", fmt.Errorf("record the sandbox in %s: %w", p.opts.StateDir, err)
	}
	dir := filepath.Join(p.opts.StateDir, id)
	host, _ := os.Hostname()
	rec := sandboxRecord{
		ID: id, RunID: spec.RunID, CreatedAt: time.Now().UTC(), WorkDir: wd,
		OwnerPID: os.Getpid(), OwnerHost: host, Labels: maps.Clone(spec.Labels),
	}
	if err := writeJSON(filepath.Join(dir, sandboxFile), rec); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("record the sandbox in %s: %w", p.opts.StateDir, err)
	}
	return id, dir, nil
}

// Attach is not supported: a local sandbox lives only as long as the process that made it.
func (p *Provider) Attach(ctx context.Context, id string, _ providers.AttachOptions) (providers.Sandbox, error) {
	return nil, fmt.Errorf("local: attach %q: %w", id, providers.ErrNotSupported)
}

// Alive returns the ids of the sandboxes of this provider that are not closed or still
// have a process running, for leak checks in tests and diagnostics.
func (p *Provider) Alive() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for sb := range p.sandboxes {
		if sb.alive() {
			ids = append(ids, sb.id)
		} else {
			delete(p.sandboxes, sb)
		}
	}
	slices.Sort(ids)
	return ids
}

func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("invalid variable name %q (it must be non-empty, without '=' or NUL)", k)
		}
		if strings.ContainsAny(v, "\x00") {
			return fmt.Errorf("value of %s contains a NUL byte", k)
		}
	}
	return nil
}

type sandbox struct {
	id        string
	stateDir  string // the sandbox's record directory; "" when not recorded
	workDir   string
	env       map[string]string // read-only after Create
	waitDelay time.Duration

	mu      sync.Mutex
	closed  bool
	running map[*context.CancelCauseFunc]struct{}
	groups  map[int]struct{} // process groups that may still have members
	tokens  []string         // every command's token (see recordToken)
	execs   sync.WaitGroup
}

var _ providers.Sandbox = (*sandbox)(nil)

func (s *sandbox) ID() string      { return s.id }
func (s *sandbox) WorkDir() string { return s.workDir }

// rel resolves p (relative to the working directory, or absolute) to a local path
// relative to the working directory, "." for the directory itself.
func (s *sandbox) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(s.workDir, filepath.Clean(p))
		if err != nil {
			return "", fmt.Errorf("%w: %s", ErrOutsideWorkDir, p)
		}
		p = r
	}
	p = filepath.Clean(p)
	if p != "." && !filepath.IsLocal(p) {
		return "", fmt.Errorf("%w: %s is not below %s", ErrOutsideWorkDir, p, s.workDir)
	}
	return p, nil
}

func (s *sandbox) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return providers.ErrClosed
	}
	return nil
}

// Upload extracts tgz into dir (relative to the working directory or absolute below it).
// The directory is opened through os.Root, so neither dir nor any archive entry can
// reach outside the working directory, even through symlinks.
func (s *sandbox) Upload(ctx context.Context, dir string, tgz io.Reader) error {
	if err := s.checkOpen(); err != nil {
		return fmt.Errorf("local: upload: %w", err)
	}
	rel, err := s.rel(dir)
	if err != nil {
		return fmt.Errorf("local: upload: %w", err)
	}
	root, err := os.OpenRoot(s.workDir)
	if err != nil {
		return fmt.Errorf("local: upload: %w", err)
	}
	defer root.Close()
	if err := root.MkdirAll(rel, 0o755); err != nil {
		return fmt.Errorf("local: upload: %w", err)
	}
	sub, err := root.OpenRoot(rel)
	if err != nil {
		return fmt.Errorf("local: upload: %w", err)
	}
	defer sub.Close()
	if err := (archive.Extractor{}).ExtractRoot(ctx, tgz, sub); err != nil {
		return fmt.Errorf("local: upload to %s: %w", dir, err)
	}
	return nil
}

// Download opens the regular file at p, which must resolve inside the working directory.
func (s *sandbox) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("local: download: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: download: %w", err)
	}
	rel, err := s.rel(p)
	if err != nil {
		return nil, fmt.Errorf("local: download: %w", err)
	}
	root, err := os.OpenRoot(s.workDir)
	if err != nil {
		return nil, fmt.Errorf("local: download: %w", err)
	}
	defer root.Close()
	// Check before opening: opening a FIFO for reading would block until a writer came.
	if fi, err := root.Stat(rel); err != nil {
		return nil, fmt.Errorf("local: download: %w", err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("local: download: %s is not a regular file (mode %v)", p, fi.Mode().Type())
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("local: download: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (mode %v)", p, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("local: download: %w", err)
	}
	return f, nil
}

// Close kills every command still running, including background processes left by
// commands that exited, and waits (bounded by ctx) for running Execs to return. The
// working directory is the user's project and is left alone.
func (s *sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for cancel := range s.running {
		(*cancel)(providers.ErrClosed)
	}
	groups := slices.Collect(maps.Keys(s.groups))
	tokens := slices.Clone(s.tokens)
	s.mu.Unlock()

	for _, pgid := range groups {
		killGroup(pgid)
	}
	// What left its process group (setsid, a double fork) still carries its command's
	// token; it is killed before the record that would let gc find it goes.
	unregisterOpen(s)
	err := errors.Join(killMarked(ctx, tokens), killOrphans())
	if err != nil {
		err = fmt.Errorf("local: close %s: %w", s.id, err)
	}
	if s.stateDir != "" && err == nil {
		// The groups and the detached processes are SIGKILLed, which cannot be ignored:
		// their record goes too. Were one left, the record stays for `sandbox gc`.
		s.mu.Lock()
		if rerr := os.RemoveAll(s.stateDir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("local: close %s: remove its record: %w", s.id, rerr))
		}
		s.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		s.execs.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// The commands are killed; their Execs return within WaitDelay.
	}
	return err
}

// alive reports whether the sandbox is open or one of its process groups still has a
// running member.
func (s *sandbox) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		return true
	}
	for pgid := range s.groups {
		if groupRunning(pgid) {
			return true
		}
		delete(s.groups, pgid)
		s.forgetGroup(pgid)
	}
	return false
}

// forgetIfEmpty drops pgid once no process is in the group, so that Close never signals
// a process group id the kernel could have handed to someone else.
func (s *sandbox) forgetIfEmpty(pgid int) {
	if groupExists(pgid) {
		return
	}
	s.mu.Lock()
	delete(s.groups, pgid)
	s.forgetGroup(pgid)
	s.mu.Unlock()
}

// statExecutable classifies the file at p for running it: 0 if it can be run, 127 if it
// does not exist, 126 if it exists but is a directory or has no execute bit.
func statExecutable(p string) int {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 127
	case err != nil:
		return 126
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return 126
	}
	return 0
}

// Capabilities says what the local provider can do: its sandboxes are the project
// directory itself, so there is nothing to attach to or sync.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{List: true, BinaryOutput: true}
}
