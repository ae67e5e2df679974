package bwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
)

// sandboxUID is the uid and gid commands run as inside the sandbox.
const sandboxUID = 1000

// Sandbox is one bwrap sandbox: a host directory with the workspace, /tmp and home.
type Sandbox struct {
	id     string
	dir    string
	owned  bool // Close deletes dir (false for Attach)
	opts   resolved
	env    map[string]string
	cg     *cgroup
	limits Limits
	rlimit []string // prlimit arguments, nil when rlimits are not used

	// caches are the shared caches mounted in the holder's namespace; cacheNotes say
	// why others are not.
	caches     []mountedCache
	cacheNotes []string

	mu      sync.Mutex
	holder  *holder // the copy-on-write layers' namespace, nil without layers
	layered bool    // the working directory is an overlay over the project
	closed  bool
	running map[*runningCmd]struct{}
	wg      sync.WaitGroup
}

type runningCmd struct{ cancel context.CancelFunc }

var _ providers.Sandbox = (*Sandbox)(nil)

// ID is the sandbox directory's name, "talkops-<run>-<hex>".
func (s *Sandbox) ID() string { return s.id }

// WorkDir is where the workspace is mounted inside the sandbox.
func (s *Sandbox) WorkDir() string { return s.opts.workDir }

// Limits reports the limits in force and how they are enforced.
func (s *Sandbox) Limits() Limits { return s.limits }

// HostDir is where the host sees the sandbox's working directory.
func (s *Sandbox) HostDir() string {
	dir, _, _ := s.hostPath(s.opts.workDir)
	return dir
}

// mounts maps sandbox directories to host subdirectories of s.dir; they persist between
// commands and are what Upload and Download reach.
func (s *Sandbox) mounts() [][2]string {
	return [][2]string{
		{s.opts.workDir, "workspace"},
		{"/tmp", "tmp"},
		{HomeDir, "home"},
	}
}

// layout creates the sandbox directory and the synthetic /etc files.
func (s *Sandbox) layout() error {
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		return fmt.Errorf("create sandbox directory: %w", err)
	}
	for _, m := range s.mounts() {
		if err := os.Mkdir(filepath.Join(s.dir, m[1]), 0o755); err != nil {
			return fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	if err := os.Mkdir(filepath.Join(s.dir, "etc"), 0o755); err != nil {
		return fmt.Errorf("create sandbox directory: %w", err)
	}
	uid := strconv.Itoa(sandboxUID)
	files := map[string]string{
		"passwd":   "root:x:0:0:root:/root:/bin/sh\nsandbox:x:" + uid + ":" + uid + ":sandbox:" + HomeDir + ":/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":    "root:x:0:\nsandbox:x:" + uid + ":\nnogroup:x:65534:\n",
		"hostname": "sandbox\n",
		"hosts":    "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(s.dir, "etc", name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("create sandbox directory: %w", err)
		}
	}
	return nil
}

// applyLimits picks cgroups or rlimits per the limits option and records the outcome.
func (s *Sandbox) applyLimits() {
	o := s.opts
	s.limits = Limits{Memory: o.memory, Pids: o.pids, CPUSeconds: o.cpuSeconds}
	if o.limits == LimitsNone || (o.memory == 0 && o.pids == 0 && o.cpuSeconds == 0) {
		s.limits = Limits{Mechanism: LimitsNone}
		return
	}
	var notes []string
	if o.limits == LimitsAuto || o.limits == LimitsCgroup {
		cg, err := createCgroup(detectCgroups(), s.id, o.memory, o.pids)
		if err == nil {
			s.cg = cg
			s.limits.Mechanism = map[int]string{1: LimitsCgroupV1, 2: LimitsCgroupV2}[cg.version]
			if o.cpuSeconds > 0 {
				s.rlimit = cpuRlimit(o.cpuSeconds)
			}
			s.limits.Note = strings.Join(notes, "; ")
			return
		}
		notes = append(notes, "no writable cgroup ("+err.Error()+"), using rlimits")
	}
	s.limits.Mechanism = LimitsRlimit
	var args []string
	if o.memory > 0 {
		if o.memorySet {
			args = append(args, "--as="+strconv.FormatInt(o.memory, 10))
		} else {
			notes = append(notes, "default memory limit not applied: with rlimits only an explicit memory option sets RLIMIT_AS")
			s.limits.Memory = 0
		}
	}
	if o.pids > 0 {
		args = append(args, "--nproc="+strconv.Itoa(o.pids))
		if os.Geteuid() == 0 {
			notes = append(notes, "RLIMIT_NPROC is not enforced for root; the pids limit is advisory")
		}
	}
	if o.cpuSeconds > 0 {
		args = append(args, cpuRlimit(o.cpuSeconds)...)
	}
	if len(args) > 0 {
		if _, err := exec.LookPath("prlimit"); err != nil {
			notes = append(notes, "prlimit (util-linux) not found: no limits applied")
			s.limits = Limits{Mechanism: LimitsNone}
			args = nil
		}
	}
	s.rlimit = args
	s.limits.Note = strings.Join(notes, "; ")
}

// cpuRlimit sets the soft limit at n seconds (SIGXCPU, which we report) and the hard
// limit a little later (SIGKILL) for programs that ignore SIGXCPU.
func cpuRlimit(n int) []string {
	return []string{fmt.Sprintf("--cpu=%d:%d", n, n+5)}
}

// etcFiles are the host /etc entries that programs need and that reveal nothing about
// the host. Networked sandboxes also get name resolution and CA certificates.
var etcFiles = []string{
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "os-release",
	"debian_version", "lsb-release", "nsswitch.conf", "mime.types", "profile", "shells",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
}

var etcNetworkFiles = []string{"resolv.conf", "gai.conf", "services", "protocols"}

// profile returns bwrap's arguments up to (not including) "--" and the command.
func (s *Sandbox) profile(dir string) []string {
	o := s.opts
	var a []string
	add := func(args ...string) { a = append(a, args...) }
	reserved := map[string]bool{"proc": true, "dev": true, "tmp": true, "home": true, "sys": true}
	top := strings.SplitN(strings.TrimPrefix(o.workDir, "/"), "/", 2)[0]
	reserved[top] = true

	if o.rootfs == "" {
		add(hostSystemArgs()...)
		names := etcFiles
		if o.network {
			names = append(append([]string{}, etcFiles...), etcNetworkFiles...)
		}
		for _, name := range names {
			if _, err := os.Stat("/etc/" + name); err == nil {
				add("--ro-bind", "/etc/"+name, "/etc/"+name)
			}
		}
		for _, name := range []string{"passwd", "group", "hostname"} {
			add("--ro-bind", filepath.Join(s.dir, "etc", name), "/etc/"+name)
		}
		if !o.network {
			add("--ro-bind", filepath.Join(s.dir, "etc", "hosts"), "/etc/hosts")
		} else if _, err := os.Stat("/etc/hosts"); err == nil {
			add("--ro-bind", "/etc/hosts", "/etc/hosts")
		}
	} else {
		ents, _ := os.ReadDir(o.rootfs)
		for _, e := range ents {
			if reserved[e.Name()] {
				continue
			}
			src := filepath.Join(o.rootfs, e.Name())
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				if target, err := os.Readlink(src); err == nil {
					add("--symlink", target, "/"+e.Name())
				}
			case e.IsDir():
				add("--ro-bind", src, "/"+e.Name())
			}
		}
		// Our passwd/group/hosts go over the rootfs's own only where a file exists to
		// mount on: bwrap cannot create files inside a read-only bind.
		for _, name := range []string{"passwd", "group", "hostname", "hosts"} {
			if name == "hosts" && o.network {
				continue
			}
			if fi, err := os.Stat(filepath.Join(o.rootfs, "etc", name)); err == nil && fi.Mode().IsRegular() {
				add("--ro-bind", filepath.Join(s.dir, "etc", name), "/etc/"+name)
			}
		}
		if o.network {
			if fi, err := os.Stat(filepath.Join(o.rootfs, "etc", "resolv.conf")); err == nil && fi.Mode().IsRegular() {
				add("--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf")
			}
		}
	}
	for _, b := range o.roBinds {
		add("--ro-bind", b, b)
	}
	for _, m := range s.mounts() {
		add("--bind", filepath.Join(s.dir, m[1]), m[0])
	}
	for _, c := range s.caches {
		add("--bind", c.hostDir, c.Path)
	}
	add("--proc", "/proc", "--dev", "/dev")
	add("--unshare-all", "--unshare-user", "--disable-userns")
	if o.network {
		add("--share-net")
	}
	add("--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID),
		"--hostname", "sandbox", "--chdir", dir, "--json-status-fd", "3")
	return a
}

// environ is the command's whole environment: base, Spec.Env, Cmd.Env. It is handed to
// bwrap as its own environment, never as --setenv arguments, so values do not show up
// in the host's process list.
func (s *Sandbox) environ(extra map[string]string) []string {
	// TMPDIR stays unset (its default is /tmp): Go's test cache keys results on the
	// variables a test reads, and a value the host does not set would make every cached
	// test result from the host's own runs miss.
	env := map[string]string{
		"PATH": s.opts.path, "HOME": HomeDir, "USER": "sandbox", "LOGNAME": "sandbox",
		"LANG": "C.UTF-8",
	}
	for _, c := range s.caches {
		for k, v := range c.Env {
			env[k] = v
		}
	}
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("environment variable name %q: want a non-empty name without '=' or NUL", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %s: value contains NUL", k)
		}
	}
	return nil
}

// command builds the host command: optional cgroup join, optional prlimit, bwrap.
func (s *Sandbox) command(dir string, argv []string) []string {
	var cmd []string
	if s.cg != nil {
		files := s.cg.procsFiles()
		cmd = append(cmd, "/bin/sh", "-c",
			`n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"`,
			"talkops-cgroup-join", strconv.Itoa(len(files)))
		cmd = append(cmd, files...)
	}
	if len(s.rlimit) > 0 {
		cmd = append(cmd, "prlimit")
		cmd = append(cmd, s.rlimit...)
		cmd = append(cmd, "--")
	}
	if h := s.currentHolder(); h != nil {
		cmd = append(cmd, h.enter()...)
	}
	cmd = append(cmd, s.opts.bwrap)
	cmd = append(cmd, s.profile(dir)...)
	cmd = append(cmd, "--")
	return append(cmd, argv...)
}

// resolveDir turns Cmd.Dir into an absolute sandbox path.
func (s *Sandbox) resolveDir(dir string) string {
	if dir == "" {
		return s.opts.workDir
	}
	if path.IsAbs(dir) {
		return path.Clean(dir)
	}
	return path.Join(s.opts.workDir, dir)
}

// begin registers a command so that Close can cancel it.
func (s *Sandbox) begin(cancel context.CancelFunc) (*runningCmd, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, providers.ErrClosed
	}
	rc := &runningCmd{cancel: cancel}
	if s.running == nil {
		s.running = map[*runningCmd]struct{}{}
	}
	s.running[rc] = struct{}{}
	s.wg.Add(1)
	return rc, nil
}

func (s *Sandbox) end(rc *runningCmd) {
	s.mu.Lock()
	delete(s.running, rc)
	s.mu.Unlock()
	s.wg.Done()
}

func (s *Sandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// errCloseKilled is the cancel cause when Close kills a running command.
var errCloseKilled = errors.New("sandbox closed while the command ran")

// Exec runs one command in a fresh bwrap sandbox over the sandbox directories.
func (s *Sandbox) Exec(ctx context.Context, c providers.Cmd) (providers.ExecResult, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return providers.ExecResult{}, errors.New("bwrap exec: empty argv")
	}
	if err := checkEnv(c.Env); err != nil {
		return providers.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", c.Argv[0], err)
	}
	if err := ctx.Err(); err != nil {
		return providers.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", c.Argv[0], err)
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rc, err := s.begin(func() { cancel(errCloseKilled) })
	if err != nil {
		return providers.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", c.Argv[0], err)
	}
	defer s.end(rc)
	if c.Timeout > 0 {
		var tcancel context.CancelFunc
		runCtx, tcancel = context.WithTimeoutCause(runCtx, c.Timeout, context.DeadlineExceeded)
		defer tcancel()
	}

	args := s.command(s.resolveDir(c.Dir), c.Argv)
	cmd := exec.CommandContext(runCtx, args[0], args[1:]...)
	cmd.Env = s.environ(c.Env)
	cmd.Dir = s.dir
	// Pdeathsig: bwrap dies with talkops even if --die-with-parent misses it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		// bwrap's PID namespace dies with it, so killing the group kills every
		// process of the command, including ones that started their own session.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 2 * time.Second
	stdout := providers.NewCappedBuffer(c.OutputLimit)
	stderr := providers.NewCappedBuffer(c.OutputLimit)
	cmd.Stdout, cmd.Stderr = tee(stdout, c.Stdout), tee(stderr, c.Stderr)
	cmd.Stdin = c.Stdin
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return providers.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", c.Argv[0], err)
	}
	defer statusR.Close()
	cmd.ExtraFiles = []*os.File{statusW}

	var oomBefore, pidsBefore int64
	if s.cg != nil {
		oomBefore, pidsBefore = s.cg.counters()
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		statusW.Close()
		return providers.ExecResult{}, fmt.Errorf("bwrap exec %s: start: %w", c.Argv[0], err)
	}
	statusW.Close()
	statusCh := make(chan []byte, 1)
	go func() { // ends at EOF: when bwrap and everything holding the pipe have exited
		b, _ := io.ReadAll(io.LimitReader(statusR, 1<<16))
		statusCh <- b
	}()
	waitErr := cmd.Wait()
	res := providers.ExecResult{Duration: time.Since(start)}
	var status []byte
	select {
	case status = <-statusCh:
	case <-time.After(2 * time.Second):
		statusR.Close()
	}

	if cause := context.Cause(runCtx); cause != nil && ctx.Err() == nil && !errors.Is(cause, errCloseKilled) {
		// Our own timeout fired (the parent context is still live).
		res.ExitCode, res.TimedOut = 124, true
		fmt.Fprintf(stderr, "\ntalkops: killed: command timed out after %s\n", c.Timeout)
	}
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.Truncated = stdout.Truncated() || stderr.Truncated()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bwrap exec %s: %w", c.Argv[0], err)
	}
	if errors.Is(context.Cause(runCtx), errCloseKilled) {
		return res, fmt.Errorf("bwrap exec %s: %w", c.Argv[0], providers.ErrClosed)
	}
	if res.TimedOut {
		return res, nil
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	default:
		return res, fmt.Errorf("bwrap exec %s: %w", c.Argv[0], waitErr)
	}

	ran := bytes.Contains(status, []byte(`"exit-code"`))
	if !ran && res.ExitCode != 0 {
		if code, ok := execFailure(res.Stderr); ok {
			res.ExitCode = code
			return res, nil
		}
		if !bytes.Contains(status, []byte(`"child-pid"`)) && res.ExitCode != 137 {
			// bwrap (or the cgroup/prlimit wrapper) failed before starting the command.
			return res, fmt.Errorf("bwrap exec %s: sandbox setup failed (exit %d): %s",
				c.Argv[0], res.ExitCode, lastLines(res.Stderr, 5))
		}
		if msg := setupFailure(res.Stderr); msg != "" {
			return res, fmt.Errorf("bwrap exec %s: sandbox setup failed: %s", c.Argv[0], msg)
		}
	}
	s.explainLimit(&res, oomBefore, pidsBefore)
	return res, nil
}

// explainLimit appends the cause to stderr when a limit ended or broke the command.
func (s *Sandbox) explainLimit(res *providers.ExecResult, oomBefore, pidsBefore int64) {
	var note string
	if s.cg != nil {
		oom, pids := s.cg.counters()
		switch {
		case oom > oomBefore && res.ExitCode != 0:
			note = providers.MemoryLimitNote(s.limits.Memory)
			if res.ExitCode != 137 {
				note = "a process was " + note
			}
		case pids > pidsBefore && res.ExitCode != 0:
			note = fmt.Sprintf("pids limit (%d processes/threads) reached: fork failed", s.limits.Pids)
		}
	}
	if note == "" && res.ExitCode == 128+int(syscall.SIGXCPU) && s.limits.CPUSeconds > 0 {
		note = fmt.Sprintf("killed: cpu time limit (%ds) exceeded", s.limits.CPUSeconds)
	}
	if note == "" {
		return
	}
	sep := ""
	if len(res.Stderr) > 0 && res.Stderr[len(res.Stderr)-1] != '\n' {
		sep = "\n"
	}
	res.Stderr = append(res.Stderr, []byte(sep+"talkops: "+note+"\n")...)
}

// execFailure recognises bwrap's report that the program could not be executed and maps
// it to the shell's exit codes: 127 not found, 126 not executable.
func execFailure(stderr []byte) (int, bool) {
	last := lastLines(stderr, 1)
	if !strings.HasPrefix(last, "bwrap: execvp ") {
		return 0, false
	}
	if strings.HasSuffix(last, "No such file or directory") {
		return 127, true
	}
	return 126, true
}

// setupFailure returns bwrap's message when it failed after forking the sandbox but
// before running the command (a bad bind, a missing working directory).
func setupFailure(stderr []byte) string {
	last := lastLines(stderr, 1)
	if strings.HasPrefix(last, "bwrap: ") {
		return last
	}
	return ""
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func tee(capture *providers.CappedBuffer, w io.Writer) io.Writer {
	if w == nil {
		return capture
	}
	return io.MultiWriter(capture, w)
}

// hostPath maps a sandbox path to (host mount dir, relative path) for the persistent
// directories; other paths are not reachable from the host.
func (s *Sandbox) hostPath(p string) (string, string, error) {
	p = s.resolveDir(p)
	for _, m := range s.mounts() {
		host := filepath.Join(s.dir, m[1])
		if m[1] == "workspace" {
			s.mu.Lock()
			if s.layered {
				host = s.holder.root(host) // the overlay exists only in the holder's namespace
			}
			s.mu.Unlock()
		}
		if p == m[0] {
			return host, ".", nil
		}
		if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m[0], "/")+"/"); ok {
			return host, rel, nil
		}
	}
	return "", "", fmt.Errorf("%s is outside the sandbox's writable directories (%s, /tmp, %s): %w",
		p, s.opts.workDir, HomeDir, providers.ErrNotSupported)
}

// Upload extracts a gzip-compressed tar stream into dir.
func (s *Sandbox) Upload(ctx context.Context, dir string, tgz io.Reader) error {
	if s.isClosed() {
		return fmt.Errorf("bwrap upload %s: %w", dir, providers.ErrClosed)
	}
	mount, rel, err := s.hostPath(dir)
	if err != nil {
		return fmt.Errorf("bwrap upload: %w", err)
	}
	root, err := os.OpenRoot(mount)
	if err != nil {
		return fmt.Errorf("bwrap upload %s: %w", dir, err)
	}
	defer root.Close()
	if rel != "." {
		if err := root.MkdirAll(rel, 0o755); err != nil {
			return fmt.Errorf("bwrap upload %s: %w", dir, err)
		}
		sub, err := root.OpenRoot(rel)
		if err != nil {
			return fmt.Errorf("bwrap upload %s: %w", dir, err)
		}
		defer sub.Close()
		root = sub
	}
	if err := (archive.Extractor{}).ExtractRoot(ctx, tgz, root); err != nil {
		return fmt.Errorf("bwrap upload %s: %w", dir, err)
	}
	return nil
}

// Download opens a regular file under the working directory, /tmp or the home
// directory. Symlinks that leave the sandbox directory are refused.
func (s *Sandbox) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("bwrap download %s: %w", p, providers.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bwrap download %s: %w", p, err)
	}
	mount, rel, err := s.hostPath(p)
	if err != nil {
		return nil, fmt.Errorf("bwrap download: %w", err)
	}
	root, err := os.OpenRoot(mount)
	if err != nil {
		return nil, fmt.Errorf("bwrap download %s: %w", p, err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("bwrap download %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bwrap download %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("bwrap download %s: not a regular file (%s)", p, fi.Mode().Type())
	}
	return f, nil
}

// Close kills running commands and, for a sandbox this process created, removes its
// directory and cgroup. The second call returns nil.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for rc := range s.running {
		rc.cancel()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var waitErr error
	select {
	case <-done:
	case <-ctx.Done():
		// The commands were sent SIGKILL; remove the directory anyway rather than leave
		// it to gc.
		waitErr = fmt.Errorf("close bwrap sandbox %s: waiting for commands to die: %w", s.id, ctx.Err())
	}
	s.mu.Lock()
	h := s.holder
	s.holder, s.layered = nil, false
	s.mu.Unlock()
	h.stop() // unmounts every layer; the upper directories keep only what the run wrote
	if !s.owned {
		return waitErr
	}
	// The link tree is as large as the project: it goes to the trash, to be removed
	// after teardown (see trash.go), so that teardown costs what the run wrote.
	// A tree that could be neither moved nor removed still leaves the rest of the
	// sandbox (its cgroup, the run's writes) to destroy.
	var discardErr error
	lower := s.layerDirs("workspace").lower
	if _, err := os.Lstat(lower); err == nil {
		var entry string
		if entry, discardErr = discard(s.opts.baseDir(), lower); entry != "" {
			removeInBackground(s.opts.baseDir(), entry)
		}
	}
	if err := errors.Join(discardErr, s.destroy()); err != nil {
		return errors.Join(waitErr, fmt.Errorf("close bwrap sandbox %s: %w", s.id, err))
	}
	return waitErr
}

// destroy removes the sandbox directory and cgroup; missing ones are fine.
func (s *Sandbox) destroy() error {
	var errs []error
	if s.cg != nil {
		errs = append(errs, s.cg.remove())
	}
	if err := removeAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeAll is os.RemoveAll that also handles directories a command made read-only.
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove sandbox directory: %w", err)
	}
	return nil
}

// String renders the limits as JSON, for logs.
func (l Limits) String() string {
	b, _ := json.Marshal(l)
	return string(b)
}

var _ providers.StreamExecer = (*Sandbox)(nil)

// ExecStream starts cmd in the sandbox with its stdin and stdout as streams
// (providers.StreamExecer), confined exactly as Exec confines a command.
func (s *Sandbox) ExecStream(ctx context.Context, c providers.Cmd) (*providers.Stream, error) {
	return providers.StreamOverExec(ctx, s.Exec, c)
}

// hostSystemArgs show the host's /usr read-only, with /bin, /lib and the like as the host
// has them (symlinks into /usr on a merged-/usr system, read-only binds otherwise). Only
// these, never / itself: a recursive bind of / also walks every mount below it, and one
// that goes away meanwhile (a container another process removes) fails the whole sandbox.
func hostSystemArgs() []string {
	a := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		hostPath := "/" + d
		fi, err := os.Lstat(hostPath)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(hostPath); err == nil {
				a = append(a, "--symlink", target, hostPath)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", hostPath, hostPath)
		}
	}
	return a
}
