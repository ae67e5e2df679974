// Package bwrap is the "bwrap" sandbox provider: every command runs in a fresh
// bubblewrap sandbox (user, mount, PID, IPC, UTS and network namespaces) over a private
// copy of the workspace, with the host's system directories read-only and resource limits
// enforced through cgroups or rlimits.
//
// A sandbox is a host directory holding the workspace, /tmp and the home directory; these
// persist between commands, processes do not (each Exec is one bwrap invocation, and the
// PID namespace dies with it). The host project is never mounted: the runner copies it in
// with Upload.
package bwrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
)

// Name is the provider id users type: --sandbox bwrap.
const Name = "bwrap"

// metaFile is the per-sandbox record that List reads back.
const metaFile = "talkops-sandbox.json"

// Provider creates bwrap sandboxes. Create one with New.
type Provider struct {
	opts Options

	probeMu sync.Mutex
	probed  string // bwrap path that passed the probe
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New returns a provider with opts. Invalid options are reported by Create (and by
// Options.Validate, for callers that want to fail earlier).
func New(opts Options) *Provider {
	return &Provider{opts: opts}
}

// Name returns "bwrap".
func (p *Provider) Name() string { return Name }

// meta is what a sandbox directory records about itself.
type meta struct {
	ID        string            `json:"id"`
	RunID     string            `json:"run_id,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at,omitzero"`
	PID       int               `json:"pid"`
	WorkDir   string            `json:"work_dir"`
	Limits    Limits            `json:"limits"`
	Cgroup    *cgroupMeta       `json:"cgroup,omitempty"`
	// Project is the host project shown as the working directory's lower layer, when
	// the workspace is layered (see LayerProject).
	Project string `json:"project,omitempty"`
	// Caches are the shared caches the sandbox was created with, as mounted, so that
	// Attach shows the same ones whatever the attaching run's configuration says.
	Caches []cacheMeta `json:"caches,omitempty"`
}

// cacheMeta is one mounted cache in the sandbox record. Slot names its directories
// under the sandbox directory (caches/<slot>, layers/cache-<slot>).
type cacheMeta struct {
	providers.Cache
	Slot string `json:"slot"`
}

type cgroupMeta struct {
	Version int    `json:"version"`
	Memory  string `json:"memory"`
	Pids    string `json:"pids"`
}

// stateDir is where sandbox directories live.
func (r resolved) baseDir() string {
	if r.stateDir != "" {
		return r.stateDir
	}
	return filepath.Join(os.TempDir(), "talkops-bwrap")
}

// Create makes the sandbox directory, its cgroup (when limits use one) and runs a probe
// command through the full profile, so that a broken host or option fails here rather
// than at the first command.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	r, err := p.opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("create bwrap sandbox: %w", err)
	}
	if spec.WorkDir != "" {
		if err := checkSandboxDir(spec.WorkDir); err != nil {
			return nil, fmt.Errorf("create bwrap sandbox: %w: work dir %q: %w", providers.ErrConfig, spec.WorkDir, err)
		}
		r.workDir = filepath.Clean(spec.WorkDir)
	}
	if err := checkEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("create bwrap sandbox: %w: %w", providers.ErrConfig, err)
	}
	// The namespaces are not probed on their own here: the probe command below runs the
	// full profile anyway, and only its failure pays for the diagnosis.
	bin, err := findBwrap(r)
	if err != nil {
		return nil, fmt.Errorf("create bwrap sandbox: %w", err)
	}
	r.bwrap = bin
	if r.rootfs != "" {
		if fi, err := os.Stat(r.rootfs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("create bwrap sandbox: %w: bwrap option rootfs = %q: not a directory", providers.ErrConfig, r.rootfs)
		}
	}

	id := newID(spec.RunID)
	base := r.baseDir()
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("create bwrap sandbox: %w", err)
	}
	// Link trees a killed run left in the trash go now, beside this run rather than in
	// its way. A failure leaves them for the next sweep.
	_ = sweepTrash(ctx, base, true)
	dir := filepath.Join(base, id)
	s := &Sandbox{id: id, dir: dir, owned: true, opts: r, env: spec.Env}
	if err := s.layout(); err != nil {
		return nil, errors.Join(fmt.Errorf("create bwrap sandbox: %w", err), os.RemoveAll(dir))
	}
	s.applyLimits()
	if r.limits == LimitsCgroup && s.cg == nil {
		err := fmt.Errorf("create bwrap sandbox: bwrap option limits = %q but no writable cgroup: %s; use limits = %q or %q, or run talkops as root",
			LimitsCgroup, s.limits.Note, LimitsAuto, LimitsRlimit)
		return nil, errors.Join(err, s.destroy())
	}
	m := meta{
		ID: id, RunID: spec.RunID, Labels: spec.Labels, CreatedAt: time.Now().UTC(),
		PID: os.Getpid(), WorkDir: r.workDir, Limits: s.limits,
	}
	if exp, err := time.Parse(time.RFC3339, spec.Labels[providers.LabelExpiresAt]); err == nil {
		m.ExpiresAt = exp.UTC()
	} else if spec.TTL > 0 {
		m.ExpiresAt = m.CreatedAt.Add(spec.TTL)
	}
	if s.cg != nil {
		m.Cgroup = &cgroupMeta{Version: s.cg.version, Memory: s.cg.memDir, Pids: s.cg.pidsDir}
	}
	if err := writeMeta(dir, m); err != nil {
		return nil, errors.Join(fmt.Errorf("create bwrap sandbox: %w", err), s.destroy())
	}
	if err := s.shareCaches(ctx, spec, p.opts.WorkingDir, &m); err != nil {
		s.holder.stop()
		return nil, errors.Join(fmt.Errorf("create bwrap sandbox: %w", err), s.destroy())
	}
	// The probe runs the real profile once: bad binds, a broken rootfs or a cgroup
	// that refuses processes show up now, with bwrap's own message.
	res, err := s.Exec(ctx, providers.Cmd{Argv: []string{"true"}, Timeout: 30 * time.Second})
	if err == nil && res.ExitCode != 0 && res.ExitCode != 127 {
		err = fmt.Errorf("probe command exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		s.holder.stop()
		if _, nsErr := p.ensureUsable(ctx, r); nsErr != nil && ctx.Err() == nil {
			// The host's namespaces, not this profile: say what to change, and keep
			// what the profile itself said.
			err = fmt.Errorf("%w (the sandbox's own start said: %w)", nsErr, err)
		}
		return nil, errors.Join(fmt.Errorf("create bwrap sandbox: %w", err), s.destroy())
	}
	return s, nil
}

// shareCaches mounts spec's caches, records them in m for Attach and, when no working
// directory is configured, moves the workspace to the project's own path: build caches
// key entries by the source directory (Go's action ids include it), so a workspace at
// /workspace would miss for every package of the project. It is still the overlay or
// copy there, never the host directory itself.
func (s *Sandbox) shareCaches(ctx context.Context, spec providers.Spec, workingDirOption string, m *meta) error {
	s.mountCaches(ctx, spec.Caches)
	if len(s.caches) == 0 {
		return nil
	}
	m.Caches = s.cacheRecord()
	if spec.ProjectDir != "" && spec.WorkDir == "" && workingDirOption == "" {
		dir, err := projectWorkDir(spec.ProjectDir, s.opts, s.caches)
		if err == nil {
			s.opts.workDir, m.WorkDir = dir, dir
		} else {
			s.cacheNotes = append(s.cacheNotes, cache.WorkDirNote(s.opts.workDir, err))
		}
	}
	return writeMeta(s.dir, *m)
}

// Attach reopens a sandbox directory left by another talkops process (by id, as
// listed by `talkops sandbox ls`). Close on it never deletes it.
func (p *Provider) Attach(ctx context.Context, id string, _ providers.AttachOptions) (providers.Sandbox, error) {
	r, err := p.opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("attach bwrap sandbox: %w", err)
	}
	if !validID(id) {
		return nil, fmt.Errorf("attach bwrap sandbox %q: %w", id, providers.ErrNotFound)
	}
	dir := filepath.Join(r.baseDir(), id)
	m, err := readMeta(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("attach bwrap sandbox %q: %w", id, providers.ErrNotFound)
		}
		return nil, fmt.Errorf("attach bwrap sandbox %q: %w", id, err)
	}
	bin, err := p.ensureUsable(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("attach bwrap sandbox: %w", err)
	}
	r.bwrap = bin
	r.workDir = m.WorkDir
	s := &Sandbox{id: id, dir: dir, opts: r, limits: m.Limits}
	s.limits.Mechanism = LimitsRlimit
	if m.Cgroup != nil {
		s.cg = &cgroup{version: m.Cgroup.Version, memDir: m.Cgroup.Memory, pidsDir: m.Cgroup.Pids}
		s.limits.Mechanism = map[int]string{1: LimitsCgroupV1, 2: LimitsCgroupV2}[m.Cgroup.Version]
	}
	if s.limits.Memory == 0 && s.limits.Pids == 0 && s.limits.CPUSeconds == 0 {
		s.limits.Mechanism = LimitsNone
	}
	if m.Project != "" || len(m.Caches) > 0 {
		// Layers live in their creator's mount namespace; mounting the same upper
		// directory twice would corrupt it.
		if m.PID != os.Getpid() && processAlive(m.PID) {
			return nil, fmt.Errorf("attach bwrap sandbox %q: its workspace or caches are layered and still in use by talkops process %d", id, m.PID)
		}
	}
	if m.Project != "" {
		if err := s.remountProject(ctx, m.Project); err != nil {
			s.holder.stop()
			return nil, fmt.Errorf("attach bwrap sandbox %q: %w", id, err)
		}
	}
	// The caches the sandbox was created with, not the attaching run's: its workspace
	// path and what its earlier commands wrote into the caches' layers depend on them.
	s.remountCaches(ctx, m.Caches)
	return s, nil
}

// List returns the sandbox directories under the state directory. A directory whose
// record cannot be read is still listed (state "unreadable") so that gc can remove it.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	r, err := p.opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("list bwrap sandboxes: %w", err)
	}
	ents, err := os.ReadDir(r.baseDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list bwrap sandboxes: %w", err)
	}
	var out []providers.Info
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("list bwrap sandboxes: %w", err)
		}
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		info := providers.Info{Provider: Name, ID: e.Name(), State: "unreadable"}
		if m, err := readMeta(filepath.Join(r.baseDir(), e.Name())); err == nil {
			info.RunID = m.RunID
			info.CreatedAt = m.CreatedAt
			info.ExpiresAt = m.ExpiresAt
			info.Labels = m.Labels
			info.State = "stopped"
			if processAlive(m.PID) {
				info.State = "running"
			}
			if info.Labels == nil {
				info.Labels = map[string]string{}
			}
			info.Labels[providers.LabelOwnerPID] = strconv.Itoa(m.PID)
		} else if fi, err := e.Info(); err == nil {
			info.CreatedAt = fi.ModTime().UTC()
		}
		out = append(out, info)
	}
	return out, nil
}

// Delete removes a sandbox directory and its cgroup. A missing one is not an error.
// Processes of the sandbox die with their bwrap parent; Delete does not signal anyone.
func (p *Provider) Delete(ctx context.Context, id string) error {
	r, err := p.opts.resolve()
	if err != nil {
		return fmt.Errorf("delete bwrap sandbox: %w", err)
	}
	if !validID(id) {
		return fmt.Errorf("delete bwrap sandbox %q: not a bwrap sandbox id", id)
	}
	dir := filepath.Join(r.baseDir(), id)
	s := &Sandbox{id: id, dir: dir, owned: true, opts: r}
	if m, err := readMeta(dir); err == nil && m.Cgroup != nil {
		s.cg = &cgroup{version: m.Cgroup.Version, memDir: m.Cgroup.Memory, pidsDir: m.Cgroup.Pids}
	}
	if err := s.destroy(); err != nil {
		return fmt.Errorf("delete bwrap sandbox %q: %w", id, err)
	}
	return nil
}

// processAlive reports whether pid names a live process on this host.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

var idRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^talkops-[a-z0-9-]{1,40}-[0-9a-f]{8}$`) })

func validID(id string) bool { return idRE().MatchString(id) }

// newID makes a sandbox id from the run id: "talkops-<run>-<8 hex>".
func newID(runID string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(runID) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= 24 {
			break
		}
	}
	run := strings.Trim(b.String(), "-")
	if run == "" {
		run = "run"
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "talkops-" + run + "-" + hex.EncodeToString(rnd[:])
}

func writeMeta(dir string, m meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, metaFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	return nil
}

func readMeta(dir string) (meta, error) {
	var m meta
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return m, fmt.Errorf("read sandbox record: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("read sandbox record %s: %w", filepath.Join(dir, metaFile), err)
	}
	return m, nil
}

// findBwrap finds the bwrap binary.
func findBwrap(r resolved) (string, error) {
	bin := r.bwrap
	if bin == "" {
		bin = "bwrap"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("bubblewrap (%s) not found: install it with `apt-get install -y bubblewrap` (Debian/Ubuntu), `dnf install bubblewrap` or `apk add bubblewrap`, or pick another --sandbox: %w", bin, err)
	}
	return path, nil
}

// ensureUsable finds bwrap and checks, once per provider, that it can create the
// namespaces the profile needs. Failures name the cause and the fix.
func (p *Provider) ensureUsable(ctx context.Context, r resolved) (string, error) {
	path, err := findBwrap(r)
	if err != nil {
		return "", err
	}
	p.probeMu.Lock()
	defer p.probeMu.Unlock()
	if p.probed == path {
		return path, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	args := append([]string{"--unshare-all", "--unshare-user", "--die-with-parent"}, hostSystemArgs()...)
	args = append(args, "--proc", "/proc", "--dev", "/dev",
		"--cap-drop", "ALL", "--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID), "--", "true")
	c := exec.CommandContext(pctx, path, args...)
	c.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("probe bubblewrap: %w", ctx.Err())
		}
		return "", fmt.Errorf("bubblewrap cannot create a sandbox on this host: %s: %w%s",
			strings.TrimSpace(stderr.String()), err, userNSHint())
	}
	p.probed = path
	return path, nil
}

// userNSHint explains the host settings that disable unprivileged user namespaces.
func userNSHint() string {
	var hints []string
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		hints = append(hints, "unprivileged user namespaces are disabled: `sysctl -w kernel.unprivileged_userns_clone=1`")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		hints = append(hints, "user namespaces are disabled: `sysctl -w user.max_user_namespaces=15000`")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		hints = append(hints, "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+, GitHub's ubuntu-24.04 runners): `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or run talkops as root")
	}
	if _, err := os.Stat("/.dockerenv"); err == nil {
		hints = append(hints, "inside a Docker container the default seccomp profile blocks namespaces: run the job container with `--security-opt seccomp=unconfined` (or --privileged), or use --sandbox docker against the host daemon")
	}
	if len(hints) == 0 {
		return " (check that user namespaces are enabled: `sysctl user.max_user_namespaces` must be > 0)"
	}
	return "; " + strings.Join(hints, "; ")
}

// Capabilities says what the bwrap provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, OwnFilesystem: true, List: true, BinaryOutput: true}
}
