// Package plugin runs sandbox providers that live outside talkops: any executable that
// speaks the plugin protocol (docs/plugin-protocol.md) on its stdin and stdout, written
// in any language, and the Python SandboxBackendProtocol classes the seeds' users already
// have, through a bridge embedded in this package (Bridge).
//
// A Provider starts its plugin when a sandbox is created, attached, listed or deleted,
// and stops it (shutdown, then a kill of its whole process group) once no sandbox handle
// or call needs it, so teardown leaves no plugin process behind. Every call but an exec
// without a timeout has a deadline; a plugin that exits, writes something that is not a
// protocol message, or misses a deadline fails the call with a *ProcessError quoting the
// tail of its stderr. A later call starts a fresh plugin, so teardown can still delete a
// sandbox after its plugin crashed.
//
// Everything the sandbox contract asks beyond the plugin's operations (argv quoting,
// environment, working directory, stdin, timeouts that kill the whole process tree,
// cancellation, output limits) is done on top of exec by providers/httpapi/remote, as for
// the remote providers.
package plugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sync"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// DefaultWorkDir is the working directory of a plugin sandbox when neither the config nor
// the plugin names one (the seeds' fallback for unknown providers).
const DefaultWorkDir = "/workspace"

// Options configure a plugin provider.
type Options struct {
	// Name is the provider's name as the user types it (--sandbox NAME).
	Name string
	// Command is the plugin's argv; Command[0] is an absolute path or looked up on PATH.
	Command []string
	// BridgeArgs, when not nil, runs the embedded Python bridge with these arguments
	// (BackendArgs, EntryPointArgs) instead of Command.
	BridgeArgs []string
	// Python is the interpreter for the bridge; "" means python3 on PATH.
	Python string
	// Dir is the directory the plugin runs in; "" is talkops' own working directory.
	Dir string
	// Env is the plugin's environment (KEY=VALUE). The plugin is a trusted host program,
	// like a built-in provider, so the caller usually passes the host environment.
	Env []string
	// WorkingDir is the configured working directory inside the sandbox ("" lets the
	// plugin choose).
	WorkingDir string
	// Options is the [sandboxes.providers.NAME.options] table, handed to the plugin in
	// its hello message.
	Options map[string]any
	// StartTimeout bounds starting the plugin and its hello answer; 0 means 30 s.
	StartTimeout time.Duration
	// CreateTimeout bounds create and attach; 0 means 5 min (cloud sandboxes boot slowly).
	CreateTimeout time.Duration
	// CallTimeout bounds every other call (one chunk, delete, list); 0 means 2 min.
	CallTimeout time.Duration
	// ExecGrace is how long past an exec's timeout the plugin may take to answer before
	// it counts as hung; 0 means 5 s.
	ExecGrace time.Duration
}

// Provider is a providers.Provider backed by a plugin process.
type Provider struct {
	opts Options

	mu    sync.Mutex
	proc  *process
	users int // open sandbox handles plus calls in flight
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
	_ providers.Prober   = (*Provider)(nil)
)

// New returns a provider for the plugin opts describe; nothing starts until it is used.
func New(opts Options) (*Provider, error) {
	if opts.BridgeArgs != nil {
		if opts.Python == "" {
			opts.Python = "python3"
		}
		opts.Command = nil
	} else if len(opts.Command) == 0 || opts.Command[0] == "" {
		return nil, fmt.Errorf("plugin provider %q: a command is required: %w", opts.Name, providers.ErrConfig)
	}
	if opts.Name == "" {
		return nil, fmt.Errorf("plugin provider %q: a name is required: %w", opts.Name, providers.ErrConfig)
	}
	if opts.WorkingDir != "" && !path.IsAbs(opts.WorkingDir) {
		return nil, fmt.Errorf("plugin provider %s: working_dir %q: want an absolute path: %w", opts.Name, opts.WorkingDir, providers.ErrConfig)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.CreateTimeout <= 0 {
		opts.CreateTimeout = 5 * time.Minute
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Minute
	}
	if opts.ExecGrace <= 0 {
		opts.ExecGrace = 5 * time.Second
	}
	return &Provider{opts: opts}, nil
}

// Name returns the configured name.
func (p *Provider) Name() string { return p.opts.Name }

// hold marks one more user and returns the running plugin, starting one if none runs.
func (p *Provider) hold(ctx context.Context) (*process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil && !p.proc.alive() {
		p.proc.kill()
		p.proc = nil
	}
	if p.proc == nil {
		hello := helloParams{Protocol: ProtocolVersion, Name: p.opts.Name, WorkingDir: p.opts.WorkingDir, Options: p.opts.Options}
		if hello.Options == nil {
			hello.Options = map[string]any{}
		}
		argv := p.opts.Command
		if p.opts.BridgeArgs != nil {
			dir, script, err := writeBridge()
			if err != nil {
				return nil, err
			}
			// Python has read the script once it answers hello (or has failed).
			defer os.RemoveAll(dir)
			argv = append([]string{p.opts.Python, script}, p.opts.BridgeArgs...)
		}
		proc, err := start(ctx, p.opts.Name, argv, p.opts.Env, p.opts.Dir, hello, p.opts.StartTimeout)
		if err != nil {
			return nil, err
		}
		p.proc = proc
	}
	p.users++
	return p.proc, nil
}

// release drops one user; the last one stops the plugin.
func (p *Provider) release(ctx context.Context) {
	p.mu.Lock()
	p.users--
	var stop *process
	if p.users <= 0 {
		p.users, stop, p.proc = 0, p.proc, nil
	}
	p.mu.Unlock()
	if stop != nil {
		stop.shutdown(context.WithoutCancel(ctx), 2*time.Second)
	}
}

// do runs one call on the plugin, starting it if needed.
func (p *Provider) do(ctx context.Context, op string, params, result any, deadline time.Duration) error {
	proc, err := p.hold(ctx)
	if err != nil {
		return err
	}
	defer p.release(ctx)
	return proc.call(ctx, op, params, result, deadline)
}

// Capabilities is what a plugin may be able to do: it says what it can only once it runs
// (Probe). Flags it cannot honour fail then, with ErrNotSupported, before anything is
// created.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true}
}

// Probe starts the plugin (if it is not running) and returns what it said it can do.
func (p *Provider) Probe(ctx context.Context) (providers.Capabilities, error) {
	proc, err := p.hold(ctx)
	if err != nil {
		return providers.Capabilities{}, err
	}
	defer p.release(ctx)
	c := proc.caps
	return providers.Capabilities{Attach: c.Attach, Snapshot: c.Snapshots, OwnFilesystem: true, List: c.List, TTL: c.TTL}, nil
}

// Create asks the plugin for a new sandbox; see providers.Provider.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s plugin: create: %w", p.opts.Name, err)
	}
	proc, err := p.hold(ctx)
	if err != nil {
		return nil, err
	}
	wd := spec.WorkDir
	if wd == "" {
		wd = p.opts.WorkingDir
	}
	params := createParams{RunID: spec.RunID, Labels: spec.Labels, Snapshot: spec.Snapshot, WorkingDir: wd}
	if spec.TTL > 0 {
		params.TTLSeconds = int64(math.Ceil(spec.TTL.Seconds()))
	}
	if spec.Snapshot != "" && !proc.caps.Snapshots {
		p.release(ctx)
		return nil, fmt.Errorf("%s plugin: create from snapshot %q: %w", p.opts.Name, spec.Snapshot, providers.ErrNotSupported)
	}
	var res sandboxResult
	if err := proc.call(ctx, "create", params, &res, p.opts.CreateTimeout); err != nil {
		p.release(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s plugin: create: %w", p.opts.Name, errors.Join(ctx.Err(), err))
		}
		return nil, mapErr(err)
	}
	sb, err := p.handle(proc, res, wd, spec.Env, true)
	if err != nil {
		err = remote.Undo(ctx, err, func(ctx context.Context) error { return p.deleteWith(ctx, proc, res.SandboxID) })
		p.release(ctx)
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Cancelled while the plugin was creating: undo it rather than hand it out.
		err = remote.Undo(ctx, fmt.Errorf("%s plugin: create: %w", p.opts.Name, err), sb.Close)
		return nil, err
	}
	return sb, nil
}

// Attach connects to an existing sandbox; plugins without the attach capability return
// providers.ErrNotSupported.
func (p *Provider) Attach(ctx context.Context, id string, opts providers.AttachOptions) (providers.Sandbox, error) {
	proc, err := p.hold(ctx)
	if err != nil {
		return nil, err
	}
	if !proc.caps.Attach {
		p.release(ctx)
		return nil, fmt.Errorf("%s plugin: attach: %w", p.opts.Name, providers.ErrNotSupported)
	}
	var res sandboxResult
	if err := proc.call(ctx, "attach", sandboxRef{SandboxID: id}, &res, p.opts.CreateTimeout); err != nil {
		p.release(ctx)
		return nil, mapErr(err)
	}
	if res.SandboxID == "" {
		res.SandboxID = id
	}
	sb, err := p.handle(proc, res, cmp.Or(opts.WorkDir, p.opts.WorkingDir), nil, false)
	if err != nil {
		p.release(ctx)
		return nil, err
	}
	return sb, nil
}

// handle wraps a created or attached sandbox; it keeps the hold taken for it.
func (p *Provider) handle(proc *process, res sandboxResult, wd string, env map[string]string, owned bool) (*sandbox, error) {
	if res.SandboxID == "" {
		return nil, &ProcessError{Provider: p.opts.Name, Op: "create", Reason: "the plugin answered without a sandbox_id", Stderr: proc.tail.String()}
	}
	if res.WorkingDir != "" {
		wd = res.WorkingDir
	}
	if wd == "" {
		wd = DefaultWorkDir
	}
	if !path.IsAbs(wd) {
		return nil, &ProcessError{Provider: p.opts.Name, Op: "create", Reason: fmt.Sprintf("the plugin's working_dir %q is not absolute", wd), Stderr: proc.tail.String()}
	}
	closed, markClosed := context.WithCancel(context.Background())
	d := &driver{p: p, id: res.SandboxID, workDir: wd, closed: closed}
	rs := remote.New(remote.Config{
		Provider: p.opts.Name, ID: res.SandboxID, WorkDir: wd, Owned: owned, Env: env,
		SplitStderr: proc.caps.CombinedOutput,
		// The plugin caps each stream at outputLimit; longer output is kept in files.
		KeepLines: math.MaxInt32, KeepBytes: outputLimit,
	}, d)
	return &sandbox{Sandbox: rs, p: p, markClosed: markClosed}, nil
}

// deleteWith deletes id on proc; a sandbox that is already gone is not an error.
func (p *Provider) deleteWith(ctx context.Context, proc *process, id string) error {
	err := proc.call(ctx, "delete", sandboxRef{SandboxID: id}, nil, p.opts.CallTimeout)
	if isCode(err, codeNotFound) {
		return nil
	}
	return err
}

// List returns the sandboxes the plugin finds with talkops' created-by label, for
// `talkops sandbox ls|gc`. Plugins without the list capability return
// providers.ErrNotSupported.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	proc, err := p.hold(ctx)
	if err != nil {
		return nil, err
	}
	defer p.release(ctx)
	if !proc.caps.List {
		return nil, fmt.Errorf("%s plugin: list: %w", p.opts.Name, providers.ErrNotSupported)
	}
	var res listResult
	if err := proc.call(ctx, "list", listParams{Labels: map[string]string{providers.LabelCreatedBy: "talkops"}}, &res, p.opts.CallTimeout); err != nil {
		return nil, mapErr(err)
	}
	out := make([]providers.Info, 0, len(res.Sandboxes))
	for _, s := range res.Sandboxes {
		if s.Labels[providers.LabelCreatedBy] != "talkops" {
			continue // the filter is the plugin's job; talkops checks anyway
		}
		out = append(out, remote.InfoFromLabels(p.opts.Name, s.ID, s.State, s.CreatedAt, s.Labels))
	}
	return out, nil
}

// Delete removes a sandbox by id; one already gone is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	proc, err := p.hold(ctx)
	if err != nil {
		return err
	}
	defer p.release(ctx)
	return mapErr(p.deleteWith(ctx, proc, id))
}

// sandbox is a remote sandbox whose Close also lets the plugin stop.
type sandbox struct {
	*remote.Sandbox
	p          *Provider
	markClosed context.CancelFunc
	once       sync.Once
}

// Close deletes the sandbox (when created here) and drops its hold on the plugin, which
// stops when nothing else needs it. A failed delete is returned; a later Close retries it
// with a freshly started plugin.
func (s *sandbox) Close(ctx context.Context) error {
	err := s.Sandbox.Close(ctx)
	s.once.Do(func() {
		// Calls still waiting on the plugin (an exec the backend did not stop) return now.
		s.markClosed()
		s.p.release(ctx)
	})
	return err
}

// driver maps remote's four calls onto plugin operations.
type driver struct {
	p       *Provider
	id      string
	workDir string
	closed  context.Context // done once the sandbox is closed
}

var (
	_ remote.Driver      = (*driver)(nil)
	_ remote.TarUploader = (*driver)(nil)
)

func (d *driver) Run(ctx context.Context, r remote.Run) (remote.Result, error) {
	params := execParams{SandboxID: d.id, Command: r.Script, Workdir: d.workDir, OutputLimit: outputLimit}
	var deadline time.Duration
	if r.Timeout > 0 {
		params.TimeoutSeconds = int64(math.Ceil(r.Timeout.Seconds()))
		deadline = time.Duration(params.TimeoutSeconds)*time.Second + d.p.opts.ExecGrace
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(d.closed, cancel)() //nolint:contextcheck // d.closed only signals Close; ctx stays the caller's

	var res execResult
	if err := d.p.do(ctx, "exec", params, &res, deadline); err != nil {
		if d.closed.Err() != nil {
			return remote.Result{}, fmt.Errorf("%w: %w", err, providers.ErrClosed)
		}
		return remote.Result{}, mapErr(err)
	}
	return remote.Result{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Truncated: res.Truncated}, nil
}

func (d *driver) WriteFile(ctx context.Context, p string, body *httpapi.Body) error {
	return d.upload(ctx, p, false, body)
}

func (d *driver) UploadTarGz(ctx context.Context, dir string, body *httpapi.Body) error {
	return d.upload(ctx, dir, true, body)
}

// upload streams body to the plugin in chunks of at most chunkSize bytes.
func (d *driver) upload(ctx context.Context, p string, extract bool, body *httpapi.Body) error {
	proc, err := d.p.hold(ctx)
	if err != nil {
		return err
	}
	defer d.p.release(ctx)
	rc, err := body.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	var begin uploadBeginResult
	if err := proc.call(ctx, "upload_begin", uploadBeginParams{SandboxID: d.id, Path: p, Extract: extract, Size: body.Size}, &begin, d.p.opts.CallTimeout); err != nil {
		return mapErr(err)
	}
	ref := uploadRef(begin)
	buf := make([]byte, chunkSize)
	for {
		n, rerr := io.ReadFull(rc, buf)
		if n > 0 {
			if err := proc.call(ctx, "upload_chunk", uploadChunkParams{UploadID: begin.UploadID, Data: buf[:n]}, nil, d.p.opts.CallTimeout); err != nil {
				d.abort(ctx, proc, ref)
				return mapErr(err)
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			d.abort(ctx, proc, ref)
			return rerr
		}
	}
	return mapErr(proc.call(ctx, "upload_end", ref, nil, d.p.opts.CallTimeout))
}

// abort tells the plugin to drop a half-sent upload, best effort.
func (d *driver) abort(ctx context.Context, proc *process, ref uploadRef) {
	_ = proc.call(context.WithoutCancel(ctx), "upload_abort", ref, nil, d.p.opts.CallTimeout)
}

func (d *driver) ReadFile(ctx context.Context, p string) (io.ReadCloser, error) {
	proc, err := d.p.hold(ctx)
	if err != nil {
		return nil, err
	}
	r := &reader{d: d, proc: proc, path: p}
	// Read the first piece now: a missing file is an error of ReadFile, not of Read.
	if err := r.fetch(ctx); err != nil {
		d.p.release(ctx)
		return nil, err
	}
	return r, nil
}

func (d *driver) Delete(ctx context.Context) error {
	return mapErr(d.p.do(ctx, "delete", sandboxRef{SandboxID: d.id}, nil, d.p.opts.CallTimeout))
}

// reader reads a file piece by piece; it holds the plugin until closed.
type reader struct {
	d      *driver
	proc   *process
	path   string
	off    int64
	buf    []byte
	eof    bool
	err    error
	closed sync.Once
}

func (r *reader) fetch(ctx context.Context) error {
	var res readResult
	err := r.proc.call(ctx, "read", readParams{SandboxID: r.d.id, Path: r.path, Offset: r.off, Length: chunkSize}, &res, r.d.p.opts.CallTimeout)
	if err != nil {
		if isCode(err, codeNotFound) {
			return fmt.Errorf("%w: %w", err, fs.ErrNotExist)
		}
		return mapErr(err)
	}
	if len(res.Data) > chunkSize {
		return &ProcessError{Provider: r.d.p.opts.Name, Op: "read", Reason: fmt.Sprintf("the plugin sent %d bytes for a read of at most %d", len(res.Data), chunkSize)}
	}
	if len(res.Data) == 0 && !res.EOF {
		return &ProcessError{Provider: r.d.p.opts.Name, Op: "read", Reason: "the plugin sent no data and no eof"}
	}
	r.buf, r.eof = res.Data, res.EOF
	r.off += int64(len(res.Data))
	return nil
}

func (r *reader) Read(b []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.eof {
			return 0, io.EOF
		}
		if err := r.fetch(context.Background()); err != nil {
			r.err = err
		}
	}
	n := copy(b, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *reader) Close() error {
	r.closed.Do(func() { r.d.p.release(context.Background()) })
	return nil
}

// isCode reports whether err is the plugin's error answer with code.
func isCode(err error, code string) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Code == code
}

// mapErr turns the plugin's not_found and not_supported answers into the sentinel errors.
func mapErr(err error) error {
	var ce *CallError
	if !errors.As(err, &ce) {
		return err
	}
	switch ce.Code {
	case codeNotFound:
		return fmt.Errorf("%w: %w", err, providers.ErrNotFound)
	case codeNotSupported:
		return fmt.Errorf("%w: %w", err, providers.ErrNotSupported)
	}
	return err
}
