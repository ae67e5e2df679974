package docker

import (
	"fmt"
	"path"
	"strings"

	"github.com/docker/docker/client"
	"github.com/docker/go-units"

	"github.com/talkops/talkops/providers"
)

// Defaults applied when an Options field is left at its zero value.
const (
	// DefaultImage is used when neither Spec.Snapshot nor Options.Image names one. Any
	// image with /bin/sh works; setup scripts that use apt-get need a Debian-based one.
	DefaultImage      = "debian:bookworm-slim"
	DefaultWorkingDir = "/workspace"
	DefaultMemory     = "2g"
	DefaultPids       = 1024
	DefaultNetwork    = "none"
)

// Pull policies, the values of Options.Pull.
const (
	PullMissing = "missing" // default: pull only when the image is not present
	PullNever   = "never"   // fail when the image is not present
	PullAlways  = "always"  // pull before every Create
)

// Options configure the docker provider. The toml names are the keys of
// [sandboxes.providers.docker]; the zero value is a working default.
type Options struct {
	// Image is the image sandboxes are created from; Spec.Snapshot overrides it per run.
	// "" means DefaultImage.
	Image string `toml:"image" trust:"safe"`
	// Network is the container's network mode: "none" (default, loopback only),
	// "bridge", "host" or the name of a user-defined network.
	Network string `toml:"network"`
	// Memory caps the container's memory, swap included: "512m", "2GiB" or bytes.
	// "" means DefaultMemory, "0" no limit. An overrun is an OOM kill (exit 137).
	Memory string `toml:"memory"`
	// Pids caps processes and threads: 0 means DefaultPids, negative no limit.
	Pids int64 `toml:"pids"`
	// CPUs caps CPU usage in cores (1.5 = one and a half); 0 means no limit.
	CPUs float64 `toml:"cpus"`
	// WorkingDir is the sandbox's working directory; "" means DefaultWorkingDir, or the
	// project's own host path (Spec.ProjectDir) when caches are shared, so that build
	// caches keyed by source path hit (see cache.ProjectWorkDir for when that path cannot
	// be used). Spec.WorkDir overrides it per run.
	WorkingDir string `toml:"working_dir" trust:"safe"`
	// User runs commands as this user ("1000", "app:app"); "" means the image's user.
	User string `toml:"user" trust:"safe"`
	// Pull is PullMissing (""), PullNever or PullAlways.
	Pull string `toml:"pull" trust:"safe"`
	// Path is PATH for commands, colon-separated absolute directories; "" keeps the
	// image's own PATH (a golang image finds go and gofmt). Spec.Env and Cmd.Env may
	// still set PATH. (Trust: safe: a literal that only changes the inside of the
	// container.)
	Path string `toml:"path" trust:"safe"`

	// Client talks to the engine; nil means a client from the environment
	// (DOCKER_HOST, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY) with API version negotiation.
	Client *client.Client `toml:"-"`
}

type resolved struct {
	image   string
	network string
	memory  int64
	pids    int64
	nanoCPU int64
	workDir string
	user    string
	pull    string
	path    string
}

// Validate reports the first invalid option, naming the key and what would be valid.
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
	r := resolved{image: o.Image, network: o.Network, pids: o.Pids, workDir: o.WorkingDir, user: o.User, pull: o.Pull, path: o.Path}
	if r.path != "" {
		for _, dir := range strings.Split(r.path, ":") {
			if !path.IsAbs(dir) {
				return r, fmt.Errorf("docker option path = %q: entry %q: want absolute directories separated by ':', e.g. %q", o.Path, dir, "/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin")
			}
		}
	}
	if r.image == "" {
		r.image = DefaultImage
	}
	if r.network == "" {
		r.network = DefaultNetwork
	}
	mem := strings.TrimSpace(o.Memory)
	if mem == "" {
		mem = DefaultMemory
	}
	n, err := units.RAMInBytes(mem)
	if err != nil || n < 0 {
		return r, fmt.Errorf("docker option memory = %q: want a size such as \"512m\", \"2GiB\" or a number of bytes, 0 for no limit", o.Memory)
	}
	if n > 0 && n < 6<<20 {
		return r, fmt.Errorf("docker option memory = %q: the engine's minimum is 6 MiB", o.Memory)
	}
	r.memory = n
	switch {
	case r.pids == 0:
		r.pids = DefaultPids
	case r.pids < 0:
		r.pids = 0
	}
	if o.CPUs < 0 {
		return r, fmt.Errorf("docker option cpus = %v: want 0 (no limit) or a positive number of cores", o.CPUs)
	}
	r.nanoCPU = int64(o.CPUs * 1e9)
	if r.workDir == "" {
		r.workDir = DefaultWorkingDir
	}
	if !path.IsAbs(r.workDir) || path.Clean(r.workDir) == "/" {
		return r, fmt.Errorf("docker option working_dir = %q: want an absolute path other than / such as %s", o.WorkingDir, DefaultWorkingDir)
	}
	r.workDir = path.Clean(r.workDir)
	switch r.pull {
	case "":
		r.pull = PullMissing
	case PullMissing, PullNever, PullAlways:
	default:
		return r, fmt.Errorf("docker option pull = %q: want one of %q, %q, %q", o.Pull, PullMissing, PullNever, PullAlways)
	}
	return r, nil
}
