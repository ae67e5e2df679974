package changeset

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
)

// Applied says what Apply did.
type Applied struct {
	// Written and Removed count the paths written and removed.
	Written, Removed int
	// Kept are changed paths left at their baseline content because they are protected.
	Kept []string
	// NotApplied are changes that cannot be replayed, with the reason (a device file, a
	// symlink pointing outside the workspace).
	NotApplied []string
}

// applyBatch bounds the paths of one rm command.
const applyBatch = 500

// Apply replays the change set in sb's working directory, which holds the baseline (the
// project synced and the setup script run): removed and type-changed paths are deleted,
// then added, modified, type- and mode-changed entries are uploaded with their content
// from store. Paths for which keep returns true (protected paths) are left as they are,
// and so is every directory that holds one.
func (s *Set) Apply(ctx context.Context, sb providers.Sandbox, base *Tree, store Contents, keep func(string) bool) (Applied, error) {
	var out Applied
	var kept []string
	for p := range base.entries {
		if keep(p) {
			kept = append(kept, p)
		}
	}
	holdsKept := func(dir string) bool {
		return slices.ContainsFunc(kept, func(k string) bool { return strings.HasPrefix(k, dir+"/") })
	}
	var remove []string
	var write []Entry
	for _, c := range s.Changes {
		if keep(c.Path) {
			out.Kept = append(out.Kept, c.Path)
			continue
		}
		if c.Kind == Removed || c.Kind == TypeChanged {
			if c.Before.Type == TypeDir && holdsKept(c.Path) {
				out.Kept = append(out.Kept, c.Path)
				continue
			}
			remove = append(remove, c.Path)
		}
		if c.Kind == Removed {
			continue
		}
		switch e := c.After; {
		case e.Type == TypeOther:
			out.NotApplied = append(out.NotApplied, c.Path+": not a file, directory or symlink")
		case e.Type == TypeSymlink && !symlinkInside(e.Path, e.Target):
			out.NotApplied = append(out.NotApplied, fmt.Sprintf("%s: symlink to %q points outside the workspace", c.Path, e.Target))
		case e.Type == TypeFile && !store.Has(e.SHA256):
			return out, fmt.Errorf("apply the change set: the content of %s (%d bytes) was not kept: the change set exceeds the store's cap", c.Path, e.Size)
		default:
			write = append(write, e)
		}
	}
	for chunk := range slices.Chunk(remove, applyBatch) {
		argv := []string{"rm", "-rf", "--"}
		for _, p := range chunk {
			argv = append(argv, "./"+p)
		}
		res, err := sb.Exec(ctx, providers.Cmd{Argv: argv, Timeout: 5 * time.Minute})
		switch {
		case err != nil:
			return out, fmt.Errorf("apply the change set: remove paths: %w", err)
		case res.ExitCode != 0:
			return out, fmt.Errorf("apply the change set: remove paths: exit code %d: %s", res.ExitCode, firstLine(res.Stderr))
		}
		out.Removed += len(chunk)
	}
	if len(write) == 0 {
		return out, nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeArchive(pw, write, store)) }()
	err := sb.Upload(ctx, ".", pr)
	pr.CloseWithError(io.ErrClosedPipe) // stop the writer if Upload returned early
	if err != nil {
		return out, fmt.Errorf("apply the change set: upload: %w", err)
	}
	out.Written = len(write)
	return out, nil
}

// symlinkInside reports whether a symlink at p with this target stays in the workspace.
func symlinkInside(p, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") {
		return false
	}
	r := path.Join(path.Dir(p), target)
	return r != ".." && !strings.HasPrefix(r, "../")
}

// writeArchive writes entries (sorted by path, so parents come first) as a gzip tar.
func writeArchive(w io.Writer, entries []Entry, store Contents) error {
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	tw := archive.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode.Perm()), ModTime: time.Now(), Format: tar.FormatPAX}
		switch e.Type {
		case TypeDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
		case TypeSymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Target
		case TypeFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		default:
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Type != TypeFile {
			continue
		}
		f, err := store.Open(e.SHA256)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
	}
	return tw.Close()
}

// Materialize writes the tree into dir on the host (which must exist and be empty), with
// file contents from store: the clean room of a provider that runs in a host directory.
func (t *Tree) Materialize(dir string, store *Store) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("materialize the baseline: %w", err)
	}
	defer root.Close()
	paths := make([]string, 0, len(t.entries))
	for p := range t.entries {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var dirs []Entry
	for _, p := range paths {
		e := t.entries[p]
		if parent := path.Dir(p); parent != "." {
			if err := root.MkdirAll(parent, 0o755); err != nil {
				return fmt.Errorf("materialize the baseline: %w", err)
			}
		}
		switch e.Type {
		case TypeDir:
			if err := root.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("materialize the baseline: %w", err)
			}
			dirs = append(dirs, e)
		case TypeSymlink:
			if err := root.Symlink(e.Target, p); err != nil {
				return fmt.Errorf("materialize the baseline: %w", err)
			}
		case TypeFile:
			if err := copyOut(root, e, store); err != nil {
				return fmt.Errorf("materialize the baseline: %s: %w", p, err)
			}
		}
	}
	slices.Reverse(dirs) // deepest last-sorted first, so a read-only parent does not block children
	for _, d := range dirs {
		if err := root.Chmod(d.Path, d.Mode.Perm()); err != nil {
			return fmt.Errorf("materialize the baseline: %w", err)
		}
	}
	return nil
}

func copyOut(root *os.Root, e Entry, store Contents) error {
	src, err := store.Open(e.SHA256)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := root.OpenFile(e.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Chmod(e.Mode.Perm())
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}
