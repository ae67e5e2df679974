// Package providers defines the sandbox contract that every sandbox provider implements:
// a Provider creates or attaches Sandboxes, and a Sandbox runs commands and moves files.
//
// The contract is deliberately small so that a local process runner, a container engine and
// a remote HTTP service (create → wait until ready → exec over HTTP → upload a tar → delete)
// all fit it without change. Optional abilities are separate interfaces that callers probe
// for at run time (Lister). Everything the agent's file tools need is built on top of Exec,
// Upload and Download, so a new provider is only this contract.
package providers

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrNotSupported is returned by an optional operation the provider cannot perform,
	// such as Attach on a provider without sandbox ids.
	ErrNotSupported = errors.New("not supported by this provider")
	// ErrClosed is returned by any operation on a Sandbox after Close.
	ErrClosed = errors.New("sandbox is closed")
	// ErrNotFound is returned by Attach or Delete when no sandbox has the id.
	ErrNotFound = errors.New("sandbox not found")
	// ErrConfig is wrapped by a provider constructor when a setting or a credential is
	// missing or invalid. Nothing was created; the CLI maps it to a usage error (exit 2).
	ErrConfig = errors.New("invalid provider configuration")
)

// Label keys every created sandbox carries (as labels, tags, metadata or name, whatever the
// provider supports), so that `talkops sandbox gc` can find what a killed run left behind.
const (
	LabelRunID     = "talkops.run-id"
	LabelExpiresAt = "talkops.expires-at" // RFC 3339, UTC
	LabelCreatedBy = "talkops.created-by" // always "talkops"
)

// Label keys that let gc tell an orphan from a sandbox whose run is still going: the PID
// of the talkops process that created it and the host it ran on. Providers whose
// sandboxes are host-local add them (as labels, or when listing from their own records).
const (
	LabelOwnerPID  = "talkops.owner-pid"
	LabelOwnerHost = "talkops.owner-host"
)

// Provider creates and attaches sandboxes of one kind.
type Provider interface {
	// Name is the provider's id as the user types it: "local", "docker", "daytona", ...
	Name() string
	// Create provisions a new sandbox and returns once it is ready to Exec. The sandbox is
	// owned by the caller: Close deletes it. If Create fails after something was allocated
	// remotely, Create deletes it before returning the error.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Attach connects to an existing sandbox by id. Close on an attached sandbox releases
	// local resources only and never deletes the sandbox. Providers without ids return
	// ErrNotSupported; an unknown id is ErrNotFound.
	Attach(ctx context.Context, id string, opts AttachOptions) (Sandbox, error)
}

// AttachOptions are what a run asks of a sandbox it attaches to.
type AttachOptions struct {
	// WorkDir overrides the provider's documented working directory when non-empty, as
	// Spec.WorkDir does for Create. Providers whose sandboxes record their own working
	// directory at creation (bwrap, the fake) keep that one.
	WorkDir string
}

// Capabilities are what a provider can do beyond creating a sandbox, so that flags it
// cannot honour are rejected before anything is provisioned.
type Capabilities struct {
	Attach          bool // connects to a running sandbox by id (--sandbox-id)
	Snapshot        bool // creates from a named snapshot, blueprint or image (--sandbox-snapshot-name)
	DefaultSnapshot bool // the seeds' default snapshot name means something to it
	OwnFilesystem   bool // its sandboxes have their own file system: the workspace is synced in
	List            bool // lists the sandboxes it created (providers.Lister), for sandbox ls and gc
	TTL             bool // gives a sandbox a server-side lifetime from Spec.TTL
	// BinaryOutput: Exec returns stdout byte for byte. Without it (output arrives as JSON
	// text) an archive of the workspace comes back through a file and Download.
	BinaryOutput bool
}

// Capable is a provider that states its capabilities. A provider that does not states
// none: it can only create sandboxes that share the host's file system.
type Capable interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns what p can do.
func CapabilitiesOf(p Provider) Capabilities {
	if c, ok := p.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// Prober is a provider that learns what it can do only once it runs (a plugin answers
// in its handshake). Capabilities then says what it may be able to do; Probe what it can.
type Prober interface {
	Probe(ctx context.Context) (Capabilities, error)
}

// Spec describes the sandbox the runner wants. Provider-specific settings (image, limits,
// endpoints) are given to the provider's constructor, not here.
type Spec struct {
	// RunID identifies the talkops run; it goes into the sandbox's labels and name.
	RunID string
	// Labels are set on the sandbox where the provider supports labels. They always
	// include LabelRunID, LabelExpiresAt and LabelCreatedBy.
	Labels map[string]string
	// TTL is the server-side lifetime backstop, for providers that support one.
	TTL time.Duration
	// Snapshot is the snapshot, blueprint or image to create from; "" is the provider's
	// default. Providers that cannot create from a snapshot return ErrNotSupported.
	Snapshot string
	// WorkDir overrides the provider's documented working directory when non-empty.
	WorkDir string
	// ProjectDir is the project root on the host. Only host-backed providers (local)
	// run in it; the others receive the project through Upload.
	ProjectDir string
	// Env is set in every command's environment. The host's environment is never
	// forwarded; only what the user named ends up here.
	Env map[string]string
	// Caches are host directories to share with the sandbox, each behind a per-sandbox
	// copy-on-write layer that is discarded with the sandbox. Providers that cannot share
	// host directories ignore them (see CacheSharer).
	Caches []Cache
}

// Cache is a host directory (a package or build cache) shown inside a sandbox at Path.
// The sandbox's writes land in a layer of its own, so the host copy is never changed and
// a poisoned cache never reaches the next run.
type Cache struct {
	// Name identifies the cache in messages and results ("go-mod", "npm", ...).
	Name string `json:"name"`
	// HostDir is the absolute host directory shared read-only as the lower layer. "" is a
	// tool's home whose cache parts are other caches below Path: the sandbox sees an empty
	// directory of its own there, writable and discarded with it, and nothing of the host's.
	HostDir string `json:"host_dir"`
	// Path is where the sandbox sees it (absolute).
	Path string `json:"path"`
	// Env points the tools at Path inside the sandbox (GOMODCACHE=..., ...).
	Env map[string]string `json:"env,omitempty"`
}

// CacheSharer is implemented by sandboxes that honour Spec.Caches. SharedCaches reports
// which caches are mounted, and why the others are not.
type CacheSharer interface {
	SharedCaches() (shared []Cache, notes []string)
}

// TeardownNoter is implemented by sandboxes whose Close can leave part of the deletion to
// the backend after it returns (a docker engine still deleting a volume's files).
// TeardownNote says what was left, "" when nothing; it is read after Close.
type TeardownNoter interface {
	TeardownNote() string
}

// ProjectLayerer is implemented by sandboxes on this machine that can show the project
// itself as the read-only lower layer of a copy-on-write workspace instead of receiving a
// copy: nothing is copied at create time, and teardown removes only what the run wrote.
type ProjectLayerer interface {
	// LayerProject makes the working directory show the host directory project as the
	// sync plan selected it (view). The host directory is never written. It must be
	// called before anything is written to the working directory. When the machine
	// cannot layer (no overlay in an unprivileged namespace, say) it returns an error
	// wrapping ErrNotSupported that says why, and the caller uploads a copy instead.
	LayerProject(ctx context.Context, project string, view ProjectView) error
}

// ProjectView is the sync plan's selection of a project, for a ProjectLayerer. Paths are
// slash-separated and relative to the project.
type ProjectView struct {
	// Kept lists every entry the plan sends (directories, files, symlinks), each
	// directory before its entries. An entry that appears in the project later is not
	// in it, whatever the rules would say.
	Kept []string
	// Hidden lists the topmost paths left out (a directory hides all below it).
	Hidden []string
}

// PlainTarUploader is implemented by sandboxes that can take the workspace as an
// uncompressed tar, for when compressing it would only burn CPU (a container engine on a
// local socket, say). Sync asks PlainTarUpload first and uses UploadTar only when it
// reports true; otherwise the archive goes gzip-compressed through Upload.
type PlainTarUploader interface {
	// PlainTarUpload reports whether UploadTar is the cheaper way in for this sandbox.
	PlainTarUpload() bool
	// UploadTar is Upload for an uncompressed tar stream.
	UploadTar(ctx context.Context, dir string, tar io.Reader) error
}

// Sandbox is one running sandbox. All methods are safe for concurrent use.
type Sandbox interface {
	// ID is the provider's id for the sandbox ("" is never valid).
	ID() string
	// WorkDir is the absolute working directory inside the sandbox; relative paths in
	// Cmd.Dir, Upload and Download are resolved against it.
	WorkDir() string
	// Exec runs a command and waits for it. A command that runs and exits non-zero, or
	// hits Cmd.Timeout, is a result, not an error: err is reserved for infrastructure
	// failures. When ctx is cancelled Exec kills the command and returns ctx.Err()
	// (wrapped) promptly.
	Exec(ctx context.Context, cmd Cmd) (ExecResult, error)
	// Upload extracts a gzip-compressed tar stream into dir (created if missing).
	Upload(ctx context.Context, dir string, tgz io.Reader) error
	// Download opens one regular file for reading. A missing file is an error wrapping
	// fs.ErrNotExist.
	Download(ctx context.Context, path string) (io.ReadCloser, error)
	// Close kills running commands and deletes the sandbox if this process created it.
	// It is idempotent: the second call returns nil. It must work on a context that is
	// not cancelled even when the run's context was.
	Close(ctx context.Context) error
}

// Cmd is one command to run in a sandbox.
type Cmd struct {
	// Argv is the program and its arguments; Argv[0] is looked up on the sandbox's PATH.
	// Use Shell for a shell string.
	Argv []string
	// Dir is the working directory: relative to the sandbox WorkDir, or absolute.
	Dir string
	// Env is added to the sandbox's base environment for this command only.
	Env map[string]string
	// Stdin is fed to the command; nil means empty stdin.
	Stdin io.Reader
	// Timeout bounds the command; 0 means only ctx bounds it. On timeout the whole
	// process tree is killed and ExecResult.TimedOut is true with ExitCode 124.
	Timeout time.Duration
	// Stdout and Stderr, when set, receive output as it is produced, in addition to
	// the captured copies in ExecResult.
	Stdout, Stderr io.Writer
	// OutputLimit caps each captured stream in ExecResult (head and tail are kept, the
	// middle is dropped and Truncated set). 0 means DefaultOutputLimit.
	OutputLimit int
}

// DefaultOutputLimit is the per-stream capture cap when Cmd.OutputLimit is 0.
const DefaultOutputLimit = 1 << 20

// Shell returns a Cmd that runs script with /bin/sh -c.
func Shell(script string) Cmd {
	return Cmd{Argv: []string{"/bin/sh", "-c", script}}
}

// ExecResult is the outcome of a command that ran.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// TimedOut is set when Cmd.Timeout killed the command (ExitCode is then 124).
	TimedOut bool
	// Truncated is set when either stream exceeded Cmd.OutputLimit.
	Truncated bool
	Duration  time.Duration
}

// Lister is implemented by providers that can find the sandboxes talkops created, for
// `talkops sandbox ls` and `talkops sandbox gc`.
type Lister interface {
	// List returns the sandboxes that carry LabelCreatedBy (filtered server-side where the
	// API allows, client-side otherwise).
	List(ctx context.Context) ([]Info, error)
	// Delete removes a sandbox by id. Deleting one that is already gone is not an error.
	Delete(ctx context.Context, id string) error
}

// Info describes a sandbox found by a Lister.
type Info struct {
	Provider  string            `json:"provider"`
	ID        string            `json:"id"`
	RunID     string            `json:"run_id,omitempty"`
	CreatedAt time.Time         `json:"created_at,omitzero"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
	State     string            `json:"state,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}
