// Package workspace copies a project into a sandbox as one streamed, gzip-compressed tar
// (a plain tar for a sandbox that asks for one), honouring .gitignore, a skip list and size
// limit, and withholding secrets.
//
// Pack walks the project and writes the archive as it goes, so memory stays flat whatever
// the size of the tree: only one directory's entries per level of depth, the .gitignore
// patterns on the current path and a fixed copy buffer are held. Sync connects Pack to
// Sandbox.Upload through a pipe, so packing and uploading overlap.
//
// In a git work tree the files git tracks are the project: a tracked file, and every
// directory on the way to one, is sent whatever its name, unless it is a secret or
// matches Options.Exclude. The skip list and .gitignore decide about untracked paths
// only. Outside git every path gets every rule.
//
// What is left out, in the order it is decided:
//   - directories named in SkipDirs, at any depth, the report directory .talkops/runs and
//     the setup scratch .talkops/tmp, and files with an extension in SkipExts;
//   - secrets: .env and .env.* (not .env.example, .env.sample, .env.template), private keys
//     and key stores (id_rsa*, id_ed25519*, id_ecdsa*, id_dsa* except *.pub, *.pem, *.key,
//     *.p12, *.pfx, *.jks, *.keystore) and credential files (.aws/credentials, .aws/config,
//     credentials.json, *service-account*.json, application_default_credentials.json,
//     .netrc, .npmrc, .pypirc, .git-credentials, .docker/config.json, .kube/config);
//   - Options.Exclude patterns, then the .gitignore files of every directory and
//     .git/info/exclude, with git's precedence (deeper and later patterns win, "!" negates,
//     nothing inside an excluded directory can be re-included);
//   - regular files larger than Options.MaxFileSize;
//   - symbolic links that are absolute or resolve outside the root (links that stay inside
//     are stored as links; no link is ever followed);
//   - sockets, pipes and devices.
//
// An Options.Include pattern that matches a path overrides the skip list, the secret rules,
// Exclude and .gitignore for it (never the size limit or the symlink rule).
package workspace

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/klauspost/compress/gzip"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// Options tune what Pack and Sync send.
type Options struct {
	// Include and Exclude are extra gitignore-style patterns relative to the project root
	// (from [sandboxes.sync] in config). A path matched by Include is sent even when the
	// skip list, the secret rules, Exclude or .gitignore would leave it out; a pattern with
	// a slash ("dist/app.js", "deploy/**") also opens the skipped directories on its way.
	// Exclude patterns rank above every .gitignore.
	Include, Exclude []string
	// ReportDir is the run's report directory, slash-separated and relative to the root,
	// when it lies inside the project (--report-dir out): left out like .talkops/runs, so
	// the sandbox never sees this run's own result.json or earlier runs' reports.
	ReportDir string
	// MaxFileSize is the largest regular file sent, in bytes; 0 means DefaultMaxFileSize.
	MaxFileSize int64
	// Progress, when set, is called from the packing goroutine at most every ~100ms while
	// packing and once at the end. It must not block for long or modify the slices.
	Progress func(Stats)
}

// Stats describes what Pack sent and what it left out. Paths are slash-separated and
// relative to the project root.
type Stats struct {
	Files int // regular files and symlinks sent
	Dirs  int // directories sent
	// Ignored counts entries left out by the skip list, Exclude, .gitignore, or because
	// they are sockets, pipes or devices; a directory left out counts once.
	Ignored int
	// Bytes is the content of the files sent, before compression; BytesSent is the
	// compressed archive written.
	Bytes, BytesSent int64
	// TooLarge are files over the size limit, Secrets are files withheld for security
	// reasons, SymlinksOutside are links that point out of the tree. Each list holds at
	// most MaxListed paths; Unlisted counts the ones beyond that.
	TooLarge, Secrets, SymlinksOutside []string
	Unlisted                           int
	// LeftOut lists the first MaxLeftOutListed paths left out for any reason, in walk
	// order; LeftOutByReason counts every one of them by reason (Reason* constants).
	LeftOut         []LeftOut
	LeftOutByReason map[string]int
	// GitTracked is set when the project is a git work tree: its tracked files were
	// sent whatever their folder is called, and the skip list, the skipped extensions
	// and .gitignore applied to untracked files only.
	GitTracked bool
	Duration   time.Duration
	// Target is the directory inside the sandbox the archive was extracted into (Sync only).
	Target string
	// Mode is ModeCopy or ModeOverlay (Sync only); ModeNote says why a sandbox that can
	// layer the project got a copy.
	Mode, ModeNote string
}

// LeftOut is one path Pack did not send and why.
type LeftOut struct {
	Path   string
	Reason string
}

// Reasons a path is left out, as LeftOut.Reason and the keys of Stats.LeftOutByReason.
const (
	ReasonSkipList  = "skip_list"       // a SkipDirs name, a SkipExts extension or .talkops/runs
	ReasonGitignore = "gitignore"       // .gitignore or .git/info/exclude
	ReasonExclude   = "exclude"         // an Options.Exclude pattern
	ReasonSecret    = "secret"          // withheld for security reasons
	ReasonTooLarge  = "too_large"       // over the size limit
	ReasonSymlink   = "symlink_outside" // a link pointing out of the tree
	ReasonSpecial   = "special"         // a socket, pipe or device
)

// MaxLeftOutListed bounds Stats.LeftOut: result.json and the summary show the first
// ones, the counts by reason cover all.
const MaxLeftOutListed = 50

// How Sync delivered the workspace.
const (
	ModeCopy    = "copy"
	ModeOverlay = "overlay"
)

// MaxListed bounds each path list in Stats, so a tree full of key fixtures cannot bloat
// result.json.
const MaxListed = 1000

// Result converts s to the record kept in result.json.
func (s Stats) Result() *result.Sync {
	return &result.Sync{
		Files:        s.Files,
		Dirs:         s.Dirs,
		Bytes:        s.Bytes,
		BytesSent:    s.BytesSent,
		DurationMS:   s.Duration.Milliseconds(),
		Ignored:      s.Ignored,
		TooLarge:     s.TooLarge,
		Secrets:      s.Secrets,
		Symlinks:     s.SymlinksOutside,
		RemoteTarget: s.Target,
		LeftOut:      leftOut(s.LeftOut),
		LeftOutBy:    s.LeftOutByReason,
		GitTracked:   s.GitTracked,
		Mode:         s.Mode,
		ModeNote:     s.ModeNote,
	}
}

func leftOut(list []LeftOut) []result.LeftOut {
	var out []result.LeftOut
	for _, l := range list {
		out = append(out, result.LeftOut{Path: l.Path, Reason: l.Reason})
	}
	return out
}

// fullMtime lets the tar writer add a PAX record for an mtime's sub-second part, which
// USTAR cannot hold (the writer rounds it to the second otherwise). Go's test cache keys
// a result on the exact mtime of every file the test opened: rounded, the sandbox's copy
// of a project looks changed and every test that reads a testdata file runs again.
const fullMtime = tar.FormatPAX

// progressEvery is the minimum interval between two Options.Progress calls.
const progressEvery = 100 * time.Millisecond

// Pack writes the project at root to w as a gzip-compressed tar (PAX where USTAR cannot
// hold a name or an mtime), as it walks. Entries are in lexical order per directory; names
// are relative, slash-separated, directories end in "/". Modes keep the permission bits and
// mtimes keep their nanoseconds; owners are not recorded. It returns what it sent and
// left out; on error the Stats describe the part written so far. A cancelled ctx stops
// the walk promptly with an error wrapping ctx.Err().
func Pack(ctx context.Context, root string, opts Options, w io.Writer) (Stats, error) {
	return pack(ctx, root, opts, w, newCompressor, nil)
}

// pack is Pack with a choice of compressor and a hook called once every entry is written
// and flushed through the compressor, before the end-of-archive blocks and the gzip
// trailer; Sync uses it to tell that short tail from the body.
func pack(ctx context.Context, root string, opts Options, w io.Writer, compress func(io.Writer) (compressor, error), beforeClose func()) (Stats, error) {
	start := time.Now()
	p, err := newPacker(ctx, root, opts)
	if err != nil {
		return Stats{}, err
	}
	defer p.root.Close()

	cw := &countingWriter{w: w}
	gz, err := compress(cw)
	if err != nil {
		return Stats{}, fmt.Errorf("pack %s: %w", root, err)
	}
	p.tw = tar.NewWriter(gz)
	p.start, p.lastProgress = start, start
	p.sent = &cw.n

	err = p.walkRoot(ctx)
	if err == nil {
		// Push out what the compressor holds, so the tail after beforeClose is only the
		// archive's end and the gzip trailer (a few dozen bytes). Pack does the same, so
		// both write identical bytes.
		if err = p.tw.Flush(); err == nil {
			err = gz.Flush()
		}
		if err == nil && beforeClose != nil {
			beforeClose()
		}
	}
	if err == nil {
		err = p.tw.Close()
		if err == nil {
			err = gz.Close()
		}
	}
	p.stats.BytesSent = cw.n
	p.stats.Duration = time.Since(start)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return p.stats, fmt.Errorf("pack %s: %w", root, err)
	}
	if opts.Progress != nil {
		opts.Progress(p.stats)
	}
	return p.stats, nil
}

// plan walks the project at root exactly as Pack does, without reading or writing any
// file, and returns what Pack would send together with the topmost paths it would leave
// out (ignored, withheld, too large, links out of the tree, special files), in walk
// order.
func plan(ctx context.Context, root string, opts Options) (Stats, providers.ProjectView, error) {
	start := time.Now()
	p, err := newPacker(ctx, root, opts)
	if err != nil {
		return Stats{}, providers.ProjectView{}, err
	}
	defer p.root.Close()
	var sent int64
	p.planOnly, p.view = true, providers.ProjectView{Hidden: []string{}, Kept: []string{}}
	p.start, p.lastProgress, p.sent = start, start, &sent
	err = p.walkRoot(ctx)
	p.stats.Duration = time.Since(start)
	if err != nil {
		return p.stats, providers.ProjectView{}, fmt.Errorf("plan %s: %w", root, err)
	}
	if opts.Progress != nil {
		opts.Progress(p.stats)
	}
	return p.stats, p.view, nil
}

// newCompressor is the gzip writer Pack uses: klauspost/compress at level 1 (BestSpeed)
// spends about a third less CPU than compress/gzip at level 1 and writes a slightly
// smaller stream (BENCHMARKS.md, "Workspace sync").
var newCompressor = func(w io.Writer) (compressor, error) {
	return gzip.NewWriterLevel(w, gzip.BestSpeed)
}

// noCompressor passes the tar through as it is, for a providers.PlainTarUploader.
func noCompressor(w io.Writer) (compressor, error) { return nopCompressor{w}, nil }

type nopCompressor struct{ io.Writer }

func (nopCompressor) Flush() error { return nil }
func (nopCompressor) Close() error { return nil }

// compressor is what Pack needs of a gzip writer.
type compressor interface {
	io.WriteCloser
	Flush() error
}

type packer struct {
	root     *os.Root
	rootAbs  string // absolute path of the root as given
	rootReal string // the root with symlinks resolved
	opts     Options
	maxSize  int64

	include, exclude patterns
	anchored         []includePrefix
	ignore           patterns // .git/info/exclude, then each .gitignore on the current path
	tracked          []string // the files git tracks, sorted; nil outside a git work tree

	tw  *tar.Writer
	buf []byte
	// planOnly walks without writing or reading any file, collecting in view the
	// entries kept and the topmost paths left out (for a copy-on-write layer).
	planOnly     bool
	view         providers.ProjectView
	stats        Stats
	sent         *int64
	start        time.Time
	lastProgress time.Time
}

func newPacker(ctx context.Context, root string, opts Options) (*packer, error) {
	if opts.MaxFileSize < 0 {
		return nil, fmt.Errorf("sync max file size %d: must be 0 (default %d) or positive", opts.MaxFileSize, DefaultMaxFileSize)
	}
	include, err := checkPatterns("include", opts.Include)
	if err != nil {
		return nil, err
	}
	exclude, err := checkPatterns("exclude", opts.Exclude)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("pack: project root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("pack: project root %s is not a directory", root)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("pack: project root: %w", err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("pack: project root: %w", err)
	}
	maxSize := opts.MaxFileSize
	if maxSize == 0 {
		maxSize = DefaultMaxFileSize
	}
	tracked, err := listTracked(ctx, abs)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("pack %s: %w", root, err)
	}
	return &packer{
		tracked:  tracked,
		stats:    Stats{GitTracked: tracked != nil},
		root:     r,
		rootAbs:  abs,
		rootReal: real,
		opts:     opts,
		maxSize:  maxSize,
		include:  include,
		exclude:  exclude,
		anchored: anchoredIncludes(opts.Include),
		buf:      make([]byte, 128<<10),
	}, nil
}

func (p *packer) walkRoot(ctx context.Context) error {
	// .git/info/exclude has the lowest priority; a .git that is a file (worktrees,
	// submodules) has none here.
	if fi, err := p.root.Lstat(".git"); err == nil && fi.IsDir() {
		if err := p.loadIgnoreFile(".git/info/exclude", nil); err != nil {
			return err
		}
	}
	return p.walkDir(ctx, nil, false)
}

// loadIgnoreFile appends the patterns of the ignore file at rel if it is a regular file.
// Like git (since 2.32), a .gitignore that is a symlink is not read.
func (p *packer) loadIgnoreFile(rel string, domain []string) error {
	fi, err := p.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && !fi.Mode().IsRegular()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	f, err := p.root.Open(rel)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	defer f.Close()
	ps, err := readIgnoreFile(f, domain)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	p.ignore = append(p.ignore, ps...)
	return nil
}

// walkDir sends the entries of the directory dir (segments relative to the root). When
// includeOnly is set the directory itself was left out and only paths matched by an
// Include pattern are sent from it.
func (p *packer) walkDir(ctx context.Context, dir []string, includeOnly bool) error {
	rel := relPath(dir)
	f, err := p.root.Open(rel)
	if err != nil {
		return fmt.Errorf("open directory %s: %w (list it under [sandboxes.sync] exclude to skip it)", rel, err)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("read directory %s: %w", rel, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })

	depth := len(p.ignore)
	defer func() { p.ignore = p.ignore[:depth] }()
	if !includeOnly {
		for _, e := range entries {
			if e.Name() == ".gitignore" && e.Type().IsRegular() {
				if err := p.loadIgnoreFile(path.Join(rel, ".gitignore"), dir); err != nil {
					return err
				}
			}
		}
	}

	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		segs := append(dir[:len(dir):len(dir)], e.Name())
		if err := p.entry(ctx, segs, e, includeOnly); err != nil {
			return err
		}
		p.progress()
	}
	return nil
}

// entry decides about and sends one directory entry.
func (p *packer) entry(ctx context.Context, segs []string, e fs.DirEntry, includeOnly bool) error {
	rel := relPath(segs)
	typ := e.Type()
	isDir := typ.IsDir()

	included := len(p.include) > 0 && p.include.match(segs, isDir) == gitignore.Exclude
	if !included {
		if !includeOnly {
			switch reason := p.skip(rel, segs, e.Name(), isDir); reason {
			case "":
				return p.send(ctx, rel, segs, e)
			case ReasonSecret:
				p.listed(&p.stats.Secrets, rel)
				p.leftOut(rel, reason)
			default:
				p.stats.Ignored++
				p.leftOut(rel, reason)
			}
		}
		if isDir && p.mayIncludeBelow(segs) {
			return p.walkDir(ctx, segs, true)
		}
		p.omit(rel)
		return nil
	}
	return p.send(ctx, rel, segs, e)
}

// leftOut records a path that is not sent.
func (p *packer) leftOut(rel, reason string) {
	if p.stats.LeftOutByReason == nil {
		p.stats.LeftOutByReason = map[string]int{}
	}
	p.stats.LeftOutByReason[reason]++
	if len(p.stats.LeftOut) < MaxLeftOutListed {
		p.stats.LeftOut = append(p.stats.LeftOut, LeftOut{Path: rel, Reason: reason})
	}
}

// omit records a path left out, for planOnly walks.
func (p *packer) omit(rel string) {
	if p.planOnly {
		p.view.Hidden = append(p.view.Hidden, rel)
	}
}

// keep records an entry sent, for planOnly walks.
func (p *packer) keep(rel string) {
	if p.planOnly {
		p.view.Kept = append(p.view.Kept, rel)
	}
}

// skip returns why the entry at rel is left out, or "" to send it. In a git work tree a
// tracked file, or a directory holding one, is the project: only the secret rules and
// Exclude apply to it. Everything else gets the skip list and .gitignore as well.
func (p *packer) skip(rel string, segs []string, name string, isDir bool) string {
	tracked := p.tracked != nil && (isDir && p.hasTrackedBelow(rel) || !isDir && p.isTracked(rel))
	if !isDir && isSecret(rel) {
		return ReasonSecret
	}
	if !tracked {
		if isDir && (isSkippedDir(name) || isRunsDir(rel) || rel == p.opts.ReportDir) || !isDir && isSkippedFile(name) {
			return ReasonSkipList
		}
	}
	switch p.exclude.match(segs, isDir) {
	case gitignore.Exclude:
		return ReasonExclude
	case gitignore.Include:
		return "" // "!pattern" in Exclude re-includes what .gitignore leaves out
	}
	if !tracked && p.ignore.match(segs, isDir) == gitignore.Exclude {
		return ReasonGitignore
	}
	return ""
}

// isTracked reports whether git tracks the file at rel.
func (p *packer) isTracked(rel string) bool {
	_, ok := slices.BinarySearch(p.tracked, rel)
	return ok
}

// hasTrackedBelow reports whether git tracks a file inside the directory rel.
func (p *packer) hasTrackedBelow(rel string) bool {
	prefix := rel + "/"
	i, _ := slices.BinarySearch(p.tracked, prefix)
	return i < len(p.tracked) && strings.HasPrefix(p.tracked[i], prefix)
}

func (p *packer) mayIncludeBelow(dir []string) bool {
	for _, a := range p.anchored {
		if a.mayMatchBelow(dir) {
			return true
		}
	}
	return false
}

// send writes one entry that passed the filters.
func (p *packer) send(ctx context.Context, rel string, segs []string, e fs.DirEntry) error {
	typ := e.Type()
	switch {
	case typ.IsDir():
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walked
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", rel, err)
		}
		if p.planOnly {
			p.stats.Dirs++
			p.keep(rel)
			return p.walkDir(ctx, segs, false)
		}
		if err := p.tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir,
			Name:     rel + "/",
			Mode:     int64(info.Mode().Perm()),
			ModTime:  info.ModTime(),
			Format:   fullMtime,
		}); err != nil {
			return err
		}
		p.stats.Dirs++
		return p.walkDir(ctx, segs, false)
	case typ&fs.ModeSymlink != 0:
		return p.symlink(rel, e)
	case typ.IsRegular():
		return p.file(ctx, rel, e)
	default:
		p.stats.Ignored++ // socket, pipe, device
		p.leftOut(rel, ReasonSpecial)
		p.omit(rel)
		return nil
	}
}

func (p *packer) symlink(rel string, e fs.DirEntry) error {
	info, err := e.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", rel, err)
	}
	target, err := p.root.Readlink(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read link %s: %w", rel, err)
	}
	if !p.linkInside(rel, target) {
		p.listed(&p.stats.SymlinksOutside, rel)
		p.leftOut(rel, ReasonSymlink)
		p.omit(rel)
		return nil
	}
	if p.planOnly {
		p.stats.Files++
		p.keep(rel)
		return nil
	}
	if err := p.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeSymlink,
		Name:     rel,
		Linkname: filepath.ToSlash(target),
		Mode:     0o777,
		ModTime:  info.ModTime(),
		Format:   fullMtime,
	}); err != nil {
		return err
	}
	p.stats.Files++
	return nil
}

// linkInside reports whether the symlink at rel with the given target stays inside the
// root: the target is relative, does not climb out lexically, and, when it exists, its
// fully resolved location (through any chain of links) is inside the root too. A dangling
// link that stays inside lexically is kept: it exposes nothing.
func (p *packer) linkInside(rel, target string) bool {
	if target == "" || filepath.IsAbs(target) || strings.HasPrefix(target, "/") || strings.HasPrefix(target, `\`) {
		return false
	}
	joined := path.Join(path.Dir(rel), filepath.ToSlash(target))
	if joined == ".." || strings.HasPrefix(joined, "../") {
		return false
	}
	real, err := filepath.EvalSymlinks(filepath.Join(p.rootAbs, filepath.FromSlash(rel)))
	if err != nil {
		return true
	}
	return real == p.rootReal || strings.HasPrefix(real, p.rootReal+string(filepath.Separator))
}

func (p *packer) file(ctx context.Context, rel string, e fs.DirEntry) error {
	info, err := e.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", rel, err)
	}
	if info.Size() > p.maxSize {
		p.listed(&p.stats.TooLarge, rel)
		p.leftOut(rel, ReasonTooLarge)
		p.omit(rel)
		return nil
	}
	if p.planOnly {
		p.stats.Files++
		p.stats.Bytes += info.Size()
		p.keep(rel)
		return nil
	}
	f, err := p.root.OpenFile(rel, os.O_RDONLY|openFlags, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w (list it under [sandboxes.sync] exclude to skip it)", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() || !os.SameFile(info, fi) {
		return fmt.Errorf("open %s: file was replaced while syncing", rel)
	}
	size := fi.Size()
	if size > p.maxSize {
		p.listed(&p.stats.TooLarge, rel)
		p.leftOut(rel, ReasonTooLarge)
		return nil
	}
	if err := p.tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     rel,
		Size:     size,
		Mode:     int64(fi.Mode().Perm()),
		ModTime:  fi.ModTime(),
		Format:   fullMtime,
	}); err != nil {
		return err
	}
	n, err := p.copyFile(ctx, f, size)
	p.stats.Bytes += n
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	if n < size {
		return fmt.Errorf("read %s: file shrank from %d to %d bytes while syncing", rel, size, n)
	}
	p.stats.Files++
	return nil
}

// listed appends rel to one of the reported path lists, up to MaxListed.
func (p *packer) listed(list *[]string, rel string) {
	if len(*list) >= MaxListed {
		p.stats.Unlisted++
		return
	}
	*list = append(*list, rel)
}

func (p *packer) progress() {
	if p.opts.Progress == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.lastProgress) < progressEvery {
		return
	}
	p.lastProgress = now
	s := p.stats
	s.BytesSent = *p.sent
	s.Duration = now.Sub(p.start)
	p.opts.Progress(s)
}

func relPath(segs []string) string {
	if len(segs) == 0 {
		return "."
	}
	return strings.Join(segs, "/")
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// copyFile copies at most size bytes of f into the archive through the fixed buffer,
// checking ctx between chunks. It returns the bytes copied; fewer than size without an
// error means the file ended early.
func (p *packer) copyFile(ctx context.Context, f io.Reader, size int64) (int64, error) {
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := f.Read(p.buf[:min(int64(len(p.buf)), size-n)])
		if m > 0 {
			if _, werr := p.tw.Write(p.buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
