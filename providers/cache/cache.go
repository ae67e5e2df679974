// Package cache turns the [sandboxes] caches setting into host directories to share with an
// isolating sandbox: presets for the common ecosystems, found where the host's own tools keep
// them, and explicit host directories.
//
// Sharing is copy-on-write (see providers.Cache): the sandbox reads the host's cache and its
// writes land in a layer of its own that is discarded with it, so an agent cannot poison the
// cache the next run (or the host's own builds) will use.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
)

// Root is where caches appear inside a sandbox.
const Root = "/cache"

// preset is one ecosystem's cache directories and the variables that point its tools at
// them.
type preset struct {
	help string
	dirs func(e env) []dirSpec
}

type dirSpec struct {
	name    string            // cache name and directory under Root
	host    string            // host directory, "" when not found
	home    bool              // an empty writable home at host's sandbox path (see toolHome)
	within  string            // set for a part of a home: its path relative to that home
	env     map[string]string // set inside the sandbox; "%s" is the sandbox path
	comment string            // where the host directory came from, for notes
}

var presets = map[string]preset{
	"go": {"Go module and build caches (go env GOMODCACHE GOCACHE)", func(e env) []dirSpec {
		vals := e.goEnv("GOMODCACHE", "GOCACHE")
		return []dirSpec{
			{name: "go-mod", host: vals["GOMODCACHE"], env: map[string]string{"GOMODCACHE": "%s"}, comment: "go env GOMODCACHE"},
			{name: "go-build", host: vals["GOCACHE"], env: map[string]string{"GOCACHE": "%s"}, comment: "go env GOCACHE"},
		}
	}},
	"npm": {"npm's cache (npm config get cache)", func(e env) []dirSpec {
		dir := e.first(e.getenv("npm_config_cache"), e.getenv("NPM_CONFIG_CACHE"), e.home(".npm"))
		return []dirSpec{{name: "npm", host: dir, env: map[string]string{"npm_config_cache": "%s"}, comment: "npm_config_cache or ~/.npm"}}
	}},
	"pip": {"pip's cache (PIP_CACHE_DIR or ~/.cache/pip)", func(e env) []dirSpec {
		dir := e.first(e.getenv("PIP_CACHE_DIR"), e.xdgCache("pip"))
		return []dirSpec{{name: "pip", host: dir, env: map[string]string{"PIP_CACHE_DIR": "%s"}, comment: "PIP_CACHE_DIR or ~/.cache/pip"}}
	}},
	"cargo": {"Cargo's registry and git checkouts (CARGO_HOME or ~/.cargo: registry/, git/)", func(e env) []dirSpec {
		return e.toolHome("cargo", "CARGO_HOME", e.first(e.getenv("CARGO_HOME"), e.home(".cargo")), "CARGO_HOME or ~/.cargo",
			"registry", "git")
	}},
	"maven": {"Maven's local repository (~/.m2/repository)", func(e env) []dirSpec {
		return []dirSpec{{name: "maven", host: e.home(".m2", "repository"), env: map[string]string{"MAVEN_OPTS": "-Dmaven.repo.local=%s"}, comment: "~/.m2/repository"}}
	}},
	"gradle": {"Gradle's dependency caches and wrapper distributions (GRADLE_USER_HOME or ~/.gradle: caches/, wrapper/dists/)", func(e env) []dirSpec {
		return e.toolHome("gradle", "GRADLE_USER_HOME", e.first(e.getenv("GRADLE_USER_HOME"), e.home(".gradle")), "GRADLE_USER_HOME or ~/.gradle",
			"caches", "wrapper/dists")
	}},
	"terraform": {"Terraform's plugin cache (TF_PLUGIN_CACHE_DIR or ~/.terraform.d/plugin-cache)", func(e env) []dirSpec {
		dir := e.first(e.getenv("TF_PLUGIN_CACHE_DIR"), e.home(".terraform.d", "plugin-cache"))
		return []dirSpec{{name: "terraform", host: dir, env: map[string]string{"TF_PLUGIN_CACHE_DIR": "%s"}, comment: "TF_PLUGIN_CACHE_DIR or ~/.terraform.d/plugin-cache"}}
	}},
}

// Presets lists the preset names with a line of help each, sorted.
func Presets() []string {
	var out []string
	for name, p := range presets {
		out = append(out, name+": "+p.help)
	}
	slices.Sort(out)
	return out
}

// Check validates one entry of the setting: a preset name or an absolute host path.
func Check(entry string) error {
	if _, ok := presets[entry]; ok {
		return nil
	}
	if filepath.IsAbs(entry) {
		return nil
	}
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return fmt.Errorf("cache %q: want a preset (%s) or an absolute host directory", entry, strings.Join(names, ", "))
}

// IsHostPath reports whether an entry names a host directory rather than a preset. Such
// entries widen what the sandbox can read, so only trusted configuration may set them.
func IsHostPath(entry string) bool { return filepath.IsAbs(entry) }

// Resolve turns the entries into caches. getenv is talkops's environment (for the tools'
// own variables and HOME). An entry whose host directory cannot be found is left out with a
// note; a malformed entry is an error.
func Resolve(ctx context.Context, entries []string, getenv func(string) string) ([]providers.Cache, []string, error) {
	e := env{ctx: ctx, getenv: getenv}
	var caches []providers.Cache
	var notes []string
	seen := map[string]bool{}
	for _, entry := range entries {
		if err := Check(entry); err != nil {
			return nil, nil, err
		}
		var specs []dirSpec
		if p, ok := presets[entry]; ok {
			specs = p.dirs(e)
		} else {
			clean := filepath.Clean(entry)
			sum := sha256.Sum256([]byte(clean))
			specs = []dirSpec{{name: "dir-" + filepath.Base(clean) + "-" + hex.EncodeToString(sum[:4]), host: clean}}
		}
		homePath := ""
		for _, d := range specs {
			if seen[d.name] {
				continue
			}
			seen[d.name] = true
			if d.host == "" || !filepath.IsAbs(d.host) {
				notes = append(notes, fmt.Sprintf("cache %s not shared: no host directory found (%s)", d.name, d.comment))
				if d.home {
					break // its parts have no home to appear in
				}
				continue
			}
			host := filepath.Clean(d.host)
			c := providers.Cache{Name: d.name, HostDir: host, Path: sandboxPath(host, d.name)}
			switch {
			case d.home:
				c.HostDir, homePath = "", c.Path
			case d.within != "":
				c.Path = path.Join(homePath, d.within)
			}
			if len(d.env) > 0 {
				c.Env = map[string]string{}
				for k, v := range d.env {
					c.Env[k] = strings.ReplaceAll(v, "%s", c.Path)
				}
			}
			caches = append(caches, c)
		}
	}
	return caches, notes, nil
}

// systemDirs hold the sandbox's own system; neither a cache nor the workspace at the
// project's path is mounted over or inside them.
var systemDirs = []string{"/usr", "/etc", "/proc", "/dev", "/sys", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// ownTops are directories the sandbox has its own of: a cache or the workspace may lie
// below one, never at it, which would hide the sandbox's own.
var ownTops = []string{"/", "/tmp", "/home", "/root"}

// sandboxPath is where the sandbox sees a cache: at the host's own path where that is
// possible, because build caches key their entries by the paths of what they built (Go's
// action ids include the source directory), so a module cache seen at another path would
// miss for every dependency; else under Root.
func sandboxPath(host, name string) string {
	if slices.Contains(ownTops, host) {
		return Root + "/" + name
	}
	// Nor over the default workspace or Root.
	for _, d := range append(slices.Clone(systemDirs), "/workspace", Root) {
		if Within(host, d) {
			return Root + "/" + name
		}
	}
	return host
}

type env struct {
	ctx    context.Context
	getenv func(string) string
}

func (e env) first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func (e env) home(parts ...string) string {
	h := e.getenv("HOME")
	if h == "" {
		return ""
	}
	return filepath.Join(append([]string{h}, parts...)...)
}

// toolHome shares only the cache parts of a tool's home directory (the parts, relative
// paths such as "registry"), never the home itself: homes also hold registry tokens
// (~/.cargo/credentials.toml), repository passwords and signing keys
// (~/.gradle/gradle.properties), configuration that may carry either, and scripts or
// binaries the tool runs (init.d/, bin/). The home appears as an empty directory of the
// sandbox's own, writable because the tools write locks and state there, with the parts
// layered over the host's at the same relative paths and variable pointing the tool at
// it.
func (e env) toolHome(name, variable, dir, comment string, parts ...string) []dirSpec {
	specs := []dirSpec{{name: name + "-home", host: dir, home: true, env: map[string]string{variable: "%s"}, comment: comment}}
	if dir == "" {
		return specs
	}
	for _, p := range parts {
		specs = append(specs, dirSpec{
			name: name + "-" + strings.ReplaceAll(p, "/", "-"), host: filepath.Join(dir, p), within: p,
			comment: variable + "/" + p,
		})
	}
	return specs
}

func (e env) xdgCache(name string) string {
	if x := e.getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, name)
	}
	return e.home(".cache", name)
}

// goEnv asks the host's go command where its caches are, as the user's builds find them.
func (e env) goEnv(names ...string) map[string]string {
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"env"}, names...)...)
	// Outside any module: in the project, a go.mod naming a newer toolchain would make go
	// download and run that toolchain first (GOTOOLCHAIN=auto), or fail without one.
	cmd.Dir = "/"
	if b, err := cmd.Output(); err == nil {
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		for i, n := range names {
			if i < len(lines) {
				out[n] = strings.TrimSpace(lines[i])
			}
		}
		return out
	}
	// No go on PATH: the documented defaults.
	out["GOMODCACHE"] = e.first(e.getenv("GOMODCACHE"), filepath.Join(e.first(e.getenv("GOPATH"), e.home("go")), "pkg", "mod"))
	out["GOCACHE"] = e.first(e.getenv("GOCACHE"), e.xdgCache("go-build"))
	return out
}

// ProjectWorkDir is where a sandbox that shares caches shows the workspace when no working
// directory is configured: at the project's own host path, because build caches also key
// entries by the source directory (Go's action ids include it), so a workspace at another
// path misses for every package of the project. It is still the sandbox's copy or layer of
// the synced view, never the host directory. The error says why the path cannot be used:
// it is not absolute, it is or lies inside a directory holding the sandbox's system (or
// Root, /tmp's root, /home or /root themselves), inside one of the provider's own
// directories (reserved: its home, a tmpfs it mounts), or it overlaps a shared cache.
func ProjectWorkDir(project string, shared []providers.Cache, reserved ...string) (string, error) {
	if !filepath.IsAbs(project) {
		return "", fmt.Errorf("the project directory %q is not absolute", project)
	}
	dir := filepath.Clean(project)
	if slices.Contains(ownTops, dir) {
		return "", fmt.Errorf("%s would hide the sandbox's own %s", dir, dir)
	}
	for _, sys := range append(append(slices.Clone(systemDirs), Root), reserved...) {
		if Within(dir, sys) {
			return "", fmt.Errorf("%s is inside %s, which the sandbox mounts itself", dir, sys)
		}
	}
	for _, c := range shared {
		if Within(dir, c.Path) || Within(c.Path, dir) {
			return "", fmt.Errorf("%s overlaps the cache %s at %s", dir, c.Name, c.Path)
		}
	}
	return dir, nil
}

// WorkDirNote is the note a sandbox records when ProjectWorkDir refused the project's path
// and the workspace stayed at workDir.
func WorkDirNote(workDir string, err error) string {
	return fmt.Sprintf("workspace at %s, not the project's path (build caches keyed by path miss for the project's own packages): %v", workDir, err)
}

// Within reports whether the clean absolute path p is dir or lies below it.
func Within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
