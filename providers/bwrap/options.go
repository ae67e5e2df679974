package bwrap

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/docker/go-units"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
)

// Defaults applied when an Options field is left at its zero value.
const (
	DefaultWorkingDir = "/workspace"
	DefaultMemory     = "2g"
	DefaultPids       = 1024
	// DefaultPath is PATH inside the sandbox when Options.Path is "" (after the
	// ro_binds' bin directories).
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// HomeDir is the sandbox user's home directory. It is private to the sandbox and
	// persists between commands, like /tmp and the working directory.
	HomeDir = "/home/sandbox"
)

// Limit mechanisms, the values of Options.Limits and Limits.Mechanism.
const (
	LimitsAuto     = "auto"      // cgroup when writable, else rlimit
	LimitsCgroupV1 = "cgroup-v1" // reported only: cgroup v1 memory + pids controllers
	LimitsCgroupV2 = "cgroup-v2" // reported only: cgroup v2 memory + pids controllers
	LimitsCgroup   = "cgroup"    // require a cgroup (v1 or v2); Create fails without one
	LimitsRlimit   = "rlimit"    // setrlimit only: RLIMIT_AS, RLIMIT_NPROC, RLIMIT_CPU
	LimitsNone     = "none"      // no limits at all
)

// Values of Options.Overlay.
const (
	OverlayAuto = "auto"
	OverlayOff  = "off"
)

// Options configure the bwrap provider. The toml names are the keys of
// [sandboxes.providers.bwrap]; the zero value is a working default.
type Options struct {
	// Network shares the host's network namespace with the sandbox. Off by default: the
	// sandbox then has only a loopback interface of its own.
	Network bool `toml:"network"`
	// Memory caps the sandbox's memory: "512m", "2GiB" or a number of bytes. "" means
	// DefaultMemory, "0" means no limit. With cgroups it bounds resident memory (an
	// overrun is an OOM kill, exit 137); with rlimits it bounds each process's address
	// space (RLIMIT_AS) and is applied only when set explicitly, because runtimes such as
	// V8 and the JVM reserve far more address space than they use.
	Memory string `toml:"memory"`
	// Pids caps the number of processes and threads: 0 means DefaultPids, negative
	// means no limit. With rlimits it is RLIMIT_NPROC, which the kernel does not enforce
	// when talkops runs as root.
	Pids int `toml:"pids"`
	// CPUSeconds caps the CPU time of each command (RLIMIT_CPU; SIGXCPU, exit 152):
	// 0 means no limit. Wall-clock time is bounded by the command timeout instead.
	CPUSeconds int `toml:"cpu_seconds"`
	// Rootfs, when set, is a directory used read-only as the sandbox's root file system
	// (for example a debootstrap or busybox tree) instead of the host's /usr.
	Rootfs string `toml:"rootfs"`
	// WorkingDir is where the workspace is mounted inside the sandbox; "" means
	// DefaultWorkingDir, or the project's own host path (Spec.ProjectDir) when shared
	// caches are mounted, so that build caches keyed by source path hit (see
	// projectWorkDir for when that path cannot be used). Spec.WorkDir overrides it per
	// run.
	WorkingDir string `toml:"working_dir" trust:"safe"`
	// ReadOnlyBinds are extra host paths made visible read-only at the same path inside
	// the sandbox, for tools installed outside /usr (e.g. "/opt/hostedtoolcache").
	ReadOnlyBinds []string `toml:"ro_binds"`
	// Limits picks how limits are enforced: LimitsAuto (""), LimitsCgroup, LimitsRlimit
	// or LimitsNone.
	Limits string `toml:"limits"`
	// Path is PATH inside the sandbox, a colon-separated list of absolute directories.
	// "" means the bin directory of every ReadOnlyBinds entry that has one (so
	// ro_binds = ["/usr/local/go"] finds gofmt), then DefaultPath. Spec.Env and
	// Cmd.Env may still set PATH. (Trust: safe: a literal that only changes the inside
	// of the sandbox.)
	Path string `toml:"path" trust:"safe"`

	// Overlay picks how the workspace and shared caches are shown: OverlayAuto ("") uses
	// copy-on-write overlays where the machine allows them and copies otherwise;
	// OverlayOff always copies the workspace and shares no cache.
	Overlay string `toml:"overlay"`

	// Bwrap is the bwrap binary; "" looks "bwrap" up on PATH.
	Bwrap string `toml:"-"`
	// StateDir holds one directory per sandbox (its workspace, /tmp and home); ""
	// means $TMPDIR/talkops-bwrap. The CLI passes state.ProviderDir, a per-user root
	// next to the ledger. Sandboxes left behind by a killed run are found here by List.
	StateDir string `toml:"-"`
}

// resolved is Options after defaults and parsing.
type resolved struct {
	network    bool
	memory     int64 // bytes, 0 = none
	memorySet  bool  // memory was given explicitly
	pids       int   // 0 = none
	cpuSeconds int   // 0 = none
	rootfs     string
	workDir    string
	roBinds    []string
	limits     string
	path       string // PATH inside the sandbox
	overlay    string
	bwrap      string
	stateDir   string
}

// Validate reports the first invalid option, naming the key and what would be valid.
// Create calls it too; config loading can call it to fail before anything is provisioned.
func (o Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve applies defaults and checks every option; errors wrap providers.ErrConfig.
func (o Options) resolve() (resolved, error) {
	r, err := o.resolveRaw()
	if err != nil {
		return r, fmt.Errorf("%w: %w", providers.ErrConfig, err)
	}
	return r, nil
}

func (o Options) resolveRaw() (resolved, error) {
	r := resolved{
		network:    o.Network,
		pids:       o.Pids,
		cpuSeconds: o.CPUSeconds,
		rootfs:     o.Rootfs,
		workDir:    o.WorkingDir,
		limits:     o.Limits,
		overlay:    o.Overlay,
		bwrap:      o.Bwrap,
		stateDir:   o.StateDir,
	}
	mem := strings.TrimSpace(o.Memory)
	r.memorySet = mem != ""
	if mem == "" {
		mem = DefaultMemory
	}
	n, err := parseSize(mem)
	if err != nil {
		return r, fmt.Errorf("bwrap option memory = %q: %w", o.Memory, err)
	}
	r.memory = n
	if r.memory == 0 {
		r.memorySet = false
	}
	switch {
	case r.pids == 0:
		r.pids = DefaultPids
	case r.pids < 0:
		r.pids = 0
	}
	if r.cpuSeconds < 0 {
		return r, fmt.Errorf("bwrap option cpu_seconds = %d: want 0 (no limit) or a positive number of seconds", o.CPUSeconds)
	}
	if r.rootfs != "" {
		if !filepath.IsAbs(r.rootfs) {
			return r, fmt.Errorf("bwrap option rootfs = %q: want an absolute host path", o.Rootfs)
		}
		r.rootfs = filepath.Clean(r.rootfs)
	}
	if r.workDir == "" {
		r.workDir = DefaultWorkingDir
	}
	if err := checkSandboxDir(r.workDir); err != nil {
		return r, fmt.Errorf("bwrap option working_dir = %q: %w", o.WorkingDir, err)
	}
	for _, b := range o.ReadOnlyBinds {
		if !filepath.IsAbs(b) {
			return r, fmt.Errorf("bwrap option ro_binds entry %q: want an absolute host path", b)
		}
		r.roBinds = append(r.roBinds, filepath.Clean(b))
	}
	if r.path, err = sandboxPath(o.Path, r.roBinds); err != nil {
		return r, err
	}
	switch r.limits {
	case "":
		r.limits = LimitsAuto
	case LimitsAuto, LimitsCgroup, LimitsRlimit, LimitsNone:
	default:
		return r, fmt.Errorf("bwrap option limits = %q: want one of %q, %q, %q, %q",
			o.Limits, LimitsAuto, LimitsCgroup, LimitsRlimit, LimitsNone)
	}
	switch r.overlay {
	case "":
		r.overlay = OverlayAuto
	case OverlayAuto, OverlayOff:
	default:
		return r, fmt.Errorf("bwrap option overlay = %q: want %q or %q", o.Overlay, OverlayAuto, OverlayOff)
	}
	return r, nil
}

// sandboxPath is PATH inside the sandbox: the path option, checked, or the bin
// directories of the read-only binds (those that exist on the host) before DefaultPath.
func sandboxPath(option string, roBinds []string) (string, error) {
	if option != "" {
		for _, dir := range strings.Split(option, ":") {
			if !path.IsAbs(dir) {
				return "", fmt.Errorf("bwrap option path = %q: entry %q: want absolute directories separated by ':', e.g. %q", option, dir, "/usr/local/go/bin:"+DefaultPath)
			}
		}
		return option, nil
	}
	var dirs []string
	for _, b := range roBinds {
		bin := filepath.Join(b, "bin")
		if fi, err := os.Stat(bin); err == nil && fi.IsDir() {
			dirs = append(dirs, bin)
		}
	}
	return strings.Join(append(dirs, DefaultPath), ":"), nil
}

// checkSandboxDir validates a working directory inside the sandbox: absolute, clean and
// not one of the directories the profile mounts itself.
func checkSandboxDir(dir string) error {
	if !path.IsAbs(dir) {
		return fmt.Errorf("want an absolute path inside the sandbox such as %s", DefaultWorkingDir)
	}
	clean := path.Clean(dir)
	for _, reserved := range []string{"/", "/usr", "/proc", "/dev", "/tmp", "/etc", "/home", HomeDir, "/bin", "/sbin", "/lib", "/lib64"} {
		if clean == reserved {
			return fmt.Errorf("%s is reserved by the sandbox profile; use a directory such as %s", clean, DefaultWorkingDir)
		}
	}
	for _, reserved := range []string{"/usr/", "/proc/", "/dev/", "/etc/", "/tmp/", HomeDir + "/"} {
		if strings.HasPrefix(clean+"/", reserved) {
			return fmt.Errorf("%s is inside %s, which the sandbox profile mounts; use a directory such as %s", clean, strings.TrimSuffix(reserved, "/"), DefaultWorkingDir)
		}
	}
	return nil
}

// projectWorkDir is the project's own host path when it can be the sandbox's working
// directory, or why not: the rules every provider shares (cache.ProjectWorkDir), with the
// profile's /tmp and home reserved, no rootfs in use (its top-level directory would be
// hidden), and no read-only bind inside it.
func projectWorkDir(project string, r resolved, caches []mountedCache) (string, error) {
	shared := make([]providers.Cache, len(caches))
	for i, c := range caches {
		shared[i] = c.Cache
	}
	dir, err := cache.ProjectWorkDir(project, shared, "/tmp", HomeDir)
	if err != nil {
		return "", err
	}
	if r.rootfs != "" {
		return "", fmt.Errorf("a rootfs is in use; set working_dir to choose the path")
	}
	for _, b := range r.roBinds {
		if cache.Within(b, dir) && b != dir {
			return "", fmt.Errorf("the read-only bind %s lies inside %s and would be hidden", b, dir)
		}
	}
	return dir, nil
}

// parseSize parses "512m", "2GiB", "1g" or a plain number of bytes (binary units, the
// same syntax as docker's --memory).
func parseSize(s string) (int64, error) {
	n, err := units.RAMInBytes(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a size such as \"512m\", \"2GiB\" or a number of bytes, 0 for no limit")
	}
	return n, nil
}
