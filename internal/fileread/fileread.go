// Package fileread reads a whole file that a user, a repository or an artifact named,
// within a size limit: talkops never reads an unbounded file (/dev/zero, a FIFO, a
// multi-gigabyte log) into memory, and never blocks opening one.
package fileread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// ErrNotRegular is wrapped when the path names a device, FIFO, socket or directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped when the file holds more than the limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the regular file at path, which must hold at most limit
// bytes. Errors name the path and, for size, the limit; a missing file wraps
// fs.ErrNotExist. The file is opened non-blocking, so a FIFO is refused at once
// instead of waiting for a writer.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path,
			Err: fmt.Errorf("%w (%s); want a regular file of at most %s", ErrNotRegular, kind(fi.Mode()), Size(limit))}
	}
	if fi.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	// The size can change between Stat and the read; the limit holds either way.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, limit)
	}
	return data, nil
}

func tooLarge(path string, limit int64) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: the limit is %s", ErrTooLarge, Size(limit))}
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

// Size shows a byte limit as people write it: "10 MiB", "512 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
