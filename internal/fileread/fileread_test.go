package fileread

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	big := filepath.Join(dir, "big")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(small, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path    string
		limit   int64
		want    string
		wantErr error
		msg     string
	}{
		{path: small, limit: 5, want: "hello"},
		{path: big, limit: 1024, wantErr: ErrTooLarge, msg: "the limit is 1 KiB"},
		{path: "/dev/zero", limit: 10 << 20, wantErr: ErrNotRegular, msg: "(a character device); want a regular file of at most 10 MiB"},
		{path: fifo, limit: 100, wantErr: ErrNotRegular, msg: "a named pipe"},
		{path: dir, limit: 100, wantErr: ErrNotRegular, msg: "a directory"},
		{path: filepath.Join(dir, "missing"), limit: 100, wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		got, err := Read(tt.path, tt.limit)
		if tt.wantErr == nil {
			if err != nil || string(got) != tt.want {
				t.Errorf("Read(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
			continue
		}
		if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("Read(%q) error = %v, want %v naming the path and %q", tt.path, err, tt.wantErr, tt.msg)
		}
	}
}
