package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/talkops/talkops/providers"
)

// execTokenVar marks every process of one Exec (it is inherited by children), so that a
// timeout or cancel can find and kill the whole tree, including processes that started
// their own session or were re-parented to PID 1.
const execTokenVar = "TALKOPS_EXEC_ID"

// Sandbox is one container.
type Sandbox struct {
	cli   *client.Client
	id    string
	name  string
	owned bool
	// volume is the named volume holding the working directory ("" when attached): it is
	// removed after the container, so the container goes fast whatever the run wrote.
	volume string
	// plainTar: the engine is on a local socket, so uploads go as uncompressed tar.
	plainTar bool
	// caches are the shared caches the container mounts; cacheNotes say why others
	// are not shared.
	caches     []cacheVolumes
	cacheNotes []string
	opts       resolved
	env        map[string]string

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed by Close: running Execs return ErrClosed
	oomSeen int64         // the container's oom_kill counter at the last check
	uid     int           // numeric ids of Options.User, -1 when commands run as the image's user
	gid     int
	wg      sync.WaitGroup
	// teardownNote says what Close left the engine to finish.
	teardownNote string
}

var _ providers.Sandbox = (*Sandbox)(nil)

// ID is the container id.
func (s *Sandbox) ID() string { return s.id }

// Name is the container name, "talkops-<run>-<hex>".
func (s *Sandbox) Name() string { return s.name }

// WorkDir is the container's working directory.
func (s *Sandbox) WorkDir() string { return s.opts.workDir }

func (s *Sandbox) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return providers.ErrClosed
	}
	s.wg.Add(1)
	return nil
}

func (s *Sandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Sandbox) resolve(p string) string {
	if p == "" {
		return s.opts.workDir
	}
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(s.opts.workDir, p)
}

// Exec runs a command with docker exec and waits for it.
//
// On Cmd.Timeout, ctx cancellation or Close, the command's processes are killed from
// inside the container: a second exec (as root) sends SIGKILL to every process whose
// environment carries this command's TALKOPS_EXEC_ID token, twice, so that children
// forked meanwhile die too. That needs /bin/sh and grep in the image; without them, and
// when the engine is on this host, the exec'd process itself is killed by its host PID.
func (s *Sandbox) Exec(ctx context.Context, c providers.Cmd) (providers.ExecResult, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return providers.ExecResult{}, errors.New("docker exec: empty argv")
	}
	if err := checkEnv(c.Env); err != nil {
		return providers.ExecResult{}, fmt.Errorf("docker exec %s: %w", c.Argv[0], err)
	}
	if err := s.begin(); err != nil {
		return providers.ExecResult{}, fmt.Errorf("docker exec %s: %w", c.Argv[0], err)
	}
	defer s.wg.Done()
	return s.exec(ctx, c, s.opts.user)
}

func (s *Sandbox) environ(extra map[string]string, token string) []string {
	// An exec inherits the container's environment, so without the path option PATH
	// is the image's own (the engine supplies a default when the image sets none).
	env := map[string]string{}
	if s.opts.path != "" {
		env["PATH"] = s.opts.path
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
	env[execTokenVar] = token
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (s *Sandbox) exec(ctx context.Context, c providers.Cmd, user string) (providers.ExecResult, error) {
	argv0 := c.Argv[0]
	if err := ctx.Err(); err != nil {
		return providers.ExecResult{}, fmt.Errorf("docker exec %s: %w", argv0, err)
	}
	var tok [8]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	created, err := s.cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		Cmd:          c.Argv,
		Env:          s.environ(c.Env, token),
		WorkingDir:   s.resolve(c.Dir),
		User:         user,
		AttachStdin:  c.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return providers.ExecResult{}, s.execErr(ctx, argv0, "create", err)
	}
	resp, err := s.startExec(ctx, created.ID)
	if err != nil {
		return providers.ExecResult{}, s.execErr(ctx, argv0, "start", err)
	}
	defer resp.Close()
	start := time.Now()

	stdout := providers.NewCappedBuffer(c.OutputLimit)
	stderr := providers.NewCappedBuffer(c.OutputLimit)
	outW, errW := tee(stdout, c.Stdout), tee(stderr, c.Stderr)
	if c.Stdin != nil {
		go func() { // ends when stdin is drained or the connection closes
			_, _ = io.Copy(resp.Conn, c.Stdin)
			_ = resp.CloseWrite()
		}()
	}
	copyDone := make(chan struct{})
	go func() { // ends at EOF, i.e. when the command exits or resp is closed
		defer close(copyDone)
		// A stream that breaks keeps what was read; the exit code comes from the engine
		// (exitCode below), and a closed resp is how abort and Close end the copy.
		_, _ = stdcopy.StdCopy(outW, errW, resp.Reader)
	}()

	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	res := providers.ExecResult{}
	finish := func() {
		res.Duration = time.Since(start)
		res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
		res.Truncated = stdout.Truncated() || stderr.Truncated()
	}
	// abort kills the command and waits (bounded) for its output to end.
	abort := func() {
		s.killExec(ctx, created.ID, token)
		select {
		case <-copyDone:
		case <-time.After(5 * time.Second):
			resp.Close()
			<-copyDone
		}
	}
	select {
	case <-copyDone:
	case <-ctx.Done():
		abort()
		finish()
		return res, fmt.Errorf("docker exec %s: %w", argv0, ctx.Err())
	case <-s.closing:
		resp.Close()
		<-copyDone
		finish()
		return res, fmt.Errorf("docker exec %s: %w", argv0, providers.ErrClosed)
	case <-timeout:
		abort()
		fmt.Fprintf(stderr, "\ntalkops: killed: command timed out after %s\n", c.Timeout)
		finish()
		res.ExitCode, res.TimedOut = 124, true
		return res, nil
	}
	finish()

	code, err := s.exitCode(ctx, created.ID)
	if err != nil {
		return res, s.execErr(ctx, argv0, "inspect", err)
	}
	res.ExitCode = code
	if code == 126 && strings.HasPrefix(string(res.Stdout), "OCI runtime exec failed") {
		// The engine reports a command it could not start on the stdout stream.
		msg := strings.TrimSpace(string(res.Stdout))
		res.Stdout = nil
		switch {
		case strings.Contains(msg, "chdir to cwd"):
			return res, fmt.Errorf("docker exec %s: working directory %s: %w (%s)", argv0, s.resolve(c.Dir), fs.ErrNotExist, msg)
		case strings.Contains(msg, "executable file not found"), strings.Contains(msg, "no such file or directory"):
			res.ExitCode = 127
		}
		res.Stderr = append(res.Stderr, []byte(msg+"\n")...)
	}
	if res.ExitCode == 137 && s.oomKilled(ctx) {
		res.Stderr = append(res.Stderr, []byte("talkops: "+providers.MemoryLimitNote(s.opts.memory)+"\n")...)
	}
	return res, nil
}

// startExec starts an exec and takes over its connection for the streams, as the
// client's ContainerExecAttach does, except that ctx and Close abandon the wait for the
// engine's answer. The client writes that request and reads the answer on a raw
// connection that no context reaches (moby/moby#36543): an engine that never answers
// would hold the run past --timeout and every signal. Here the connection is closed
// when ctx ends or the sandbox closes, which ends the wait and leaves nothing behind.
func (s *Sandbox) startExec(ctx context.Context, execID string) (types.HijackedResponse, error) {
	req, err := s.execStartRequest(ctx, execID)
	if err != nil {
		return types.HijackedResponse{}, err
	}
	conn, err := s.cli.Dialer()(ctx)
	if err != nil {
		return types.HijackedResponse{}, fmt.Errorf("connect to the docker engine at %s: %w", s.cli.DaemonHost(), err)
	}
	stop := make(chan struct{})
	var abandoned atomic.Bool
	var watch sync.WaitGroup
	watch.Go(func() { // ends when the handshake ends, ctx ends or the sandbox closes
		select {
		case <-stop:
			return
		case <-ctx.Done():
		case <-s.closing:
		}
		abandoned.Store(true)
		conn.Close()
	})
	br := bufio.NewReader(conn)
	var resp *http.Response
	err = req.Write(conn)
	if err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if resp != nil {
		// A 101's body is empty (http.NoBody): closing it leaves the connection open.
		defer resp.Body.Close()
	}
	close(stop)
	watch.Wait()
	switch {
	case abandoned.Load():
		conn.Close()
		if ctx.Err() != nil {
			return types.HijackedResponse{}, ctx.Err()
		}
		return types.HijackedResponse{}, providers.ErrClosed
	case err != nil:
		conn.Close()
		return types.HijackedResponse{}, err
	case resp.StatusCode != http.StatusSwitchingProtocols:
		defer conn.Close()
		return types.HijackedResponse{}, engineError(resp)
	}
	return types.NewHijackedResponse(&hijackedConn{Conn: conn, r: br}, resp.Header.Get("Content-Type")), nil
}

// execStartRequest is POST /exec/{id}/start, built as the client builds it: the API
// version the client negotiated (its exec create ran first), the host's base path, and
// the dummy Host header for local sockets.
func (s *Sandbox) execStartRequest(ctx context.Context, execID string) (*http.Request, error) {
	host, err := client.ParseHostURL(s.cli.DaemonHost())
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", s.cli.DaemonHost(), err)
	}
	p := path.Join("/", host.Path, "exec", url.PathEscape(execID), "start")
	if v := strings.TrimPrefix(s.cli.ClientVersion(), "v"); v != "" {
		p = path.Join("/", host.Path, "v"+v, "exec", url.PathEscape(execID), "start")
	}
	body, err := json.Marshal(container.ExecAttachOptions{})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Host = host.Host
	if host.Scheme == "unix" || host.Scheme == "npipe" {
		req.Host = client.DummyHost
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	return req, nil
}

// engineError turns an answer other than 101 into an error carrying the engine's
// message; a 404 (the exec or its container is gone) matches cerrdefs.IsNotFound.
func engineError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var msg struct {
		Message string `json:"message"`
	}
	text := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &msg) == nil && msg.Message != "" {
		text = msg.Message
	}
	err := fmt.Errorf("engine answered %s: %s", resp.Status, text)
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", cerrdefs.ErrNotFound, err)
	}
	return err
}

// hijackedConn reads through the buffer that read the engine's answer, which may
// already hold the first bytes of the stream.
type hijackedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *hijackedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection (end of stdin) when the transport can.
func (c *hijackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(types.CloseWriter); ok {
		return cw.CloseWrite()
	}
	return nil
}

// execErr wraps an engine error, preferring the context's or Close's cause.
func (s *Sandbox) execErr(ctx context.Context, argv0, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("docker exec %s: %w", argv0, ctx.Err())
	}
	if s.isClosed() {
		return fmt.Errorf("docker exec %s: %w", argv0, providers.ErrClosed)
	}
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker exec %s: %s: container %s is gone: %w", argv0, what, s.id, err)
	}
	return fmt.Errorf("docker exec %s: %s: %w", argv0, what, err)
}

// exitCode waits (bounded) until the engine marks the exec finished.
func (s *Sandbox) exitCode(ctx context.Context, execID string) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return 0, err
		}
		if !st.Running {
			return st.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("exec %s still running after its output ended", execID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killScript kills every process whose environment holds the token. It runs twice so
// children forked during the first pass die too.
const killScript = `t="$1"; for pass in 1 2; do for e in /proc/[0-9]*/environ; do ` +
	`if grep -q "^` + execTokenVar + `=$t\$" "$e" 2>/dev/null || tr '\0' '\n' < "$e" 2>/dev/null | grep -qx "` + execTokenVar + `=$t"; then ` +
	`p=${e#/proc/}; kill -9 "${p%/environ}" 2>/dev/null; fi; done; done; exit 0`

// killExec kills the command's processes; it runs on a context that outlives ctx.
func (s *Sandbox) killExec(ctx context.Context, execID, token string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	res, err := s.exec(kctx, providers.Cmd{Argv: []string{"/bin/sh", "-c", killScript, "talkops-kill", token}}, "0")
	if err == nil && res.ExitCode == 0 {
		return
	}
	// No shell in the image: kill the exec'd process by its host PID when the engine
	// runs on this host (the PID is meaningless for a remote engine).
	if !engineOnThisMachine(s.cli) {
		return
	}
	if st, err := s.cli.ContainerExecInspect(kctx, execID); err == nil && st.Running && st.Pid > 0 {
		_ = syscall.Kill(st.Pid, syscall.SIGKILL)
	}
}

// oomKilled reports whether the container's memory cgroup OOM-killed a process since
// the last check. It reads the kernel's oom_kill counter from inside the container (cgroup
// v1 memory.oom_control or v2 memory.events), because the engine's OOMKilled flag covers
// PID 1 only.
func (s *Sandbox) oomKilled(ctx context.Context) bool {
	res, err := s.exec(ctx, providers.Cmd{Argv: []string{"cat", "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"}}, "0")
	if err != nil {
		return false
	}
	var n int64 = -1
	for line := range strings.Lines(string(res.Stdout)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			if k, err := strconv.ParseInt(v, 10, 64); err == nil {
				n = k
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > s.oomSeen {
		s.oomSeen = n
		return true
	}
	return false
}

func tee(capture *providers.CappedBuffer, w io.Writer) io.Writer {
	if w == nil {
		return capture
	}
	return io.MultiWriter(capture, w)
}

var _ providers.PlainTarUploader = (*Sandbox)(nil)

// Upload extracts a gzip-compressed tar stream into dir, creating dir first. The engine
// extracts it inside the container's file system, so no entry can reach the host.
func (s *Sandbox) Upload(ctx context.Context, dir string, tgz io.Reader) error {
	return s.upload(ctx, dir, tgz, true)
}

// PlainTarUpload reports whether the engine is on a local socket (unix or npipe), where
// the archive is better sent uncompressed; over TCP gzip saves more than it costs.
func (s *Sandbox) PlainTarUpload() bool { return s.plainTar }

// UploadTar is Upload for an uncompressed tar stream (the engine takes both).
func (s *Sandbox) UploadTar(ctx context.Context, dir string, tar io.Reader) error {
	return s.upload(ctx, dir, tar, false)
}

// engineOnThisMachine reports whether the engine runs on this machine (reached through a
// unix socket), so that a host path or host PID it gives or takes is one of this
// machine's. A socket alone (isLocalEngine) is enough for cheap uploads; this is stricter.
func engineOnThisMachine(cli *client.Client) bool {
	return strings.HasPrefix(cli.DaemonHost(), "unix://")
}

// isLocalEngine reports an engine reached through a local socket rather than TCP.
func isLocalEngine(host string) bool {
	return strings.HasPrefix(host, "unix://") || strings.HasPrefix(host, "npipe://")
}

func (s *Sandbox) upload(ctx context.Context, dir string, archive io.Reader, gzipped bool) error {
	if err := s.begin(); err != nil {
		return fmt.Errorf("docker upload %s: %w", dir, err)
	}
	defer s.wg.Done()
	dst := s.resolve(dir)
	if _, err := s.cli.ContainerStatPath(ctx, s.id, dst); err != nil {
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker upload %s: %w", dst, err)
		}
		res, err := s.exec(ctx, providers.Cmd{Argv: []string{"mkdir", "-p", "--", dst}}, s.opts.user)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("mkdir -p %s: exit %d: %s", dst, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			return fmt.Errorf("docker upload %s: %w", dst, err)
		}
	}
	content := archive
	if s.uid >= 0 {
		content = chownTar(archive, gzipped, s.uid, s.gid)
	}
	err := s.cli.CopyToContainer(ctx, s.id, dst, content, container.CopyToContainerOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker upload %s: %w", dst, ctx.Err())
		}
		return fmt.Errorf("docker upload %s: %w", dst, err)
	}
	return nil
}

// Download opens a regular file; a symlink is followed once, within the container.
func (s *Sandbox) Download(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := s.begin(); err != nil {
		return nil, fmt.Errorf("docker download %s: %w", p, err)
	}
	defer s.wg.Done()
	src := s.resolve(p)
	st, err := s.cli.ContainerStatPath(ctx, s.id, src)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("docker download %s: %w", src, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("docker download %s: %w", src, err)
	}
	if st.Mode&fs.ModeSymlink != 0 && st.LinkTarget != "" {
		src = st.LinkTarget
	}
	rc, _, err := s.cli.CopyFromContainer(ctx, s.id, src)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("docker download %s: %w", src, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("docker download %s: %w", src, err)
	}
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("docker download %s: read archive: %w", src, err)
	}
	if hdr.Typeflag != tar.TypeReg {
		rc.Close()
		return nil, fmt.Errorf("docker download %s: not a regular file", src)
	}
	return readCloser{Reader: tr, Closer: rc}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Close stops running commands and force-removes the container if this process created
// it, then asks the engine to remove its volumes (the workspace and the shared caches'
// layers). Removing a volume deletes every file in it, which can outlast a cancelled
// job's teardown budget: Close waits for that at most volumeHandoff, then returns with
// TeardownNote saying that the engine finishes the removal, which it does whether or not
// talkops is still there; a volume it does not finish is left, labelled, for
// `talkops sandbox gc`. The second call returns nil.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	var err error
	if s.owned {
		err = s.remove(ctx)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("close docker sandbox %s: waiting for commands: %w", s.id, ctx.Err()))
	}
	return err
}

var _ providers.TeardownNoter = (*Sandbox)(nil)

// TeardownNote says what Close left the engine to finish, "" when nothing.
func (s *Sandbox) TeardownNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.teardownNote
}

// Bounds on the removal of a sandbox's volumes.
const (
	// volumeHandoff is how long Close waits for the engine to remove the volumes before
	// it leaves the engine to finish: well inside the 7 s a signal's teardown gets.
	volumeHandoff = 2 * time.Second
	// volumeRemovalTimeout bounds the removal requests, which go on after Close returns.
	volumeRemovalTimeout = 10 * time.Minute
)

func (s *Sandbox) remove(ctx context.Context) error {
	if err := removeContainer(ctx, s.cli, s.id); err != nil {
		return fmt.Errorf("close docker sandbox %s: remove container: %w", s.id, err)
	}
	var overlays, layers []string
	for _, c := range s.caches {
		if v := c.volumes(); len(v) > 0 {
			overlays = append(overlays, v[0])
			layers = append(layers, v[1:]...)
		}
	}
	if s.volume != "" {
		layers = append(layers, s.volume)
	}
	if len(layers) == 0 {
		return nil
	}
	start := time.Now()
	removed := make(chan error, 1)
	go func() { // ends when the engine has answered every removal, or volumeRemovalTimeout
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), volumeRemovalTimeout)
		defer cancel()
		removed <- removeVolumes(rctx, s.cli, overlays, layers)
	}()
	wait := time.NewTimer(volumeHandoff)
	defer wait.Stop()
	select {
	case err := <-removed:
		if err != nil {
			return fmt.Errorf("close docker sandbox %s: %w", s.id, err)
		}
		return nil
	case <-wait.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.teardownNote = fmt.Sprintf("container removed; the engine was still removing volume(s) %s %s after the request and finishes after talkops exits (`talkops sandbox gc` removes any it does not)",
		strings.Join(append(overlays, layers...), ", "), time.Since(start).Round(time.Millisecond))
	s.mu.Unlock()
	return nil
}

// removeVolumes removes the overlay volumes first (the layers below them must outlive
// their mounts), then the other volumes side by side: each removal deletes the files in
// that volume, and the engine removes volumes of different names in parallel.
func removeVolumes(ctx context.Context, cli *client.Client, overlays, others []string) error {
	var errs []error
	for _, v := range overlays {
		if err := removeVolume(ctx, cli, v); err != nil {
			errs = append(errs, fmt.Errorf("remove volume %s (`talkops sandbox gc` removes it later): %w", v, err))
		}
	}
	results := make([]error, len(others))
	var wg sync.WaitGroup
	for i, v := range others {
		wg.Go(func() {
			if err := removeVolume(ctx, cli, v); err != nil {
				results[i] = fmt.Errorf("remove volume %s (`talkops sandbox gc` removes it later): %w", v, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, results...)...)
}

// chownTar re-encodes a tar stream (gzip-compressed or not) as a plain tar whose entries
// belong to uid:gid, so that a non-root sandbox user owns what Upload puts in its workspace.
func chownTar(archive io.Reader, gzipped bool, uid, gid int) io.Reader {
	pr, pw := io.Pipe()
	go func() { // ends when the input is consumed or the reader side is closed
		pw.CloseWithError(rewriteOwner(archive, gzipped, pw, uid, gid))
	}()
	return pr
}

func rewriteOwner(archive io.Reader, gzipped bool, w io.Writer, uid, gid int) error {
	if gzipped {
		zr, err := gzip.NewReader(archive)
		if err != nil {
			return fmt.Errorf("read upload archive: %w", err)
		}
		archive = zr
	}
	tr := tar.NewReader(archive)
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read upload archive: %w", err)
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = uid, gid, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

var _ providers.StreamExecer = (*Sandbox)(nil)

// ExecStream starts cmd in the container with its stdin and stdout as streams
// (providers.StreamExecer): docker exec attaches both, and Exec copies them as they flow.
func (s *Sandbox) ExecStream(ctx context.Context, c providers.Cmd) (*providers.Stream, error) {
	return providers.StreamOverExec(ctx, s.Exec, c)
}
