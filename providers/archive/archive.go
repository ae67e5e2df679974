// Package archive extracts gzip-compressed tar streams safely into a directory and builds
// such streams for tests.
//
// Extract is what host-backed providers (local, bwrap, fake) use for Sandbox.Upload. It
// treats the archive as hostile: every write goes through an os.Root opened on the target
// directory, so no entry can land outside it, whatever the names and symlinks in the
// archive (or already on disk) say. On top of that it refuses, with an error naming the
// entry:
//
//   - absolute names, names with a ".." element, empty names;
//   - symlinks with an absolute target or a target that leaves the directory, and symlinks
//     placed below another symlink (their target could not be checked lexically);
//   - hard links, device nodes, FIFOs and any other non-regular entry type;
//   - archives over the entry-count or byte limits (a gzip bomb fails instead of filling
//     the disk).
//
// Permission bits are kept, masked to 0o777 (no setuid, setgid or sticky bits); owners are
// not restored. Modification times of regular files are kept.
package archive

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// ErrUnsafe is wrapped by every error about an archive entry that Extract refuses.
var ErrUnsafe = errors.New("unsafe archive entry")

// ErrLimit is wrapped by the error Extract returns when an archive exceeds a limit.
var ErrLimit = errors.New("archive exceeds limit")

// typeRegA is the pre-POSIX type flag '\x00' for a regular file (tar.TypeRegA, deprecated).
// Old archives still use it. tar.Reader reports such entries as tar.TypeReg, or tar.TypeDir
// when the name ends in "/"; the case below keeps accepting them should it ever stop.
const typeRegA byte = '\x00'

// Default limits of Extractor.
const (
	DefaultMaxEntries = 1_000_000
	DefaultMaxBytes   = 16 << 30 // 16 GiB of file contents, uncompressed
)

// Extractor extracts archives with limits. The zero value uses the defaults.
type Extractor struct {
	// MaxEntries bounds the number of tar entries; 0 means DefaultMaxEntries.
	MaxEntries int
	// MaxBytes bounds the sum of regular file sizes; 0 means DefaultMaxBytes.
	MaxBytes int64
}

// Extract extracts the gzip-compressed tar stream tgz into dir with the default limits.
// dir is created if missing.
func Extract(ctx context.Context, tgz io.Reader, dir string) error {
	return Extractor{}.Extract(ctx, tgz, dir)
}

// Extract extracts the gzip-compressed tar stream tgz into dir, which is created if
// missing. On error, entries extracted before the failing one stay on disk.
func (x Extractor) Extract(ctx context.Context, tgz io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	defer root.Close()
	return x.ExtractRoot(ctx, tgz, root)
}

// ExtractRoot extracts the gzip-compressed tar stream tgz into root. Callers that resolved
// the target directory themselves (for example with os.Root.OpenRoot, so that the target
// cannot be a symlink out of a working directory) use this form.
func (x Extractor) ExtractRoot(ctx context.Context, tgz io.Reader, root *os.Root) error {
	maxEntries, maxBytes := x.MaxEntries, x.MaxBytes
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	zr, err := gzip.NewReader(tgz)
	if err != nil {
		return fmt.Errorf("extract: not a gzip stream: %w", err)
	}
	defer zr.Close()
	e := &extraction{root: root, budget: maxBytes}
	tr := tar.NewReader(zr)
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("extract: read entry %d: %w", n, err)
		}
		if n > maxEntries {
			return fmt.Errorf("extract: %w: more than %d entries", ErrLimit, maxEntries)
		}
		if err := e.entry(ctx, hdr, tr); err != nil {
			return fmt.Errorf("extract: entry %d %q: %w", n, hdr.Name, err)
		}
	}
	if err := e.finishDirs(); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	return nil
}

type extraction struct {
	root   *os.Root
	budget int64
	// dirModes are applied at the end, deepest first, so that a read-only directory in
	// the archive does not stop its own contents from being written.
	dirModes map[string]fs.FileMode
}

// cleanName validates a tar entry name and returns it in clean, slash-separated form
// relative to the root ("." for the root itself).
func cleanName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafe)
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: NUL in name", ErrUnsafe)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute name", ErrUnsafe)
	}
	if slices.Contains(strings.Split(name, "/"), "..") {
		return "", fmt.Errorf("%w: name contains \"..\"", ErrUnsafe)
	}
	return path.Clean(name), nil
}

func (e *extraction) entry(ctx context.Context, hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil // PAX global header: metadata only
	case tar.TypeLink:
		return fmt.Errorf("%w: hard links are not extracted", ErrUnsafe)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return fmt.Errorf("%w: device or FIFO entries are not extracted", ErrUnsafe)
	case tar.TypeReg, typeRegA, tar.TypeDir, tar.TypeSymlink, tar.TypeGNUSparse:
	default:
		return fmt.Errorf("%w: unsupported entry type %q", ErrUnsafe, hdr.Typeflag)
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	mode := fs.FileMode(hdr.Mode) & fs.ModePerm
	switch hdr.Typeflag {
	case tar.TypeDir:
		return e.dir(name, mode)
	case tar.TypeSymlink:
		return e.symlink(name, hdr.Linkname)
	default:
		return e.file(ctx, name, mode, hdr, r)
	}
}

func (e *extraction) dir(name string, mode fs.FileMode) error {
	if err := e.root.MkdirAll(name, 0o755); err != nil {
		return err
	}
	if e.dirModes == nil {
		e.dirModes = map[string]fs.FileMode{}
	}
	e.dirModes[name] = mode
	return nil
}

func (e *extraction) file(ctx context.Context, name string, mode fs.FileMode, hdr *tar.Header, r io.Reader) error {
	if name == "." {
		return fmt.Errorf("%w: regular file named as the root directory", ErrUnsafe)
	}
	if hdr.Size < 0 || hdr.Size > e.budget {
		return fmt.Errorf("%w: %d bytes would exceed the remaining budget of %d bytes", ErrLimit, hdr.Size, e.budget)
	}
	if err := e.prepare(name); err != nil {
		return err
	}
	f, err := e.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, ctxReader{ctx: ctx, r: io.LimitReader(r, e.budget+1)})
	e.budget -= n
	if err == nil && e.budget < 0 {
		err = fmt.Errorf("%w: file contents exceed the byte budget", ErrLimit)
	}
	if err == nil {
		// fchmod on the open file: no race with a symlink swapped in by someone else.
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if !hdr.ModTime.IsZero() {
		// Best effort: a failure to set times does not make the content wrong.
		_ = e.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	}
	return nil
}

func (e *extraction) symlink(name, target string) error {
	if name == "." {
		return fmt.Errorf("%w: symlink named as the root directory", ErrUnsafe)
	}
	if target == "" || strings.HasPrefix(target, "/") {
		return fmt.Errorf("%w: symlink target %q is not a relative path", ErrUnsafe, target)
	}
	if resolved := path.Join(path.Dir(name), target); resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("%w: symlink target %q points outside the directory", ErrUnsafe, target)
	}
	// The lexical check above is only sound if the link's parent directory is where the
	// name says it is, that is, no parent element is itself a symlink.
	if err := e.noSymlinkParents(name); err != nil {
		return err
	}
	if err := e.prepare(name); err != nil {
		return err
	}
	return e.root.Symlink(target, name)
}

// noSymlinkParents fails if any existing parent element of name is a symlink.
func (e *extraction) noSymlinkParents(name string) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		fi, err := e.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: symlink below the symlink %q", ErrUnsafe, p)
		}
	}
	return nil
}

// prepare creates name's parent directories and removes an existing non-directory at
// name, as tar does, so that the new entry replaces it rather than writing through it.
func (e *extraction) prepare(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := e.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	fi, err := e.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("a directory exists at this path")
	default:
		return e.root.Remove(name)
	}
}

func (e *extraction) finishDirs() error {
	names := make([]string, 0, len(e.dirModes))
	for name := range e.dirModes {
		names = append(names, name)
	}
	// Deepest first, so that making a parent read-only does not block its children.
	slices.SortFunc(names, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	for _, name := range names {
		d, err := e.root.Open(name)
		if err != nil {
			return fmt.Errorf("set mode of %q: %w", name, err)
		}
		err = d.Chmod(e.dirModes[name])
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("set mode of %q: %w", name, err)
		}
	}
	return nil
}

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context //nolint:containedctx // lives for one io.Copy call only
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
