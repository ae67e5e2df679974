package bwrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
)

// Copy-on-write layers. bubblewrap 0.8 (Debian 12) has no overlay options, so the overlays
// live in a private mount namespace of their own, inside a user namespace unless talkops
// runs as root, kept alive by a small holder process for the sandbox's life. Every command
// enters that namespace (nsenter) before bwrap starts, and the host reaches the merged
// view through /proc/<holder>/root. The project is the lowest layer, read-only; a mask
// layer of whiteouts hides what the sync rules leave out; an upper directory per sandbox
// takes every write. Creating the workspace copies nothing, and teardown removes only what
// the run wrote.

// holder keeps the sandbox's mount namespace alive.
type holder struct {
	pid       int
	userNS    bool
	cmd       *exec.Cmd
	stdin     io.Closer // the holder exits when this closes (or talkops dies)
	nsTool    string    // nsenter
	mountTool string    // mount, as seen inside the namespace
	// extras are the optional overlay options this kernel accepted (see overlay); nil
	// until the first mount.
	extras []string
}

// holderReadyTimeout bounds the holder's start.
const holderReadyTimeout = 10 * time.Second

// startHolder starts the namespace holder. It fails, wrapping ErrNotSupported with the
// reason, where the machine does not allow it.
func startHolder(ctx context.Context) (*holder, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("%w: nsenter not found (util-linux)", providers.ErrNotSupported)
	}
	mount, err := exec.LookPath("mount")
	if err != nil {
		return nil, fmt.Errorf("%w: mount not found (util-linux)", providers.ErrNotSupported)
	}
	// The holder makes its mounts private, says it is ready and waits for its stdin to
	// close: the pipe's write end dies with talkops, so no holder outlives a killed run.
	cmd := exec.Command("/bin/sh", "-c", `"$1" --make-rprivate / && echo ready && exec cat >/dev/null`, "talkops-overlay-holder", mount)
	userNS := os.Geteuid() != 0
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if userNS {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: cannot start a process in a new mount namespace: %w", providers.ErrNotSupported, err)
	}
	h := &holder{pid: cmd.Process.Pid, userNS: userNS, cmd: cmd, stdin: stdin, nsTool: nsenter, mountTool: mount}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	timer := time.NewTimer(holderReadyTimeout)
	defer timer.Stop()
	select {
	case err = <-ready:
	case <-timer.C:
		err = errors.New("timed out")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		h.stop()
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			return nil, fmt.Errorf("start overlay namespace: %w", ctx.Err())
		}
		return nil, fmt.Errorf("%w: private mount namespace: %w %s", providers.ErrNotSupported, err, msg)
	}
	return h, nil
}

// enter returns the command prefix that runs a program inside the holder's namespaces.
func (h *holder) enter() []string {
	args := []string{h.nsTool, "--target", strconv.Itoa(h.pid), "--mount"}
	if h.userNS {
		args = append(args, "--user", "--preserve-credentials")
	}
	return append(args, "--")
}

// root is where the host sees the holder's mounts.
func (h *holder) root(p string) string {
	return filepath.Join("/proc", strconv.Itoa(h.pid), "root", p)
}

// overlay mounts an overlay at target inside the namespace. lowers are listed top first.
func (h *holder) overlay(ctx context.Context, target, upper, work string, lowers ...string) error {
	for _, p := range append([]string{target, upper, work}, lowers...) {
		if strings.ContainsAny(p, ",:\\\n") {
			return fmt.Errorf("%w: %s: overlay options cannot hold a path with ',', ':' or '\\'", providers.ErrNotSupported, p)
		}
	}
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work
	var err error
	for _, extras := range h.optionalSets() {
		if err = h.mount(ctx, target, strings.Join(append([]string{opts}, extras...), ",")); err == nil {
			h.extras = extras
			return nil
		}
	}
	return fmt.Errorf("%w: %w", providers.ErrNotSupported, err)
}

// optionalSets are the optional overlay options to try, best first, ending with none:
//
//   - volatile (Linux 5.10) skips the sync of the upper file system that every unmount
//     does otherwise. The upper directories are thrown away, and on a busy host a sync of
//     the whole disk made teardown wait on other jobs' writes.
//   - metacopy=on, outside a user namespace only (the kernel refuses it in one), copies
//     only a file's metadata up when a command changes only its metadata. Go refreshes
//     the mtime of every build-cache entry older than an hour that it uses, so without it
//     each run copied the whole part of the cache it read into its layer (75 MB for kong
//     against a restored cache). Its xattrs are trusted.* ones, which neither the sandbox
//     (no capabilities, its own user namespace) nor an unprivileged host user can set.
//
// Once a set worked, later mounts use only that one.
func (h *holder) optionalSets() [][]string {
	if h.extras != nil {
		return [][]string{h.extras}
	}
	sets := [][]string{{"volatile"}, {}}
	if !h.userNS {
		sets = append([][]string{{"volatile", "metacopy=on"}}, sets...)
	}
	return sets
}

// mount runs mount -t overlay inside the namespace.
func (h *holder) mount(ctx context.Context, target, opts string) error {
	args := append(h.enter(), h.mountTool, "-t", "overlay", "overlay", "-o", opts, target)
	cctx, cancel := context.WithTimeout(ctx, holderReadyTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount overlay on %s: %w: %s", target, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// stop ends the holder; its namespace and every overlay in it go with it.
func (h *holder) stop() {
	if h == nil {
		return
	}
	_ = h.stdin.Close()
	_ = syscall.Kill(-h.pid, syscall.SIGKILL)
	_ = h.cmd.Wait()
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.n -= k
		_, _ = l.w.Write(b[:k])
	}
	return len(b), nil
}

// layerDirs are a layered directory's host directories under the sandbox directory:
// lower is the workspace's tree of links (see linkTree), mask the whiteouts of a
// workspace layered by an earlier version (see remountProject).
type layerDirs struct{ base, lower, mask, upper, work string }

func (s *Sandbox) layerDirs(name string) layerDirs {
	base := filepath.Join(s.dir, "layers", name)
	return layerDirs{
		base: base, lower: filepath.Join(base, "lower"), mask: filepath.Join(base, "mask"),
		upper: filepath.Join(base, "upper"), work: filepath.Join(base, "work"),
	}
}

func (d layerDirs) create() error {
	for _, p := range []string{d.upper, d.work} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// clearVolatile readies a layer's work directory for a second mount. A volatile overlay
// leaves a marker there that refuses one until removed. The upper directory is intact
// after its holder died (the page cache outlives a process); only a crash of the host
// could lose its writes. The kernel makes these directories mode 000, which only root
// gets through: talkops owns them (in a user namespace they were root's), so it may open
// them up.
func (d layerDirs) clearVolatile() error {
	inner := filepath.Join(d.work, "work")
	if err := os.Chmod(inner, 0o700); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return removeAll(filepath.Join(inner, "incompat"))
}

// LayerProject shows the host project as the sandbox's working directory through an
// overlay: a tree of hard links to what the sync plan kept at the bottom, read-only, and
// the sandbox's own upper directory on top.
//
// The links, not the project directory itself, are the lower layer so that the sandbox
// sees the plan's selection and nothing else: a file that appears in the project later
// (a .env, an ignored or oversized file) has no link and stays out. Linking copies no
// byte, and a write in the sandbox copies the file up first, so the shared inode is
// never written. Links cannot cross file systems, nor, with protected_hardlinks, reach
// another user's files: then LayerProject reports ErrNotSupported and the caller copies.
func (s *Sandbox) LayerProject(ctx context.Context, project string, view providers.ProjectView) error {
	if s.isClosed() {
		return fmt.Errorf("bwrap layer project: %w", providers.ErrClosed)
	}
	if s.opts.overlay == OverlayOff {
		return fmt.Errorf("bwrap layer project: %w: overlay = %q", providers.ErrNotSupported, OverlayOff)
	}
	project, err := filepath.Abs(project)
	if err != nil {
		return fmt.Errorf("bwrap layer project: %w", err)
	}
	if project, err = filepath.EvalSymlinks(project); err != nil {
		return fmt.Errorf("bwrap layer project: %w", err)
	}
	if err := s.checkLayerable(project); err != nil {
		return fmt.Errorf("bwrap layer project: %w", err)
	}
	h, err := s.ensureHolder(ctx)
	if err != nil {
		return fmt.Errorf("bwrap layer project: %w", err)
	}
	d := s.layerDirs("workspace")
	err = d.create()
	if err == nil {
		err = linkTree(ctx, project, d.lower, view.Kept)
	}
	if err == nil {
		err = matchDirAttrs(d.upper, project)
	}
	if err != nil {
		// The copy the caller falls back to must find no half-built layer.
		return errors.Join(fmt.Errorf("bwrap layer project: %w", err), removeAll(d.base))
	}
	if err := h.overlay(ctx, filepath.Join(s.dir, "workspace"), d.upper, d.work, d.lower); err != nil {
		return fmt.Errorf("bwrap layer project: %w", err)
	}
	s.mu.Lock()
	s.layered = true
	s.mu.Unlock()
	return s.recordLayers(project)
}

// linkTree builds at dst the entries of project listed in kept: directories made,
// files and symlinks hard-linked, and then every directory made given the project
// directory's mode and modification time (see matchDirAttrs for why). An entry gone
// since the plan is skipped, as the copy skips it.
//
// It works relative to open directories: kept lists a directory before its entries, so
// each directory's pair (in the project, in the tree) is opened once and the kernel
// resolves one name per link, not the whole path twice. The directories' attributes
// come from the stat that link-first already made, so no second walk reads them.
func linkTree(ctx context.Context, project, dst string, kept []string) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	l, err := newLinker(project, dst)
	if err != nil {
		return err
	}
	defer l.closeAll()
	for i, rel := range kept {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rel = path.Clean(rel)
		if rel == "." || path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("link %q: not a relative path inside the project", rel)
		}
		if err := l.add(rel); err != nil {
			return err
		}
	}
	l.closeAll()
	return l.matchDirAttrs()
}

// linkDir is one directory open in both trees. src is -1 where the project's directory
// is gone since the plan.
type linkDir struct {
	rel      string
	src, dst int
}

// madeDir is a directory linkTree made and the project attributes it takes at the end.
type madeDir struct {
	rel   string
	mode  uint32
	mtime unix.Timespec
}

type linker struct {
	dst string
	// open is the chain of open directories from the root to the last entry's parent.
	open []linkDir
	made []madeDir
}

// dirFlags open a directory only as a place to resolve names in: no read permission
// needed, and a symlink swapped in since the plan is not followed.
const dirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

func newLinker(project, dst string) (*linker, error) {
	src, err := unix.Open(project, dirFlags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: project, Err: err}
	}
	d, err := unix.Open(dst, dirFlags, 0)
	if err != nil {
		_ = unix.Close(src)
		return nil, &fs.PathError{Op: "open", Path: dst, Err: err}
	}
	l := &linker{dst: dst, open: []linkDir{{rel: ".", src: src, dst: d}}}
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		l.closeAll()
		return nil, &fs.PathError{Op: "stat", Path: project, Err: err}
	}
	l.made = append(l.made, madeDir{rel: ".", mode: st.Mode, mtime: st.Mtim})
	return l, nil
}

// add links or makes one entry.
func (l *linker) add(rel string) error {
	parent, name := path.Split(rel)
	p, err := l.enter(path.Clean(parent))
	if err != nil {
		return err
	}
	if p.src < 0 {
		return nil // its directory is gone
	}
	// Linking first saves a stat per file; link refuses a directory (EPERM) and a file
	// gone since the plan (ENOENT), and only those need the stat.
	err = unix.Linkat(p.src, name, p.dst, name, 0)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) {
		var st unix.Stat_t
		serr := unix.Fstatat(p.src, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(serr, unix.ENOENT):
			return nil
		case serr != nil:
			return &fs.PathError{Op: "lstat", Path: rel, Err: serr}
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return l.mkdir(p.dst, rel, name, &st)
		}
	}
	switch {
	case err == nil || errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: the project is on another file system than the sandbox state directory, and hard links cannot cross it", providers.ErrNotSupported)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: cannot hard-link %s (owned by another user, fs.protected_hardlinks): %w", providers.ErrNotSupported, rel, err)
	default:
		return &os.LinkError{Op: "link", Old: rel, New: filepath.Join(l.dst, rel), Err: err}
	}
}

// mkdir makes name in the tree's directory dirFD and notes the project's attributes
// for it. A directory already made (a parent made ahead of its own entry) is kept.
func (l *linker) mkdir(dirFD int, rel, name string, st *unix.Stat_t) error {
	err := unix.Mkdirat(dirFD, name, 0o755)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: filepath.Join(l.dst, rel), Err: err}
	}
	l.made = append(l.made, madeDir{rel: rel, mode: st.Mode, mtime: st.Mtim})
	return nil
}

// enter makes the chain of open directories end at dir, closing those left and
// opening (and, for the parents of what an Include pattern kept inside a left-out
// directory, making) those entered.
func (l *linker) enter(dir string) (linkDir, error) {
	for {
		top := l.open[len(l.open)-1]
		if top.rel == dir {
			return top, nil
		}
		if top.rel == "." || strings.HasPrefix(dir, top.rel+"/") {
			break
		}
		l.pop()
	}
	top := l.open[len(l.open)-1]
	rest := dir
	if top.rel != "." {
		rest = dir[len(top.rel)+1:]
	}
	for name := range strings.SplitSeq(rest, "/") {
		rel := path.Join(top.rel, name)
		next := linkDir{rel: rel, src: -1, dst: -1}
		var st unix.Stat_t
		if top.src >= 0 {
			fd, err := unix.Openat(top.src, name, dirFlags, 0)
			switch {
			case err == nil:
				next.src = fd
			case !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP):
				return top, &fs.PathError{Op: "open", Path: rel, Err: err}
			}
		}
		fd, err := unix.Openat(top.dst, name, dirFlags, 0)
		if errors.Is(err, unix.ENOENT) && next.src >= 0 {
			if err = unix.Fstat(next.src, &st); err == nil {
				err = l.mkdir(top.dst, rel, name, &st)
			}
			if err == nil {
				fd, err = unix.Openat(top.dst, name, dirFlags, 0)
			}
		}
		if err != nil && next.src < 0 {
			// Gone from the project with all below it; nothing to make here.
			err, fd = nil, -1
		}
		if err != nil {
			if next.src >= 0 {
				_ = unix.Close(next.src)
			}
			return top, &fs.PathError{Op: "open", Path: filepath.Join(l.dst, rel), Err: err}
		}
		next.dst = fd
		l.open = append(l.open, next)
		top = next
	}
	return top, nil
}

func (l *linker) pop() {
	top := l.open[len(l.open)-1]
	for _, fd := range []int{top.src, top.dst} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	l.open = l.open[:len(l.open)-1]
}

func (l *linker) closeAll() {
	for len(l.open) > 0 {
		l.pop()
	}
}

// matchDirAttrs gives the directories made the project's mode and modification time,
// deepest first, so that a project directory without search permission for its owner
// does not lock the tree's own chmods out of the directories below it. The tree is
// complete, so the times set now are final.
func (l *linker) matchDirAttrs() error {
	for i := len(l.made) - 1; i >= 0; i-- {
		d := l.made[i]
		p := filepath.Join(l.dst, d.rel)
		if err := unix.Fchmodat(unix.AT_FDCWD, p, d.mode&(unix.S_IRWXU|unix.S_IRWXG|unix.S_IRWXO|unix.S_ISGID|unix.S_ISVTX), 0); err != nil {
			return &fs.PathError{Op: "chmod", Path: p, Err: err}
		}
		times := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, d.mtime}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "chtimes", Path: p, Err: err}
		}
	}
	return nil
}

// checkLayerable refuses what an overlay cannot show faithfully: a workspace that is
// already layered or has content, and, in a user namespace, a project owned by another user (its files could
// not be copied up on write).
func (s *Sandbox) checkLayerable(project string) error {
	s.mu.Lock()
	layered := s.layered
	s.mu.Unlock()
	if layered {
		// An attached sandbox's layers were mounted again; its upper directory has the
		// earlier runs' writes and cannot be mounted twice.
		return fmt.Errorf("%w: the working directory is already layered", providers.ErrNotSupported)
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, "workspace"))
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w: the working directory already has content", providers.ErrNotSupported)
	}
	if os.Geteuid() == 0 {
		return nil
	}
	fi, err := os.Stat(project)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: the project belongs to uid %d, not to talkops's uid %d", providers.ErrNotSupported, st.Uid, os.Geteuid())
	}
	return nil
}

// matchDirAttrs gives a directory talkops created in a layer the project directory's own
// mode and modification time. An overlay shows a directory with the attributes of its
// topmost layer: without this the workspace root (the upper directory) and every
// directory of the lower tree (see linker.matchDirAttrs) would show talkops's mode and
// the sandbox's creation time, and Go's test cache, which hashes the mtime of the
// directories a test stats (a test that changes back to the module root does), would
// miss every cached result of the host's runs.
func matchDirAttrs(layerDir, projectDir string) error {
	fi, err := os.Lstat(projectDir)
	if err != nil || !fi.IsDir() {
		return err
	}
	if err := os.Chmod(layerDir, fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return os.Chtimes(layerDir, time.Time{}, fi.ModTime())
}

// ensureHolder starts the namespace holder once.
func (s *Sandbox) ensureHolder(ctx context.Context) (*holder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder != nil {
		return s.holder, nil
	}
	h, err := startHolder(ctx)
	if err != nil {
		return nil, err
	}
	s.holder = h
	return h, nil
}

// currentHolder is the holder commands must enter, or nil.
func (s *Sandbox) currentHolder() *holder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holder
}

// recordLayers notes the layers in the sandbox's metadata, so Attach can mount them again.
func (s *Sandbox) recordLayers(project string) error {
	m, err := readMeta(s.dir)
	if err != nil {
		return fmt.Errorf("bwrap layer project: %w", err)
	}
	m.Project = project
	if err := writeMeta(s.dir, m); err != nil {
		return fmt.Errorf("bwrap layer project: %w", err)
	}
	return nil
}

// remountProject mounts a layered workspace again for Attach.
func (s *Sandbox) remountProject(ctx context.Context, project string) error {
	h, err := s.ensureHolder(ctx)
	if err != nil {
		return err
	}
	d := s.layerDirs("workspace")
	if err := d.clearVolatile(); err != nil {
		return err
	}
	lowers := []string{d.lower}
	if _, err := os.Stat(d.lower); errors.Is(err, fs.ErrNotExist) {
		// A sandbox layered by an earlier version: whiteouts over the project itself.
		lowers = []string{d.mask, project}
	}
	if err := h.overlay(ctx, filepath.Join(s.dir, "workspace"), d.upper, d.work, lowers...); err != nil {
		return err
	}
	s.mu.Lock()
	s.layered = true
	s.mu.Unlock()
	return nil
}

// mountCaches shows each cache through an overlay whose upper layer is the sandbox's own.
// A cache that cannot be shown is left out with a note; it never fails the sandbox.
func (s *Sandbox) mountCaches(ctx context.Context, caches []providers.Cache) {
	if len(caches) == 0 {
		return
	}
	if s.opts.overlay == OverlayOff {
		s.cacheNotes = append(s.cacheNotes, fmt.Sprintf("caches not shared: bwrap option overlay = %q", OverlayOff))
		return
	}
	h, err := s.ensureHolder(ctx)
	if err != nil {
		s.cacheNotes = append(s.cacheNotes, fmt.Sprintf("caches not shared: %v", err))
		return
	}
	for i, c := range caches {
		if p := path.Clean(c.Path); cache.Within(p, s.opts.workDir) || cache.Within(s.opts.workDir, p) {
			// Bound over the workspace it would hide the project; inside it, it would pass
			// for part of the project.
			s.cacheNotes = append(s.cacheNotes, fmt.Sprintf("cache %s not shared: sandbox path %s overlaps the working directory %s", c.Name, p, s.opts.workDir))
			continue
		}
		if err := s.mountCache(ctx, h, c, strconv.Itoa(i), false); err != nil {
			s.cacheNotes = append(s.cacheNotes, fmt.Sprintf("cache %s not shared: %v", c.Name, err))
		}
	}
}

// mountCache shows c at the sandbox directory's caches/<slot>: a tool's home (no HostDir)
// as an empty directory of the sandbox's own, which the sandbox user owns through the user
// namespace's mapping as it owns the workspace; any other cache as a copy-on-write layer
// over its host directory. again is for Attach: the slot's directories exist and keep
// what the sandbox's earlier commands wrote.
func (s *Sandbox) mountCache(ctx context.Context, h *holder, c providers.Cache, slot string, again bool) error {
	target := filepath.Join(s.dir, "caches", slot)
	switch {
	case c.HostDir == "" && again:
		if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
			return errors.New("its directory is gone from the sandbox")
		}
	case c.HostDir == "":
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
	default:
		if fi, err := os.Stat(c.HostDir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s is not a directory on the host", c.HostDir)
		}
		d := s.layerDirs("cache-" + slot)
		var err error
		if again {
			err = d.clearVolatile()
		} else if err = d.create(); err == nil {
			err = os.MkdirAll(target, 0o755)
		}
		if err == nil {
			err = h.overlay(ctx, target, d.upper, d.work, c.HostDir)
		}
		if err != nil {
			return err
		}
	}
	s.caches = append(s.caches, mountedCache{Cache: c, hostDir: target, slot: slot})
	return nil
}

// cacheRecord is what the sandbox record keeps of the mounted caches.
func (s *Sandbox) cacheRecord() []cacheMeta {
	out := make([]cacheMeta, len(s.caches))
	for i, c := range s.caches {
		out[i] = cacheMeta{Cache: c.Cache, Slot: c.slot}
	}
	return out
}

// remountCaches mounts the recorded caches again for Attach, over the same upper
// directories, so the sandbox sees what its earlier commands wrote and the host copy
// stays untouched. A cache that cannot be shown is left out with a note, as at create.
func (s *Sandbox) remountCaches(ctx context.Context, caches []cacheMeta) {
	if len(caches) == 0 {
		return
	}
	h, err := s.ensureHolder(ctx)
	if err != nil {
		s.cacheNotes = append(s.cacheNotes, fmt.Sprintf("caches not shared: %v", err))
		return
	}
	for _, c := range caches {
		if _, err := strconv.Atoi(c.Slot); err != nil || !path.IsAbs(c.Path) {
			s.cacheNotes = append(s.cacheNotes, fmt.Sprintf("cache %s not shared: the sandbox record names slot %q at %q", c.Name, c.Slot, c.Path))
			continue
		}
		if err := s.mountCache(ctx, h, c.Cache, c.Slot, true); err != nil {
			s.cacheNotes = append(s.cacheNotes, fmt.Sprintf("cache %s not shared: %v", c.Name, err))
		}
	}
}

type mountedCache struct {
	providers.Cache
	hostDir string // the merged view, inside the holder's namespace
	slot    string // its directories' name under the sandbox directory
}

// SharedCaches reports the caches the sandbox sees and why others are missing.
func (s *Sandbox) SharedCaches() ([]providers.Cache, []string) {
	out := make([]providers.Cache, len(s.caches))
	for i, c := range s.caches {
		out[i] = c.Cache
	}
	return out, s.cacheNotes
}

var (
	_ providers.ProjectLayerer = (*Sandbox)(nil)
	_ providers.CacheSharer    = (*Sandbox)(nil)
)
