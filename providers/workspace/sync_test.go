package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
)

// fakeSandbox is a providers.Sandbox whose Upload is a function of the test; Exec and
// Download are not used by Sync.
type fakeSandbox struct {
	workDir string
	upload  func(ctx context.Context, dir string, tgz io.Reader) error

	mu   sync.Mutex
	dirs []string
}

var _ providers.Sandbox = (*fakeSandbox)(nil)

func (f *fakeSandbox) ID() string      { return "fake-1" }
func (f *fakeSandbox) WorkDir() string { return f.workDir }
func (f *fakeSandbox) Exec(context.Context, providers.Cmd) (providers.ExecResult, error) {
	return providers.ExecResult{}, providers.ErrNotSupported
}
func (f *fakeSandbox) Download(context.Context, string) (io.ReadCloser, error) {
	return nil, providers.ErrNotSupported
}
func (f *fakeSandbox) Close(context.Context) error { return nil }
func (f *fakeSandbox) Upload(ctx context.Context, dir string, tgz io.Reader) error {
	f.mu.Lock()
	f.dirs = append(f.dirs, dir)
	f.mu.Unlock()
	return f.upload(ctx, dir, tgz)
}

// extractingSandbox uploads into a directory on the host with the safe extractor that
// host-backed providers use.
func extractingSandbox(workDir string) *fakeSandbox {
	return &fakeSandbox{workDir: workDir, upload: func(ctx context.Context, dir string, tgz io.Reader) error {
		return archive.Extract(ctx, tgz, filepath.Join(workDir, filepath.FromSlash(dir)))
	}}
}

// listTree returns the paths under dir like archive names: slash-separated, directories
// with a trailing slash, sorted.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestSync(t *testing.T) {
	t.Parallel()
	root := projectTree(t)
	work := t.TempDir()
	sb := extractingSandbox(work)

	stats, err := Sync(t.Context(), sb, root, "app", Options{})
	if err != nil {
		t.Fatalf("Sync() error = %v", err)
	}
	if diff := cmp.Diff([]string{"app"}, sb.dirs); diff != "" {
		t.Errorf("Upload dirs mismatch (-want +got):\n%s", diff)
	}
	if want := work + "/app"; stats.Target != want {
		t.Errorf("Sync() Target = %q, want %q", stats.Target, want)
	}
	dest := filepath.Join(work, "app")
	if diff := cmp.Diff(projectKept, listTree(t, dest)); diff != "" {
		t.Errorf("sandbox tree mismatch (-want +got):\n%s", diff)
	}
	if link, err := os.Readlink(filepath.Join(dest, "dirlink")); err != nil || link != "sub" {
		t.Errorf("Readlink(dirlink) = %q, %v, want a symlink to \"sub\"", link, err)
	}
	if fi, err := os.Stat(filepath.Join(dest, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("Stat(run.sh) = %v, %v, want mode 0755", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "tests", "test_app.py")); err != nil || string(b) != "def test_ok(): pass" {
		t.Errorf("ReadFile(tests/test_app.py) = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dest, "exact.bin")); err != nil || fi.Size() != DefaultMaxFileSize {
		t.Errorf("Stat(exact.bin) = %v, %v, want %d bytes", fi, err, DefaultMaxFileSize)
	}
	if stats.Secrets == nil || stats.BytesSent == 0 {
		t.Errorf("Sync() stats = %+v, want secrets reported and bytes sent", stats)
	}
}

// bigTree makes a tree whose archive is large enough that the compressor writes long
// before the end.
func bigTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for i := range 64 {
		name := filepath.Join(root, fmt.Sprintf("f%02d", i))
		if err := os.WriteFile(name, randomBytes(uint64(i), 16<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var errBoom = errors.New("sandbox went away")

func TestSyncFailures(t *testing.T) {
	t.Parallel()
	root := bigTree(t)
	// Pack is reproducible, so this is the length Sync will stream.
	var whole bytes.Buffer
	if _, err := Pack(t.Context(), root, Options{}, &whole); err != nil {
		t.Fatal(err)
	}
	archiveLen := int64(whole.Len())
	tests := []struct {
		name    string
		root    string
		cancel  bool // the upload cancels the run's context after reading a little
		upload  func(ctx context.Context, tgz io.Reader, cancel context.CancelFunc) error
		wantIs  error
		wantErr string
	}{
		{
			name:    "upload fails at once",
			upload:  func(context.Context, io.Reader, context.CancelFunc) error { return errBoom },
			wantIs:  errBoom,
			wantErr: "upload: sandbox went away",
		},
		{
			name: "upload fails midway",
			upload: func(_ context.Context, tgz io.Reader, _ context.CancelFunc) error {
				if _, err := io.CopyN(io.Discard, tgz, 20<<10); err != nil {
					return err
				}
				return errBoom
			},
			wantIs:  errBoom,
			wantErr: "upload: sandbox went away",
		},
		{
			name:    "upload returns nil without reading",
			upload:  func(context.Context, io.Reader, context.CancelFunc) error { return nil },
			wantIs:  errUploadReturned,
			wantErr: "upload returned before reading the whole archive",
		},
		{
			name: "upload returns nil halfway",
			upload: func(_ context.Context, tgz io.Reader, _ context.CancelFunc) error {
				_, err := io.CopyN(io.Discard, tgz, 100<<10)
				return err
			},
			wantIs: errUploadReturned,
		},
		{
			name: "pack fails: upload sees the error",
			root: filepath.Join(root, "missing"),
			upload: func(_ context.Context, tgz io.Reader, _ context.CancelFunc) error {
				_, err := io.Copy(io.Discard, tgz)
				if err == nil {
					return errors.New("upload read a clean end of a failed archive")
				}
				return err
			},
			wantErr: "project root",
		},
		{
			name: "context cancelled during upload",
			upload: func(ctx context.Context, tgz io.Reader, cancel context.CancelFunc) error {
				if _, err := io.CopyN(io.Discard, tgz, 10<<10); err != nil {
					return err
				}
				cancel()
				<-ctx.Done() // Upload's ctx derives from the run's
				_, err := io.Copy(io.Discard, tgz)
				return err
			},
			wantIs: context.Canceled,
		},
		{
			name: "upload leaves the gzip trailer unread",
			upload: func(_ context.Context, tgz io.Reader, _ context.CancelFunc) error {
				_, err := io.CopyN(io.Discard, tgz, archiveLen-8)
				return err
			},
		},
		{
			name: "upload stops before the archive's end",
			upload: func(_ context.Context, tgz io.Reader, _ context.CancelFunc) error {
				_, err := io.CopyN(io.Discard, tgz, archiveLen-1024)
				return err
			},
			wantIs: errUploadReturned,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// synctest fails the test if any goroutine Sync started is still blocked
			// when it returns: the pipe must be closed on every path.
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				sb := &fakeSandbox{workDir: "/workspace", upload: func(ctx context.Context, _ string, tgz io.Reader) error {
					return tt.upload(ctx, tgz, cancel)
				}}
				r := root
				if tt.root != "" {
					r = tt.root
				}
				_, err := Sync(ctx, sb, r, "", Options{})
				if tt.wantIs == nil && tt.wantErr == "" {
					if err != nil {
						t.Fatalf("Sync() error = %v, want nil", err)
					}
					return
				}
				if err == nil {
					t.Fatal("Sync() error = nil, want an error")
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("Sync() error = %v, want errors.Is %v", err, tt.wantIs)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Sync() error = %q, want it to contain %q", err, tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "sync workspace to /workspace: ") {
					t.Errorf("Sync() error = %q, want it to name the target", err)
				}
			})
		})
	}
}

// plainSandbox is a fakeSandbox that can take a plain tar (providers.PlainTarUploader).
type plainSandbox struct {
	*fakeSandbox
	plain     bool
	uploadTar func(ctx context.Context, dir string, tar io.Reader) error
}

func (p *plainSandbox) PlainTarUpload() bool { return p.plain }
func (p *plainSandbox) UploadTar(ctx context.Context, dir string, tar io.Reader) error {
	return p.uploadTar(ctx, dir, tar)
}

// A sandbox that asks for a plain tar gets exactly the tar inside Pack's gzip stream,
// through UploadTar; one that does not gets the gzip stream through Upload.
func TestSyncPlainTar(t *testing.T) {
	t.Parallel()
	root := bigTree(t)
	var packed bytes.Buffer
	if _, err := Pack(t.Context(), root, Options{}, &packed); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&packed)
	if err != nil {
		t.Fatal(err)
	}
	wantTar, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range []bool{true, false} {
		var viaUpload, viaTar []byte
		sb := &plainSandbox{plain: plain,
			fakeSandbox: &fakeSandbox{workDir: "/w", upload: func(_ context.Context, _ string, r io.Reader) error {
				var err error
				viaUpload, err = io.ReadAll(r)
				return err
			}},
			uploadTar: func(_ context.Context, _ string, r io.Reader) error {
				// Stop at the end-of-archive blocks, as an extractor may: Sync drains the rest.
				var buf bytes.Buffer
				tr := tar.NewReader(io.TeeReader(r, &buf))
				for {
					if _, err := tr.Next(); err == io.EOF {
						break
					} else if err != nil {
						return err
					}
				}
				viaTar = buf.Bytes()
				return nil
			}}
		stats, err := Sync(t.Context(), sb, root, "", Options{})
		if err != nil {
			t.Fatalf("plain=%v: Sync: %v", plain, err)
		}
		if plain {
			if viaUpload != nil || !bytes.HasPrefix(wantTar, viaTar) || len(viaTar) < len(wantTar)-2*512 {
				t.Errorf("plain tar: Upload got %d bytes, UploadTar %d, want none and the %d-byte tar", len(viaUpload), len(viaTar), len(wantTar))
			}
			if stats.BytesSent != int64(len(wantTar)) {
				t.Errorf("plain tar: BytesSent = %d, want %d", stats.BytesSent, len(wantTar))
			}
			continue
		}
		if viaTar != nil || len(viaUpload) < 2 || string(viaUpload[:2]) != "\x1f\x8b" {
			t.Errorf("gzip: UploadTar got %d bytes, Upload %d starting %q, want a gzip stream through Upload", len(viaTar), len(viaUpload), viaUpload[:min(2, len(viaUpload))])
		}
	}
}
