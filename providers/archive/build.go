package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
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

// Writer writes a gzip-compressed tar stream, the archive format talkops sends into
// sandboxes. Write headers and bodies through the embedded tar.Writer; Close ends the
// tar and then the gzip stream (it does not close the underlying writer).
type Writer struct {
	*tar.Writer
	zw *gzip.Writer
}

// NewWriter returns a Writer to w at gzip's default compression.
func NewWriter(w io.Writer) *Writer {
	zw := gzip.NewWriter(w)
	return &Writer{Writer: tar.NewWriter(zw), zw: zw}
}

// NewWriterLevel returns a Writer to w at the given gzip level (gzip.BestSpeed, …).
func NewWriterLevel(w io.Writer, level int) (*Writer, error) {
	zw, err := gzip.NewWriterLevel(w, level)
	if err != nil {
		return nil, err
	}
	return &Writer{Writer: tar.NewWriter(zw), zw: zw}, nil
}

// Close writes the tar trailer and flushes and ends the gzip stream.
func (w *Writer) Close() error {
	if err := w.Writer.Close(); err != nil {
		return err
	}
	return w.zw.Close()
}

// Add writes one Entry: its header and, for a regular file, its Body.
func (w *Writer) Add(e Entry) error {
	hdr := e.header()
	if err := w.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar entry %q: %w", e.Name, err)
	}
	if hdr.Typeflag == tar.TypeReg {
		if _, err := w.Write(e.Body); err != nil {
			return fmt.Errorf("tar entry %q: %w", e.Name, err)
		}
	}
	return nil
}

func (e Entry) header() *tar.Header {
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
	return hdr
}

// TarGz returns a gzip-compressed tar archive holding entries in order. It fails only on
// an entry archive/tar cannot encode.
func TarGz(entries ...Entry) ([]byte, error) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, e := range entries {
		if err := w.Add(e); err != nil {
			return nil, err
		}
	}
	if err := w.Writer.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	if err := w.zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return buf.Bytes(), nil
}
