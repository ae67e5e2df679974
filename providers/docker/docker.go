// Package docker is the "docker" sandbox provider: each sandbox is a long-running
// container (network "none", memory and pids limits, labelled for gc) that commands are
// exec'd into through the Docker Engine API.
//
// The engine is found the way the docker CLI finds it (DOCKER_HOST, DOCKER_TLS_VERIFY,
// DOCKER_CERT_PATH) and the API version is negotiated, so engines from API 1.41 (Docker
// 20.10) on work.
package docker

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
)

// Name is the provider id users type: --sandbox docker.
const Name = "docker"

// LabelUser records Options.User: commands run as this user, the container as root. The
// provider adds it besides the providers.Label* keys.
const LabelUser = "talkops.user"

// NamePrefix starts every container name.
const NamePrefix = "talkops-"

// keepAlive is PID 1's program: it must run until the container is removed. busybox
// sleep takes at most a 32-bit number of seconds, GNU sleep takes it too.
var keepAlive = []string{"sleep", "2147483647"}

// reapingKeepAlive replaces docker-init on engines without it: a shell as PID 1 that
// reaps orphaned processes (zombies) while it waits.
var reapingKeepAlive = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 2147483647 & wait; done"}

// Provider creates docker sandboxes. Create one with New; Close releases its client.
type Provider struct {
	opts Options

	mu     sync.Mutex
	cli    *client.Client
	ownCli bool
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New returns a provider with opts. Invalid options and an unreachable engine are
// reported by Create.
func New(opts Options) *Provider {
	return &Provider{opts: opts, cli: opts.Client}
}

// Name returns "docker".
func (p *Provider) Name() string { return Name }

// Close releases the engine client if the provider made it.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cli != nil && p.ownCli {
		err := p.cli.Close()
		p.cli = nil
		return err
	}
	return nil
}

// client returns the engine client, making one from the environment on first use.
func (p *Provider) client() (*client.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cli != nil {
		return p.cli, nil
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client from environment (DOCKER_HOST=%q): %w", os.Getenv("DOCKER_HOST"), err)
	}
	p.cli, p.ownCli = cli, true
	return cli, nil
}

// engine returns the client after checking the engine answers, with a hint when not.
func (p *Provider) engine(ctx context.Context) (*client.Client, error) {
	cli, err := p.client()
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("docker engine at %s is not reachable: %w; start the daemon or set DOCKER_HOST (e.g. unix:///var/run/docker.sock)", cli.DaemonHost(), err)
	}
	return cli, nil
}

// Create pulls the image if needed, creates and starts the container, and returns once
// it runs. Anything created is force-removed when a later step fails.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	r, err := p.opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("create docker sandbox: %w", err)
	}
	if spec.Snapshot != "" {
		r.image = spec.Snapshot
	}
	if spec.WorkDir != "" {
		if !strings.HasPrefix(spec.WorkDir, "/") {
			return nil, fmt.Errorf("create docker sandbox: %w: work dir %q: want an absolute path", providers.ErrConfig, spec.WorkDir)
		}
		r.workDir = spec.WorkDir
	}
	if err := checkEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("create docker sandbox: %w: %w", providers.ErrConfig, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create docker sandbox: %w", err)
	}
	cli, err := p.engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("create docker sandbox: %w", err)
	}
	if err := ensureImage(ctx, cli, r.image, r.pull); err != nil {
		return nil, fmt.Errorf("create docker sandbox: %w", err)
	}

	name := containerName(spec.RunID)
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[providers.LabelCreatedBy] = "talkops"
	if spec.RunID != "" {
		labels[providers.LabelRunID] = spec.RunID
	}
	if _, ok := labels[providers.LabelExpiresAt]; !ok && spec.TTL > 0 {
		labels[providers.LabelExpiresAt] = time.Now().Add(spec.TTL).UTC().Format(time.RFC3339)
	}
	labels[providers.LabelOwnerPID] = strconv.Itoa(os.Getpid())
	if host, err := os.Hostname(); err == nil {
		labels[providers.LabelOwnerHost] = host
	}

	// The working directory is a named volume of the same name and labels: removing a
	// container whose own layer holds the workspace takes time in proportion to the files
	// written, a container with a volume goes at once and the volume after it.
	vol, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels})
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), removeVolumeByName(ctx, cli, name))
		}
		return nil, fmt.Errorf("create docker sandbox: create workspace volume %s: %w", name, err)
	}
	var workNote string
	r.workDir, workNote = p.workDirFor(cli, spec, r.workDir)
	caches, cacheNotes, err := shareCaches(ctx, cli, name, labels, spec.Caches, r.workDir)
	if workNote != "" {
		cacheNotes = append(cacheNotes, workNote)
	}
	if err != nil {
		return nil, fmt.Errorf("create docker sandbox: %w", errors.Join(err, removeVolumesNow(ctx, cli, []string{vol.Name})))
	}
	id, err := p.start(ctx, cli, r, name, vol.Name, labels, caches)
	for err != nil && ctx.Err() == nil {
		// An overlay the engine cannot mount (a lower layer on a file system overlayfs
		// refuses, say) leaves that cache out, not the run; a failure the engine's message
		// does not pin on one cache leaves them all out, and the container is tried once
		// more without them.
		if len(caches) == 0 {
			break
		}
		var drop []cacheVolumes
		if i := failedCache(err, caches); i >= 0 {
			drop, caches = []cacheVolumes{caches[i]}, slices.Delete(slices.Clone(caches), i, i+1)
		} else {
			drop, caches = caches, nil
		}
		for _, c := range drop {
			cacheNotes = append(cacheNotes, fmt.Sprintf("cache %s not shared: the container did not start with it: %v", c.Name, err))
		}
		if rerr := removeVolumesNow(ctx, cli, cacheVolumeNames(drop)); rerr != nil {
			cacheNotes = append(cacheNotes, rerr.Error())
		}
		id, err = p.start(ctx, cli, r, name, vol.Name, labels, caches)
	}
	if err != nil {
		if verr := removeVolumesNow(ctx, cli, append(cacheVolumeNames(caches), vol.Name)); verr != nil {
			err = errors.Join(err, verr)
		}
		return nil, fmt.Errorf("create docker sandbox from %s: %w", r.image, err)
	}
	s := &Sandbox{cli: cli, id: id, name: name, owned: true, volume: vol.Name, plainTar: isLocalEngine(cli.DaemonHost()),
		caches: caches, cacheNotes: cacheNotes, opts: r, env: spec.Env, closing: make(chan struct{})}
	if err := s.setupUser(ctx, true); err != nil {
		return nil, errors.Join(fmt.Errorf("create docker sandbox: %w", err), s.remove(context.WithoutCancel(ctx)))
	}
	return s, nil
}

// workDirFor is the working directory of a sandbox about to share spec.Caches, and a
// note when it is not where caches want it. As on bwrap: build caches key entries by the
// source directory, so with no working directory configured the workspace (still the
// volume the project is synced into) appears at the project's own path.
func (p *Provider) workDirFor(cli *client.Client, spec providers.Spec, workDir string) (string, string) {
	if len(spec.Caches) == 0 || !engineOnThisMachine(cli) || spec.ProjectDir == "" || spec.WorkDir != "" || p.opts.WorkingDir != "" {
		return workDir, ""
	}
	dir, err := cache.ProjectWorkDir(spec.ProjectDir, spec.Caches)
	if err != nil {
		return workDir, cache.WorkDirNote(workDir, err)
	}
	return dir, ""
}

// setupUser resolves Options.User to numeric ids (uploads are re-owned to them) and
// hands the working directory, which the engine created as root, to that user. The
// container itself runs as root so that these root execs keep their capabilities: with
// a non-root container user, even `docker exec -u 0` gets none.
func (s *Sandbox) setupUser(ctx context.Context, chown bool) error {
	s.uid, s.gid = -1, -1
	if s.opts.user == "" {
		return nil
	}
	res, err := s.exec(ctx, providers.Cmd{Argv: []string{"sh", "-c", "id -u; id -g"}}, s.opts.user)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return fmt.Errorf("resolve docker option user = %q: %w", s.opts.user, err)
	}
	ids := strings.Fields(string(res.Stdout))
	if len(ids) != 2 {
		return fmt.Errorf("resolve docker option user = %q: unexpected `id` output %q", s.opts.user, res.Stdout)
	}
	uid, err1 := strconv.Atoi(ids[0])
	gid, err2 := strconv.Atoi(ids[1])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("resolve docker option user = %q: unexpected `id` output %q", s.opts.user, res.Stdout)
	}
	if chown {
		res, err = s.exec(ctx, providers.Cmd{Argv: []string{"chown", ids[0] + ":" + ids[1], s.opts.workDir}}, "0")
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			return fmt.Errorf("chown %s to user %q: %w", s.opts.workDir, s.opts.user, err)
		}
	}
	s.uid, s.gid = uid, gid
	return nil
}

// start creates and starts the container, with docker-init as PID 1 where the engine
// has it.
func (p *Provider) start(ctx context.Context, cli *client.Client, r resolved, name, vol string, labels map[string]string, caches []cacheVolumes) (string, error) {
	id, err := p.startContainer(ctx, cli, r, name, vol, labels, caches, true)
	if err != nil && isInitMissing(err) {
		// No docker-init on this engine: PID 1 becomes a reaping shell loop.
		id, err = p.startContainer(ctx, cli, r, name, vol, labels, caches, false)
	}
	return id, err
}

// startContainer creates and starts the container; on failure it removes what it made.
func (p *Provider) startContainer(ctx context.Context, cli *client.Client, r resolved, name, vol string, labels map[string]string, caches []cacheVolumes, useInit bool) (string, error) {
	cfg := &container.Config{
		Image:      r.image,
		Entrypoint: keepAlive,
		WorkingDir: r.workDir,
		Labels:     labels,
	}
	if r.user != "" {
		labels[LabelUser] = r.user
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(r.network),
		SecurityOpt: []string{"no-new-privileges:true"},
		Mounts:      append([]mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: r.workDir}}, cacheMounts(caches)...),
		Resources: container.Resources{
			Memory:   r.memory,
			NanoCPUs: r.nanoCPU,
		},
	}
	if r.memory > 0 {
		host.Resources.MemorySwap = r.memory // no swap on top of the limit
	}
	if r.pids > 0 {
		host.Resources.PidsLimit = &r.pids
	}
	if useInit {
		host.Init = &useInit
	} else {
		cfg.Entrypoint = reapingKeepAlive
	}
	// ctx cuts the create short, and the name is ours alone: an engine that finishes a
	// create after we gave up on it (or after the connection broke) leaves a container
	// that removeByName finds. One that lands even later is left to gc, by its labels.
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	created, err := cli.ContainerCreate(cctx, cfg, host, nil, nil, name)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", errors.Join(fmt.Errorf("create container %s: %w", name, err), removeByName(ctx, cli, name))
	}
	if err := ctx.Err(); err != nil {
		return "", errors.Join(err, removeQuietly(ctx, cli, created.ID))
	}
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return "", errors.Join(fmt.Errorf("start container: %w", err), removeQuietly(ctx, cli, created.ID))
	}
	return created.ID, nil
}

// Bounds on engine calls that ctx does not end, or that run after it ended.
const (
	// createTimeout bounds ContainerCreate on top of ctx.
	createTimeout = 60 * time.Second
	// removeByNameTimeout bounds the clean-up after a failed create. It runs after ctx
	// may have ended, so it is short: Create returns promptly on cancel, and gc removes
	// what this misses.
	removeByNameTimeout = 3 * time.Second
	// removalWait bounds the wait for another remover (a concurrent gc) to finish.
	removalWait = 5 * time.Second
)

// removeByName removes the container a failed create may still have made. The engine
// goes on with a create whose request was cancelled, so the container can appear a moment
// after the cancel: it is looked for until removeByNameTimeout passes. Not finding it is
// the common case and not an error.
func removeByName(ctx context.Context, cli *client.Client, name string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeByNameTimeout)
	defer cancel()
	for {
		// An engine that does not answer at once is hung: waiting on it would hold a
		// cancelled run, and gc removes what it made, by label.
		ictx, icancel := context.WithTimeout(rctx, 500*time.Millisecond)
		_, err := cli.ContainerInspect(ictx, name)
		icancel()
		switch {
		case err == nil:
			if err := removeContainer(rctx, cli, name); err != nil {
				return fmt.Errorf("remove container %s after the failed create (gc removes it later): %w", name, err)
			}
			return nil
		case !cerrdefs.IsNotFound(err):
			if errors.Is(err, context.DeadlineExceeded) || rctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("look for container %s after the failed create (gc removes it later): %w", name, err)
		}
		select {
		case <-rctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removeQuietly force-removes a container on a context that survives cancellation; a
// container that does not exist is not an error.
func removeQuietly(ctx context.Context, cli *client.Client, id string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := removeContainer(rctx, cli, id); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// removeContainer force-removes a container by id or name. One that does not exist is
// not an error. One that another remover (a second gc, a teardown racing gc) is already
// removing is done too: the engine answers "removal of container … is already in
// progress", and removeContainer waits, at most removalWait and ctx, for it to go.
func removeContainer(ctx context.Context, cli *client.Client, id string) error {
	err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case isRemovalInProgress(err):
		waitGone(ctx, cli, id, removalWait)
		return nil
	}
	return err
}

// removeVolume removes a workspace volume; one that does not exist is not an error. The
// engine refuses a volume still mounted by a container: that container (ours, labelled
// created-by talkops, left by the same run) is removed first, so that gc can delete the
// volume whichever of the two it comes to first.
func removeVolume(ctx context.Context, cli *client.Client, name string) error {
	err := cli.VolumeRemove(ctx, name, false)
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	if !cerrdefs.IsConflict(err) {
		return err
	}
	users, lerr := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("volume", name), filters.Arg("label", providers.LabelCreatedBy+"=talkops"))})
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	for _, c := range users {
		if rerr := removeContainer(ctx, cli, c.ID); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
	// A container another remover is still removing holds the volume a little longer.
	wctx, cancel := context.WithTimeout(ctx, removalWait)
	defer cancel()
	for {
		err := cli.VolumeRemove(wctx, name, false)
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if !cerrdefs.IsConflict(err) {
			return err
		}
		select {
		case <-wctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removeVolumeByName is removeByName for the workspace volume of a create that was given
// up on: the engine may still make it a moment later.
func removeVolumeByName(ctx context.Context, cli *client.Client, name string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeByNameTimeout)
	defer cancel()
	for {
		ictx, icancel := context.WithTimeout(rctx, 500*time.Millisecond)
		_, err := cli.VolumeInspect(ictx, name)
		icancel()
		switch {
		case err == nil:
			if err := removeVolume(rctx, cli, name); err != nil {
				return fmt.Errorf("remove volume %s after the failed create (gc removes it later): %w", name, err)
			}
			return nil
		case !cerrdefs.IsNotFound(err):
			if errors.Is(err, context.DeadlineExceeded) || rctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("look for volume %s after the failed create (gc removes it later): %w", name, err)
		}
		select {
		case <-rctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// isRemovalInProgress reports the engine's answer to a remove while another runs.
func isRemovalInProgress(err error) bool {
	return strings.Contains(err.Error(), "is already in progress")
}

// waitGone polls until the container is gone, the bound passes or ctx ends.
func waitGone(ctx context.Context, cli *client.Client, id string, bound time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := cli.ContainerInspect(wctx, id); cerrdefs.IsNotFound(err) {
			return
		}
		select {
		case <-wctx.Done():
			return
		case <-tick.C:
		}
	}
}

func isInitMissing(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "docker-init") || strings.Contains(msg, "init binary")
}

// ensureImage makes sure ref is on the engine, pulling it per the policy.
func ensureImage(ctx context.Context, cli *client.Client, ref, policy string) error {
	if policy != PullAlways {
		_, err := cli.ImageInspect(ctx, ref)
		if err == nil {
			return nil
		}
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("inspect image %s: %w", ref, err)
		}
		if policy == PullNever {
			return fmt.Errorf("image %s is not on the engine and docker option pull = %q: %s", ref, PullNever, imageHint(ref))
		}
	}
	rc, err := cli.ImagePull(ctx, ref, image.PullOptions{})
	if err == nil {
		err = drainPull(rc)
		rc.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pull image %s: %w", ref, ctx.Err())
		}
		if policy == PullAlways {
			if _, ierr := cli.ImageInspect(ctx, ref); ierr == nil {
				return nil // keep working offline with the local copy
			}
		}
		return fmt.Errorf("image %s is not on the engine and pulling it failed (%w): %s", ref, err, imageHint(ref))
	}
	return nil
}

func imageHint(ref string) string {
	return fmt.Sprintf("get it onto the engine with `docker pull %s` (or `docker build`/`docker import` where no registry is reachable), or pick another image with [sandboxes.providers.docker] image or --sandbox-snapshot-name", ref)
}

// drainPull reads the pull progress stream to the end and returns the first error in it.
func drainPull(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && (msg.Error != "" || msg.ErrorDetail.Message != "") {
			if msg.ErrorDetail.Message != "" {
				return errors.New(msg.ErrorDetail.Message)
			}
			return errors.New(msg.Error)
		}
	}
	return sc.Err()
}

// containerName is "talkops-<run>-<8 hex>".
func containerName(runID string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(runID) {
		if b.Len() >= 24 {
			break
		}
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	run := strings.Trim(b.String(), "-")
	if run == "" {
		run = "run"
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return NamePrefix + run + "-" + hex.EncodeToString(rnd[:])
}

// Attach connects to a running container by id or name. Close never removes it.
func (p *Provider) Attach(ctx context.Context, id string, opts providers.AttachOptions) (providers.Sandbox, error) {
	r, err := p.opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("attach docker sandbox: %w", err)
	}
	cli, err := p.engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("attach docker sandbox: %w", err)
	}
	info, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("attach docker sandbox %q: %w", id, providers.ErrNotFound)
		}
		return nil, fmt.Errorf("attach docker sandbox %q: %w", id, err)
	}
	if info.State == nil || !info.State.Running {
		return nil, fmt.Errorf("attach docker sandbox %q: container is not running (start it with `docker start %s`)", id, id)
	}
	if info.Config != nil {
		if info.Config.WorkingDir != "" {
			r.workDir = info.Config.WorkingDir
		}
		if opts.WorkDir != "" {
			r.workDir = opts.WorkDir
		}
		r.user = info.Config.User
		if u := info.Config.Labels[LabelUser]; u != "" {
			r.user = u
		}
	}
	s := &Sandbox{cli: cli, id: info.ID, name: strings.TrimPrefix(info.Name, "/"), opts: r, closing: make(chan struct{})}
	if info.Config != nil && info.Config.Labels[LabelUser] != "" {
		// Ours: resolve the ids for uploads; the working directory is already the user's.
		if err := s.setupUser(ctx, false); err != nil {
			return nil, fmt.Errorf("attach docker sandbox %q: %w", id, err)
		}
	} else {
		s.uid, s.gid = -1, -1 // not ours: the engine's own user handling applies
	}
	return s, nil
}

// List returns the containers labelled talkops.created-by=talkops, running or not, and
// the workspace volumes with that label.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	cli, err := p.engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("list docker sandboxes: %w", err)
	}
	cs, err := cli.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", providers.LabelCreatedBy+"=talkops")),
	})
	if err != nil {
		return nil, fmt.Errorf("list docker sandboxes: %w", err)
	}
	out := make([]providers.Info, 0, len(cs))
	for _, c := range cs {
		info := providers.Info{
			Provider:  Name,
			ID:        c.ID,
			RunID:     c.Labels[providers.LabelRunID],
			CreatedAt: time.Unix(c.Created, 0).UTC(),
			State:     c.State,
			Labels:    c.Labels,
		}
		if exp, err := time.Parse(time.RFC3339, c.Labels[providers.LabelExpiresAt]); err == nil {
			info.ExpiresAt = exp.UTC()
		}
		out = append(out, info)
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", providers.LabelCreatedBy+"=talkops")),
	})
	if err != nil {
		return nil, fmt.Errorf("list docker sandbox volumes: %w", err)
	}
	for _, v := range vols.Volumes {
		info := providers.Info{
			Provider: Name,
			ID:       VolumeIDPrefix + v.Name,
			RunID:    v.Labels[providers.LabelRunID],
			State:    StateVolume,
			Labels:   v.Labels,
		}
		if created, err := time.Parse(time.RFC3339, v.CreatedAt); err == nil {
			info.CreatedAt = created.UTC()
		}
		if exp, err := time.Parse(time.RFC3339, v.Labels[providers.LabelExpiresAt]); err == nil {
			info.ExpiresAt = exp.UTC()
		}
		out = append(out, info)
	}
	return out, nil
}

// List reports a sandbox's workspace volume as an entry of its own, so that one left by
// a teardown that ran out of time, or by a killed run, is found and deleted by gc: its ID
// is VolumeIDPrefix and the volume's name, its state StateVolume.
const (
	VolumeIDPrefix = "volume:"
	StateVolume    = "volume"
)

// Delete force-removes a container, or a workspace volume (an id List gave with
// VolumeIDPrefix) together with any container of ours still using it. One that is already
// gone, or a container that another process is already removing, is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	cli, err := p.engine(ctx)
	if err != nil {
		return fmt.Errorf("delete docker sandbox %s: %w", id, err)
	}
	if name, ok := strings.CutPrefix(id, VolumeIDPrefix); ok {
		// A shared cache's layer is not mounted by the container itself but below its
		// overlay: the container goes first, so that the overlay is unmounted.
		if v, err := cli.VolumeInspect(ctx, name); err == nil && strings.HasPrefix(v.Labels[LabelSandbox], NamePrefix) {
			if err := removeContainer(ctx, cli, v.Labels[LabelSandbox]); err != nil {
				return fmt.Errorf("delete docker sandbox volume %s: remove container %s: %w", name, v.Labels[LabelSandbox], err)
			}
		}
		if err := removeVolume(ctx, cli, name); err != nil {
			return fmt.Errorf("delete docker sandbox volume %s: %w", name, err)
		}
		return nil
	}
	info, err := cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete docker sandbox %s: %w", id, err)
	}
	if err := removeContainer(ctx, cli, id); err != nil {
		return fmt.Errorf("delete docker sandbox %s: %w", id, err)
	}
	var vols []string
	if name := strings.TrimPrefix(info.Name, "/"); strings.HasPrefix(name, NamePrefix) {
		if vols, err = sandboxCacheVolumes(ctx, cli, name); err != nil {
			return fmt.Errorf("delete docker sandbox %s: list its cache volumes: %w", id, err)
		}
	}
	if vol := workspaceVolume(info); vol != "" {
		vols = append(vols, vol)
	}
	for _, vol := range vols {
		if err := removeVolume(ctx, cli, vol); err != nil {
			return fmt.Errorf("delete docker sandbox %s: remove volume %s: %w", id, vol, err)
		}
	}
	return nil
}

// workspaceVolume names the container's workspace volume: the volume Create mounted,
// which has the container's name. "" for a container without one.
func workspaceVolume(info container.InspectResponse) string {
	name := strings.TrimPrefix(info.Name, "/")
	for _, m := range info.Mounts {
		if m.Type == mount.TypeVolume && m.Name == name && strings.HasPrefix(name, NamePrefix) {
			return name
		}
	}
	return ""
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

// Capabilities says what the docker provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, Snapshot: true, OwnFilesystem: true, List: true, BinaryOutput: true}
}
