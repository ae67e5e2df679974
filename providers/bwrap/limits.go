package bwrap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits reports the resource limits a sandbox got and how they are enforced.
type Limits struct {
	// Mechanism is LimitsCgroupV1, LimitsCgroupV2, LimitsRlimit or LimitsNone.
	Mechanism string `json:"mechanism"`
	// Memory in bytes, 0 = none. Under rlimit it is the per-process address space.
	Memory int64 `json:"memory,omitempty"`
	// Pids is the process/thread cap, 0 = none.
	Pids int `json:"pids,omitempty"`
	// CPUSeconds is the per-command CPU time cap (RLIMIT_CPU), 0 = none.
	CPUSeconds int `json:"cpu_seconds,omitempty"`
	// Note explains a limit that was asked for but cannot be enforced, or a fallback.
	Note string `json:"note,omitempty"`
}

// cgroup is the set of per-sandbox cgroup directories: one per v1 controller (memory,
// pids) or one v2 directory.
type cgroup struct {
	version int
	memDir  string // v1 memory controller dir, or the v2 dir
	pidsDir string // v1 pids controller dir, or the v2 dir
}

// procsFiles are the cgroup.procs files a command joins before bwrap starts.
func (c *cgroup) procsFiles() []string {
	if c.version == 2 {
		return []string{filepath.Join(c.memDir, "cgroup.procs")}
	}
	return []string{filepath.Join(c.memDir, "cgroup.procs"), filepath.Join(c.pidsDir, "cgroup.procs")}
}

// counters reads the OOM-kill and pids-limit-hit counters; missing files read as 0.
func (c *cgroup) counters() (oomKills, pidsMax int64) {
	if c.version == 2 {
		return readKeyed(filepath.Join(c.memDir, "memory.events"), "oom_kill"),
			readKeyed(filepath.Join(c.pidsDir, "pids.events"), "max")
	}
	return readKeyed(filepath.Join(c.memDir, "memory.oom_control"), "oom_kill"),
		readKeyed(filepath.Join(c.pidsDir, "pids.events"), "max")
}

// remove deletes the cgroup directories, retrying briefly while the kernel finishes
// reaping the last processes.
func (c *cgroup) remove() error {
	var errs []error
	for _, dir := range uniq(c.memDir, c.pidsDir) {
		var err error
		for i := range 250 {
			if i%10 == 0 {
				// A sandbox whose talkops process was killed may still have processes
				// in its cgroup (an orphaned command); they go first, or rmdir is EBUSY.
				killTasks(dir)
			}
			err = os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// killTasks sends SIGKILL to every process listed in a cgroup directory.
func killTasks(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func uniq(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" && (len(out) == 0 || out[len(out)-1] != s) {
			out = append(out, s)
		}
	}
	return out
}

// cgroupEnv describes where the calling process's cgroups live. Fields are "" when the
// controller is not available.
type cgroupEnv struct {
	v1Memory string // the caller's v1 memory cgroup directory
	v1Pids   string // the caller's v1 pids cgroup directory
	v2       string // the caller's v2 cgroup directory (on a pure cgroup2 host)
}

// detectCgroups reads /proc/self/mountinfo and /proc/self/cgroup.
func detectCgroups() cgroupEnv {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cgroupEnv{}
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupEnv{}
	}
	return parseCgroupEnv(string(mounts), string(self))
}

// parseCgroupEnv finds, for each controller, the directory of the caller's own cgroup,
// so that sandbox cgroups are created beneath it and stay within the caller's limits.
func parseCgroupEnv(mountinfo, selfCgroup string) cgroupEnv {
	type mount struct{ root, point string }
	v1 := map[string]mount{}
	var v2 *mount
	for line := range strings.Lines(mountinfo) {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := mount{root: unescapeMount(f[3]), point: unescapeMount(f[4])}
		switch g[0] {
		case "cgroup":
			for opt := range strings.SplitSeq(g[2], ",") {
				if opt == "memory" || opt == "pids" {
					if _, seen := v1[opt]; !seen {
						v1[opt] = m
					}
				}
			}
		case "cgroup2":
			if v2 == nil {
				v2 = &m
			}
		}
	}
	paths := map[string]string{} // controller ("" for v2) -> cgroup path
	for line := range strings.Lines(selfCgroup) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			paths[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			paths[c] = parts[2]
		}
	}
	dir := func(m mount, p string) string {
		rel, err := filepath.Rel(m.root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = "."
		}
		return filepath.Join(m.point, rel)
	}
	var env cgroupEnv
	if m, ok := v1["memory"]; ok {
		if p, ok := paths["memory"]; ok {
			env.v1Memory = dir(m, p)
		}
	}
	if m, ok := v1["pids"]; ok {
		if p, ok := paths["pids"]; ok {
			env.v1Pids = dir(m, p)
		}
	}
	// A v2 hierarchy counts only when v1 does not claim the controllers (hybrid hosts
	// mount an empty cgroup2 tree at /sys/fs/cgroup/unified).
	if v2 != nil && len(v1) == 0 {
		if p, ok := paths[""]; ok {
			env.v2 = dir(*v2, p)
		}
	}
	return env
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// createCgroup makes the per-sandbox cgroup beneath the caller's own cgroup and writes
// the limits. It returns an error when this host cannot give us one; the caller then
// falls back to rlimits.
func createCgroup(env cgroupEnv, id string, memory int64, pids int) (*cgroup, error) {
	switch {
	case env.v1Memory != "" && env.v1Pids != "":
		c := &cgroup{
			version: 1,
			memDir:  filepath.Join(env.v1Memory, "talkops", id),
			pidsDir: filepath.Join(env.v1Pids, "talkops", id),
		}
		if err := c.setupV1(memory, pids); err != nil {
			return nil, errors.Join(err, c.remove())
		}
		return c, nil
	case env.v2 != "":
		c := &cgroup{version: 2}
		if err := c.setupV2(env.v2, id, memory, pids); err != nil {
			return nil, errors.Join(err, c.remove())
		}
		return c, nil
	default:
		return nil, errors.New("no cgroup v1 memory+pids controllers and no cgroup v2 hierarchy found")
	}
}

func (c *cgroup) setupV1(memory int64, pids int) error {
	for _, d := range uniq(c.memDir, c.pidsDir) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup: %w", err)
		}
	}
	if memory > 0 {
		v := strconv.FormatInt(memory, 10)
		if err := writeFile(filepath.Join(c.memDir, "memory.limit_in_bytes"), v); err != nil {
			return err
		}
		// Without swap accounting the file is absent; the limit then bounds RAM only.
		_ = writeFile(filepath.Join(c.memDir, "memory.memsw.limit_in_bytes"), v)
	}
	if pids > 0 {
		if err := writeFile(filepath.Join(c.pidsDir, "pids.max"), strconv.Itoa(pids)); err != nil {
			return err
		}
	}
	return nil
}

func (c *cgroup) setupV2(own, id string, memory int64, pids int) error {
	ctrls, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read cgroup controllers: %w", err)
	}
	have := strings.Fields(string(ctrls))
	for _, want := range []string{"memory", "pids"} {
		if !contains(have, want) {
			return fmt.Errorf("cgroup v2 controller %q is not available in %s", want, own)
		}
	}
	// Enabling controllers for children fails (EBUSY) in a non-root cgroup that holds
	// processes, the "no internal processes" rule; then there is nothing to delegate.
	if err := writeFile(filepath.Join(own, "cgroup.subtree_control"), "+memory +pids"); err != nil {
		return err
	}
	parent := filepath.Join(own, "talkops")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+memory +pids"); err != nil {
		return err
	}
	c.memDir = filepath.Join(parent, id)
	c.pidsDir = c.memDir
	if err := os.Mkdir(c.memDir, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	if memory > 0 {
		if err := writeFile(filepath.Join(c.memDir, "memory.max"), strconv.FormatInt(memory, 10)); err != nil {
			return err
		}
		_ = writeFile(filepath.Join(c.memDir, "memory.swap.max"), "0")
	}
	if pids > 0 {
		if err := writeFile(filepath.Join(c.pidsDir, "pids.max"), strconv.Itoa(pids)); err != nil {
			return err
		}
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func writeFile(name, value string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// readKeyed reads "key value" lines and returns the value for key, 0 when absent.
func readKeyed(name, key string) int64 {
	f, err := os.Open(name)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
