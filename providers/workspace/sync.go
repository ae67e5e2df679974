package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync/atomic"

	"github.com/talkops/talkops/providers"
)

var (
	// errUploadFailed marks the pipe error Pack sees after Upload failed.
	errUploadFailed = errors.New("upload failed")
	// errUploadReturned ends Pack when Upload returns nil before the archive is complete.
	errUploadReturned = errors.New("upload returned before reading the whole archive")
)

// maxTailDrain bounds what Sync reads on Upload's behalf after Upload returned nil.
const maxTailDrain = 1 << 20

// Sync packs root and uploads it through sb.Upload into dir (relative to the sandbox
// WorkDir; "" means WorkDir), streaming through an io.Pipe so that packing and uploading
// overlap and memory stays flat. It returns the packing Stats with Target set.
//
// If either side fails the other is stopped: a packing error reaches Upload as a read
// error and Upload's ctx is cancelled; an upload error makes the next archive write fail.
// An Upload that returns nil before the archive is complete is an error too, except that
// the archive's end and the compressor's final flush may be left unread (an extractor may
// stop at the tar end-of-archive blocks): Sync drains that tail itself. Sync always waits
// for Upload to return, so no goroutine outlives it. When ctx is cancelled the error wraps
// ctx.Err().
//
// A sandbox that can show the project itself as a copy-on-write layer
// (providers.ProjectLayerer) gets the same selection without a copy: Sync walks the
// project, and the sandbox hides what the walk left out. Stats.Mode says which way was
// taken, and Stats.ModeNote why a layering sandbox got a copy.
//
// A copy is gzip-compressed, except for a sandbox that asks for a plain tar
// (providers.PlainTarUploader): one behind a local socket, where compression only costs CPU.
func Sync(ctx context.Context, sb providers.Sandbox, root, dir string, opts Options) (Stats, error) {
	target := sb.WorkDir()
	if path.IsAbs(dir) {
		target = path.Clean(dir)
	} else if dir != "" {
		target = path.Join(target, dir)
	}
	var note string
	if l, ok := sb.(providers.ProjectLayerer); ok && target == sb.WorkDir() {
		stats, view, err := plan(ctx, root, opts)
		stats.Target = target
		if err != nil {
			return stats, fmt.Errorf("sync workspace to %s: %w", target, err)
		}
		err = l.LayerProject(ctx, root, view)
		if err == nil {
			stats.Mode = ModeOverlay
			return stats, nil
		}
		if !errors.Is(err, providers.ErrNotSupported) {
			return stats, fmt.Errorf("sync workspace to %s: %w", target, err)
		}
		note = err.Error()
	}
	stats, err := copyTo(ctx, sb, root, dir, target, opts)
	stats.Mode, stats.ModeNote = ModeCopy, note
	return stats, err
}

// copyTo is Sync by archive.
func copyTo(ctx context.Context, sb providers.Sandbox, root, dir, target string, opts Options) (Stats, error) {

	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	uw := &uploadWriter{pw: pw}
	upErr := make(chan error, 1)
	upload, compress := sb.Upload, newCompressor
	if pu, ok := sb.(providers.PlainTarUploader); ok && pu.PlainTarUpload() {
		upload, compress = pu.UploadTar, noCompressor
	}
	go func() {
		err := upload(upCtx, dir, pr)
		if err != nil {
			pr.CloseWithError(fmt.Errorf("%w: %w", errUploadFailed, err))
		} else {
			uw.uploadDone.Store(true)
			_, _ = io.CopyN(io.Discard, pr, maxTailDrain) // best effort: the close below ends Pack either way
			pr.CloseWithError(errUploadReturned)
		}
		upErr <- err
	}()

	stats, packErr := pack(ctx, root, opts, uw, compress, func() { uw.closing.Store(true) })
	stats.Target = target
	if packErr != nil {
		pw.CloseWithError(packErr)
		cancel()
	} else {
		pw.Close()
	}
	uploadErr := <-upErr

	switch {
	case packErr == nil && uploadErr == nil:
		return stats, nil
	case uploadErr != nil && (packErr == nil || errors.Is(packErr, errUploadFailed)):
		// Upload failed first; Pack only saw the closed pipe.
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(uploadErr, ctxErr) {
			uploadErr = fmt.Errorf("%w (%w)", ctxErr, uploadErr)
		}
		return stats, fmt.Errorf("sync workspace to %s: upload: %w", target, uploadErr)
	default:
		return stats, fmt.Errorf("sync workspace to %s: %w", target, packErr)
	}
}

// uploadWriter is the archive's way into the pipe. Once Upload has returned nil, only the
// archive's closing tail may still be written (and is drained by Sync); any other write
// means Upload stopped early.
type uploadWriter struct {
	pw         *io.PipeWriter
	uploadDone atomic.Bool
	closing    atomic.Bool
}

func (u *uploadWriter) Write(b []byte) (int, error) {
	if u.uploadDone.Load() && !u.closing.Load() {
		return 0, errUploadReturned
	}
	return u.pw.Write(b)
}
