// Package changeset records a sandbox workspace on the host and computes what changed in
// it. A Tree is built by talkops itself from a tar stream of the workspace (never from a
// manifest or hash the sandbox prints), so nothing the agent can write inside the sandbox
// is used as a reference. File contents go to a Store, a directory on the host with a size
// cap; only the manifest (path, type, mode, size, sha256, symlink target) is kept in
// memory.
//
// The runner takes a Tree after the setup script (the baseline) and one after each agent
// pass; Compare lists every added, modified, removed, mode- or type-changed path, and
// Apply replays that change set in a fresh sandbox (the clean room).
package changeset

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
)

// Entry types.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	// TypeOther is a device, FIFO or socket: listed, never applied.
	TypeOther = "other"
)

// Entry is one path of a workspace.
type Entry struct {
	// Path is slash-separated, relative to the workspace.
	Path string
	Type string
	// Mode holds the permission bits (with setuid, setgid and sticky).
	Mode fs.FileMode
	// Size and SHA256 are set for files.
	Size   int64
	SHA256 string
	// Target is a symlink's target.
	Target string
}

// same reports whether two entries have the same type, content and mode.
func (e Entry) same(o Entry) bool {
	return e.Type == o.Type && e.Mode == o.Mode && e.Size == o.Size && e.SHA256 == o.SHA256 && e.Target == o.Target
}

// Digest is what integrity compares: the sha256 of a file, "symlink:TARGET" for a symlink,
// the type for anything else.
func (e Entry) Digest() string {
	switch e.Type {
	case TypeFile:
		return e.SHA256
	case TypeSymlink:
		return "symlink:" + e.Target
	default:
		return e.Type
	}
}

// Tree is a workspace as the host recorded it.
type Tree struct {
	entries map[string]Entry
	// Bytes is the sum of file sizes; Streamed is how many tar bytes were read.
	Bytes    int64
	Streamed int64
	Duration time.Duration
	// Warning is set when the archiver reported a problem it recovered from (a file that
	// changed while it was read).
	Warning string
}

// Len is the number of entries.
func (t *Tree) Len() int { return len(t.entries) }

// Get returns the entry at p.
func (t *Tree) Get(p string) (Entry, bool) {
	e, ok := t.entries[p]
	return e, ok
}

// Digests maps every non-directory path to its Digest, for rubric.Integrity.
func (t *Tree) Digests() map[string]string {
	out := make(map[string]string, len(t.entries))
	for p, e := range t.entries {
		if e.Type != TypeDir {
			out[p] = e.Digest()
		}
	}
	return out
}

// DefaultTimeout bounds one Capture.
const DefaultTimeout = 10 * time.Minute

// captureScript archives the working directory without its top-level .git (repository
// data is not part of the change set) to $1 ("-": stdout). The top-level names are
// collected by the shell, so no name is ever parsed and one tar call archives them all;
// an empty workspace writes nothing. With a file, its path is printed.
const captureScript = `out=$1; set --
for n in .[!.]* ..?* *; do
  { [ -e "$n" ] || [ -L "$n" ]; } || continue
  [ "$n" = .git ] && continue
  set -- "$@" "./$n"
done
if [ "$out" != - ]; then
  out=$(mktemp "${TMPDIR:-/tmp}/talkops-capture.XXXXXX") || exit 4
  echo "$out"
fi
[ $# -eq 0 ] && exit 0
exec tar -cf "$out" "$@"`

// CaptureOptions configure Capture.
type CaptureOptions struct {
	// Store receives file contents; nil keeps none.
	Store *Store
	// Keep decides, once a file is hashed, whether its content goes to the Store (nil:
	// every file). Contents the Store already holds are never written twice.
	Keep func(Entry) bool
	// Skip leaves paths out of the tree entirely (talkops' own report directory).
	Skip func(p string) bool
	// Timeout bounds the archive command (0: DefaultTimeout).
	Timeout time.Duration
	// ViaFile writes the archive to a temporary file in the sandbox and reads it with
	// Download, for providers whose Exec output is text (JSON strings), not bytes.
	ViaFile bool
}

// Capture streams the sandbox workspace out as a tar archive and builds its Tree on the
// host. Memory use is the manifest plus one small-file buffer, whatever the workspace size.
func Capture(ctx context.Context, sb providers.Sandbox, opts CaptureOptions) (*Tree, error) {
	start := time.Now()
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	var t *Tree
	var streamed int64
	var err error
	if opts.ViaFile {
		t, streamed, err = captureFile(ctx, sb, opts)
	} else {
		t, streamed, err = captureStdout(ctx, sb, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("record the workspace: %w", err)
	}
	t.Streamed = streamed
	t.Duration = time.Since(start)
	return t, nil
}

// captureStdout reads the archive from the command's stdout as it is produced.
func captureStdout(ctx context.Context, sb providers.Sandbox, opts CaptureOptions) (*Tree, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	type done struct {
		res providers.ExecResult
		err error
	}
	exited := make(chan done, 1)
	go func() {
		res, err := sb.Exec(ctx, providers.Cmd{
			Argv: []string{"/bin/sh", "-c", captureScript, "talkops-capture", "-"}, Stdout: pw,
			Timeout: opts.Timeout, OutputLimit: 64 << 10,
		})
		pw.Close()
		exited <- done{res, err}
	}()
	counted := &countingReader{r: pr}
	t, readErr := Read(counted, opts)
	if readErr != nil {
		cancel()
	}
	_, _ = io.Copy(io.Discard, pr) // let the command finish writing
	pr.Close()
	d := <-exited
	if readErr != nil {
		if d.err == nil && d.res.ExitCode != 0 && len(d.res.Stderr) > 0 {
			return nil, 0, fmt.Errorf("%w (archiver: %s)", readErr, firstLine(d.res.Stderr))
		}
		return nil, 0, readErr
	}
	warning, err := archiverOutcome(d.res, d.err, opts.Timeout)
	if err != nil {
		return nil, 0, err
	}
	t.Warning = warning
	return t, counted.n, nil
}

// captureFile archives to a temporary file in the sandbox, downloads it and removes it.
func captureFile(ctx context.Context, sb providers.Sandbox, opts CaptureOptions) (*Tree, int64, error) {
	res, err := sb.Exec(ctx, providers.Cmd{
		Argv:    []string{"/bin/sh", "-c", captureScript, "talkops-capture", "file"},
		Timeout: opts.Timeout,
	})
	path, _, _ := strings.Cut(string(res.Stdout), "\n")
	if err == nil && strings.HasPrefix(path, "/") && strings.Contains(path, "/talkops-capture.") {
		defer func() {
			rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = sb.Exec(rmCtx, providers.Cmd{Argv: []string{"rm", "-f", path}})
		}()
	}
	warning, err := archiverOutcome(res, err, opts.Timeout)
	if err != nil {
		return nil, 0, err
	}
	if !strings.HasPrefix(path, "/") {
		return nil, 0, fmt.Errorf("unexpected archiver output %q", firstLine(res.Stdout))
	}
	rc, err := sb.Download(ctx, path)
	if err != nil {
		return nil, 0, fmt.Errorf("download the archive: %w", err)
	}
	defer rc.Close()
	counted := &countingReader{r: rc}
	t, err := Read(counted, opts)
	if err != nil {
		return nil, 0, err
	}
	t.Warning = warning
	return t, counted.n, nil
}

// archiverOutcome turns the archive command's result into an error, or a warning when
// GNU tar said a file changed while it was read (exit 1: the archive is complete).
func archiverOutcome(res providers.ExecResult, err error, timeout time.Duration) (string, error) {
	switch {
	case err != nil:
		return "", err
	case res.TimedOut:
		return "", fmt.Errorf("archiving timed out after %s", timeout)
	case res.ExitCode == 1:
		return "the archiver said: " + firstLine(res.Stderr), nil
	case res.ExitCode != 0:
		return "", fmt.Errorf("tar exited with code %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	return "", nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Read builds a Tree from an uncompressed tar stream (what Capture reads from the
// sandbox). An empty stream is an empty tree.
func Read(r io.Reader, opts CaptureOptions) (*Tree, error) {
	t := &Tree{entries: map[string]Entry{}}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return t, t.checkParents()
		}
		if err != nil {
			return nil, fmt.Errorf("read the workspace archive: %w", err)
		}
		p, ok := cleanPath(hdr.Name)
		if !ok {
			if p == "" {
				continue // the root itself
			}
			return nil, fmt.Errorf("read the workspace archive: unsafe entry name %q", hdr.Name)
		}
		if opts.Skip != nil && opts.Skip(p) {
			continue
		}
		e := Entry{Path: p, Mode: fs.FileMode(hdr.Mode&0o777) | specialBits(hdr.Mode)}
		switch hdr.Typeflag {
		case tar.TypeReg: // tar.Reader reports the old TypeRegA as TypeReg
			e.Type = TypeFile
			if err := t.file(&e, tr, opts); err != nil {
				return nil, err
			}
		case tar.TypeLink:
			target, ok := cleanPath(hdr.Linkname)
			linked, found := t.entries[target]
			if !ok || !found || linked.Type != TypeFile {
				return nil, fmt.Errorf("read the workspace archive: hard link %q to unknown file %q", p, hdr.Linkname)
			}
			e.Type, e.Size, e.SHA256 = TypeFile, linked.Size, linked.SHA256
		case tar.TypeDir:
			e.Type = TypeDir
		case tar.TypeSymlink:
			e.Type, e.Target = TypeSymlink, hdr.Linkname
		default:
			e.Type = TypeOther
		}
		t.entries[p] = e
		if e.Type == TypeFile {
			t.Bytes += e.Size
		}
	}
}

// checkParents refuses a tree with an entry under a symlink or file. tar never writes one,
// but an archiver replaced inside the sandbox could, and a clean room replaying it would
// write through the symlink, past the protected-path rule.
func (t *Tree) checkParents() error {
	for p := range t.entries {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if e, ok := t.entries[d]; ok && e.Type != TypeDir {
				return fmt.Errorf("read the workspace archive: %q lies under %q, which is not a directory", p, d)
			}
		}
	}
	return nil
}

func specialBits(mode int64) fs.FileMode {
	var m fs.FileMode
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// smallFile is the size up to which a file is hashed in memory before the Store decides
// whether to keep it; larger files are spilled to a temporary file while hashed.
const smallFile = 1 << 20

func (t *Tree) file(e *Entry, r io.Reader, opts CaptureOptions) error {
	h := sha256.New()
	if opts.Store == nil {
		n, err := io.Copy(h, r)
		if err != nil {
			return fmt.Errorf("read %s from the workspace archive: %w", e.Path, err)
		}
		e.Size, e.SHA256 = n, hex.EncodeToString(h.Sum(nil))
		return nil
	}
	pending, err := opts.Store.begin(io.TeeReader(r, h), smallFile)
	if err != nil {
		return fmt.Errorf("read %s from the workspace archive: %w", e.Path, err)
	}
	e.Size, e.SHA256 = pending.size, hex.EncodeToString(h.Sum(nil))
	keep := opts.Keep == nil || opts.Keep(*e)
	if err := pending.finish(e.SHA256, keep); err != nil {
		return fmt.Errorf("store %s: %w", e.Path, err)
	}
	return nil
}

// cleanPath turns a tar name ("./a/b", "a/b/") into "a/b". ok is false for the root and
// for names that leave the workspace.
func cleanPath(name string) (string, bool) {
	if strings.ContainsRune(name, 0) || strings.HasPrefix(name, "/") {
		return name, false
	}
	p := path.Clean(strings.TrimPrefix(name, "./"))
	if p == "." {
		return "", false
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return p, false
	}
	return p, true
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
