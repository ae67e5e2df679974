package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"time"
)

// Entry is one member of an archive built by TarGz.
type Entry struct {
	// Name is written as is, so tests can build hostile archives ("../x", "/etc/x").
	Name string
	// Mode holds the permission bits plus fs.ModeDir for a directory or fs.ModeSymlink
	// for a symlink. 0 means 0o644 for files, 0o755 for directories.
	Mode fs.FileMode
	// Body is the content of a regular file.
	Body []byte
	// Linkname is the target of a symlink or hard link.
	Linkname string
	// Type, when non-zero, overrides the tar type flag derived from Mode (for example
	// tar.TypeLink or tar.TypeFifo).
	Type byte
	// ModTime defaults to 2000-01-01 UTC, so archives are reproducible.
	ModTime time.Time
}

// TarGz returns a gzip-compressed tar archive holding entries in order. It fails only on
// an entry archive/tar cannot encode.
func TarGz(entries ...Entry) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:     e.Name,
			Linkname: e.Linkname,
			ModTime:  e.ModTime,
			Format:   tar.FormatPAX,
		}
		if hdr.ModTime.IsZero() {
			hdr.ModTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		perm := e.Mode & fs.ModePerm
		switch {
		case e.Mode&fs.ModeDir != 0:
			hdr.Typeflag = tar.TypeDir
			if perm == 0 {
				perm = 0o755
			}
		case e.Mode&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if perm == 0 {
				perm = 0o777
			}
		default:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.Body))
			if perm == 0 {
				perm = 0o644
			}
		}
		hdr.Mode = int64(perm)
		if e.Type != 0 {
			hdr.Typeflag = e.Type
			if e.Type != tar.TypeReg {
				hdr.Size = 0
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar entry %q: %w", e.Name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Body); err != nil {
				return nil, fmt.Errorf("tar entry %q: %w", e.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}
