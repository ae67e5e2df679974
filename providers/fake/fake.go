// Package fake is a sandbox provider for tests only: runner tests, the fault matrix and
// the reaper's tests use it to check that every sandbox created is deleted, whatever fails
// and whenever a signal arrives.
//
// Commands really run (each sandbox is a providers/local sandbox in its own temporary
// directory, which Close deletes), and the provider keeps a ledger of every Create,
// Attach and delete: in memory, and optionally in a JSON file (Options.LedgerFile) that
// another process can read, so a test can run the real talkops binary and then check
// the ledger for leaks. Faults are injected per stage through Options.Faults: an error or
// a delay on Create, an error on the Nth Exec or Upload, a delay before every Exec, a
// Close that fails the first K times, a delay in Close.
//
// The provider also implements providers.Lister, backed by the ledger. Like a remote
// delete, its Delete kills the sandbox's commands even when the process that ran them
// is gone: the inner local provider records their process groups under Options.Dir.
//
// A release binary never contains it: only a binary built with -tags
// talkops_testprovider (or the CLI's in-process tests) adds it, through CLIProviders, and
// only when TALKOPS_TEST_FAKE_PROVIDER=1 is set; the CLI then builds it with FromEnv, which reads
// TALKOPS_TEST_FAKE_DIR, TALKOPS_TEST_FAKE_LEDGER and TALKOPS_TEST_FAKE_FAULTS (see
// ParseFaults).
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

// Name is the provider's name.
const Name = "fake"

// Environment variables FromEnv reads.
const (
	EnvEnable = "TALKOPS_TEST_FAKE_PROVIDER" // "1" puts the fake in a test build's providers
	EnvDir    = "TALKOPS_TEST_FAKE_DIR"      // Options.Dir
	EnvLedger = "TALKOPS_TEST_FAKE_LEDGER"   // Options.LedgerFile
	EnvFaults = "TALKOPS_TEST_FAKE_FAULTS"   // Options.Faults, in ParseFaults syntax
)

// ErrInjected is wrapped by every error the fake returns because of a configured fault.
var ErrInjected = errors.New("fake: injected fault")

// Faults configure what goes wrong. The zero value injects nothing. Counts are per
// Provider and 1-based.
type Faults struct {
	// CreateErr, when set, is returned (wrapped) by every Create before anything is
	// allocated.
	CreateErr error
	// CreateDelay is waited (honouring ctx) at the start of Create.
	CreateDelay time.Duration
	// ExecFailAt makes the Nth Exec on the provider fail with an error wrapping
	// ErrInjected without running the command; 0 disables.
	ExecFailAt int
	// ExecDelay is waited (honouring ctx) before every command runs.
	ExecDelay time.Duration
	// UploadFailAt makes the Nth Upload fail with an error wrapping ErrInjected; 0
	// disables.
	UploadFailAt int
	// CloseFailures makes the first K Close calls on created sandboxes fail with an
	// error wrapping ErrInjected; the sandbox stays alive and usable.
	CloseFailures int
	// CloseDelay is waited (honouring ctx) before a created sandbox is deleted. If ctx
	// ends first, Close returns its error and the sandbox stays alive.
	CloseDelay time.Duration
}

// Options configure the provider.
type Options struct {
	// Dir holds one working directory per sandbox, and in LocalStateDir the records of
	// their commands' process groups; "" means a "talkops-fake" directory in
	// os.TempDir().
	Dir string
	// LedgerFile, when set, is a JSON file holding the ledger, shared with other
	// processes (updates take a file lock). Without it the ledger is in memory only.
	LedgerFile string
	// Faults to inject.
	Faults Faults
}

// LocalStateDir is the directory under Options.Dir where the inner local provider records
// the sandboxes' running process groups (see local.Options.StateDir).
const LocalStateDir = ".local-state"

// Provider is the fake provider. It is safe for concurrent use.
type Provider struct {
	opts   Options
	local  *local.Provider
	ledger *ledger

	mu        sync.Mutex
	execs     int
	uploads   int
	closeFail int
	owned     map[string]*sandbox // created by this Provider and not yet deleted
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New returns a fake provider.
func New(opts Options) *Provider {
	if opts.Dir == "" {
		opts.Dir = filepath.Join(os.TempDir(), "talkops-fake")
	}
	return &Provider{
		opts:   opts,
		local:  local.New(local.Options{StateDir: filepath.Join(opts.Dir, LocalStateDir)}),
		ledger: &ledger{path: opts.LedgerFile, mem: map[string]Record{}},
		owned:  map[string]*sandbox{},
	}
}

// FromEnv builds the provider the CLI uses when TALKOPS_TEST_FAKE_PROVIDER=1, from
// TALKOPS_TEST_FAKE_DIR, TALKOPS_TEST_FAKE_LEDGER and TALKOPS_TEST_FAKE_FAULTS.
func FromEnv(getenv func(string) string) (*Provider, error) {
	faults, err := ParseFaults(getenv(EnvFaults))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvFaults, err)
	}
	return New(Options{Dir: getenv(EnvDir), LedgerFile: getenv(EnvLedger), Faults: faults}), nil
}

// Name returns "fake".
func (p *Provider) Name() string { return Name }

// Ledger returns every sandbox this provider (or, with a ledger file, any process
// sharing the file) created, deleted ones included, oldest first.
func (p *Provider) Ledger() ([]Record, error) { return p.ledger.records() }

// Alive returns the ids of the sandboxes in the ledger that were not deleted.
func (p *Provider) Alive() ([]string, error) {
	recs, err := p.ledger.records()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range recs {
		if r.DeletedAt.IsZero() {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// Create makes a working directory, records the sandbox in the ledger and returns it.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: create: %w", err)
	}
	f := p.opts.Faults
	if err := sleep(ctx, f.CreateDelay); err != nil {
		return nil, fmt.Errorf("fake: create: %w", err)
	}
	if f.CreateErr != nil {
		return nil, fmt.Errorf("fake: create: %w", errors.Join(ErrInjected, f.CreateErr))
	}
	if spec.Snapshot != "" {
		return nil, fmt.Errorf("fake: create from snapshot %q: %w", spec.Snapshot, providers.ErrNotSupported)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := "fake-" + hex.EncodeToString(b)
	wd := filepath.Join(p.opts.Dir, id)
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, fmt.Errorf("fake: create: %w", err)
	}
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, fmt.Errorf("fake: create: %w", err)
	}
	rec := Record{ID: id, RunID: spec.RunID, Labels: maps.Clone(spec.Labels), WorkDir: wd, CreatedAt: time.Now().UTC()}
	if err := p.ledger.put(rec); err != nil {
		os.RemoveAll(wd)
		return nil, fmt.Errorf("fake: create: %w", err)
	}
	sb, err := p.open(ctx, rec, spec.Env, false)
	if err != nil {
		os.RemoveAll(wd)
		_ = p.ledger.markDeleted(id)
		return nil, fmt.Errorf("fake: create: %w", err)
	}
	p.mu.Lock()
	p.owned[id] = sb
	p.mu.Unlock()
	return sb, nil
}

func (p *Provider) open(ctx context.Context, rec Record, env map[string]string, attached bool) (*sandbox, error) {
	inner, err := p.local.Create(ctx, providers.Spec{RunID: rec.ID, ProjectDir: rec.WorkDir, Env: env})
	if err != nil {
		return nil, err
	}
	return &sandbox{p: p, id: rec.ID, inner: inner, attached: attached}, nil
}

// Attach returns a handle on a sandbox in the ledger (created by this or, with a ledger
// file, another process). Closing it never deletes the sandbox. An unknown or deleted id
// is providers.ErrNotFound.
func (p *Provider) Attach(ctx context.Context, id string, _ providers.AttachOptions) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: attach %s: %w", id, err)
	}
	rec, ok, err := p.ledger.get(id)
	if err != nil {
		return nil, fmt.Errorf("fake: attach %s: %w", id, err)
	}
	if !ok || !rec.DeletedAt.IsZero() {
		return nil, fmt.Errorf("fake: attach %s: %w", id, providers.ErrNotFound)
	}
	if err := p.ledger.update(id, func(r *Record) { r.Attaches++ }); err != nil {
		return nil, fmt.Errorf("fake: attach %s: %w", id, err)
	}
	sb, err := p.open(ctx, rec, nil, true)
	if err != nil {
		return nil, fmt.Errorf("fake: attach %s: %w", id, err)
	}
	return sb, nil
}

// List returns the sandboxes in the ledger that were not deleted.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	recs, err := p.ledger.records()
	if err != nil {
		return nil, fmt.Errorf("fake: list: %w", err)
	}
	var out []providers.Info
	for _, r := range recs {
		if !r.DeletedAt.IsZero() {
			continue
		}
		info := providers.Info{Provider: Name, ID: r.ID, RunID: r.RunID, CreatedAt: r.CreatedAt, State: "running", Labels: maps.Clone(r.Labels)}
		if t, err := time.Parse(time.RFC3339, r.Labels[providers.LabelExpiresAt]); err == nil {
			info.ExpiresAt = t
		}
		out = append(out, info)
	}
	return out, nil
}

// Delete deletes a sandbox by id, killing its commands, whichever process started them
// (this one, a killed one, or one with an attached handle). Deleting one that is already
// gone is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	p.mu.Lock()
	sb := p.owned[id]
	p.mu.Unlock()
	if sb != nil {
		return sb.delete(ctx)
	}
	rec, ok, err := p.ledger.get(id)
	if err != nil {
		return fmt.Errorf("fake: delete %s: %w", id, err)
	}
	if !ok || !rec.DeletedAt.IsZero() {
		return nil
	}
	if err := p.reapLocal(ctx, id); err != nil {
		return fmt.Errorf("fake: delete %s: %w", id, err)
	}
	if err := os.RemoveAll(rec.WorkDir); err != nil {
		return fmt.Errorf("fake: delete %s: %w", id, err)
	}
	if err := p.ledger.markDeleted(id); err != nil {
		return fmt.Errorf("fake: delete %s: %w", id, err)
	}
	return nil
}

// reapLocal kills the commands that any process runs in the fake sandbox id: each
// handle on it (created or attached) is a local sandbox whose run id is id.
func (p *Provider) reapLocal(ctx context.Context, id string) error {
	infos, err := p.local.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, in := range infos {
		if in.RunID == id {
			errs = append(errs, p.local.Delete(ctx, in.ID))
		}
	}
	return errors.Join(errs...)
}

// countExec returns whether this Exec is the one that must fail.
func (p *Provider) countExec() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.execs++
	return p.execs == p.opts.Faults.ExecFailAt
}

func (p *Provider) countUpload() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.uploads++
	return p.uploads == p.opts.Faults.UploadFailAt
}

// closeShouldFail consumes one of the configured Close failures.
func (p *Provider) closeShouldFail() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closeFail < p.opts.Faults.CloseFailures {
		p.closeFail++
		return true
	}
	return false
}

type sandbox struct {
	p        *Provider
	id       string
	inner    providers.Sandbox
	attached bool

	mu      sync.Mutex
	deleted bool
}

var _ providers.Sandbox = (*sandbox)(nil)

func (s *sandbox) ID() string      { return s.id }
func (s *sandbox) WorkDir() string { return s.inner.WorkDir() }

func (s *sandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	if s.p.countExec() {
		return providers.ExecResult{}, fmt.Errorf("fake: exec %q: %w", cmd.Argv, ErrInjected)
	}
	if err := sleep(ctx, s.p.opts.Faults.ExecDelay); err != nil {
		return providers.ExecResult{}, fmt.Errorf("fake: exec %q: %w", cmd.Argv, err)
	}
	return s.inner.Exec(ctx, cmd)
}

func (s *sandbox) Upload(ctx context.Context, dir string, tgz io.Reader) error {
	if s.p.countUpload() {
		return fmt.Errorf("fake: upload to %q: %w", dir, ErrInjected)
	}
	return s.inner.Upload(ctx, dir, tgz)
}

func (s *sandbox) Download(ctx context.Context, path string) (io.ReadCloser, error) {
	return s.inner.Download(ctx, path)
}

// Close of an attached handle releases it; Close of a created sandbox deletes it, subject
// to the configured faults.
func (s *sandbox) Close(ctx context.Context) error {
	if s.attached {
		return s.inner.Close(ctx)
	}
	s.mu.Lock()
	done := s.deleted
	s.mu.Unlock()
	if done {
		return nil
	}
	if s.p.closeShouldFail() {
		return fmt.Errorf("fake: close %s: %w", s.id, ErrInjected)
	}
	if err := sleep(ctx, s.p.opts.Faults.CloseDelay); err != nil {
		return fmt.Errorf("fake: close %s: %w", s.id, err)
	}
	return s.delete(ctx)
}

// delete kills the sandbox's commands, removes its directory and marks it deleted.
func (s *sandbox) delete(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return nil
	}
	if err := s.inner.Close(ctx); err != nil {
		return fmt.Errorf("fake: delete %s: %w", s.id, err)
	}
	if err := s.p.reapLocal(ctx, s.id); err != nil {
		return fmt.Errorf("fake: delete %s: %w", s.id, err)
	}
	if err := os.RemoveAll(s.inner.WorkDir()); err != nil {
		return fmt.Errorf("fake: delete %s: %w", s.id, err)
	}
	if err := s.p.ledger.markDeleted(s.id); err != nil {
		return fmt.Errorf("fake: delete %s: %w", s.id, err)
	}
	s.deleted = true
	s.p.mu.Lock()
	delete(s.p.owned, s.id)
	s.p.mu.Unlock()
	return nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Capabilities says what the fake provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, OwnFilesystem: true, List: true, BinaryOutput: true}
}
