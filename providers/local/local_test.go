//go:build unix

package local_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/local"
)

func hostEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func create(t *testing.T, p *local.Provider, spec providers.Spec) providers.Sandbox {
	t.Helper()
	sb, err := p.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create(%+v) error: %v", spec, err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

func run(t *testing.T, sb providers.Sandbox, cmd providers.Cmd) providers.ExecResult {
	t.Helper()
	res, err := sb.Exec(t.Context(), cmd)
	if err != nil {
		t.Fatalf("Exec(%q) error: %v", cmd.Argv, err)
	}
	return res
}

func parseEnv(out []byte) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(string(out)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		m[k] = v
	}
	return m
}

func TestEnvironmentIsMinimal(t *testing.T) {
	t.Parallel()
	host := map[string]string{
		"PATH":              "/usr/bin:/bin",
		"HOME":              "/home/ci",
		"LANG":              "C.UTF-8",
		"GOPATH":            "/go",
		"GITHUB_TOKEN":      "ghs_secret",
		"ANTHROPIC_API_KEY": "sk-ant-secret",
		"AWS_SECRET_ACCESS": "aws-secret",
	}
	p := local.New(local.Options{Getenv: hostEnv(host), PassEnv: []string{"GOPATH"}})
	sb := create(t, p, providers.Spec{ProjectDir: t.TempDir(), Env: map[string]string{"FROM_SPEC": "s", "HOME": "/spec/home"}})
	res := run(t, sb, providers.Cmd{Argv: []string{"env"}, Env: map[string]string{"FROM_CMD": "c"}})
	want := map[string]string{
		"PATH":      "/usr/bin:/bin",
		"HOME":      "/spec/home",
		"LANG":      "C.UTF-8",
		"GOPATH":    "/go",
		"FROM_SPEC": "s",
		"FROM_CMD":  "c",
	}
	got := parseEnv(res.Stdout)
	if len(got["TALKOPS_LOCAL_CMD"]) != 24 {
		t.Errorf("TALKOPS_LOCAL_CMD = %q, want the command's 24-digit token", got["TALKOPS_LOCAL_CMD"])
	}
	delete(got, "TALKOPS_LOCAL_CMD") // random; how detached processes are found
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment of a command (-want +got):\n%s", diff)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Parallel()
	p := local.New(local.Options{Getenv: hostEnv(nil)})
	sb := create(t, p, providers.Spec{ProjectDir: t.TempDir()})
	res := run(t, sb, providers.Shell(`printf %s "$PATH"`))
	if got := string(res.Stdout); got != local.DefaultPath {
		t.Errorf("PATH without a host PATH = %q, want %q", got, local.DefaultPath)
	}
}

func TestCreateErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		spec   providers.Spec
		wantIs error
		want   string
	}{
		{"NoProjectDir", t.Context(), providers.Spec{}, nil, "Spec.ProjectDir is empty"},
		{"Missing", t.Context(), providers.Spec{ProjectDir: filepath.Join(dir, "nope")}, fs.ErrNotExist, "working directory"},
		{"NotADir", t.Context(), providers.Spec{ProjectDir: file}, nil, "is not a directory"},
		{"Snapshot", t.Context(), providers.Spec{ProjectDir: dir, Snapshot: "snap"}, providers.ErrNotSupported, "snap"},
		{"BadEnvName", t.Context(), providers.Spec{ProjectDir: dir, Env: map[string]string{"A=B": "x"}}, nil, `invalid variable name "A=B"`},
		{"Cancelled", cancelled, providers.Spec{ProjectDir: dir}, context.Canceled, "create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb, err := local.New(local.Options{}).Create(tc.ctx, tc.spec)
			if err == nil {
				sb.Close(context.Background())
				t.Fatalf("Create(%+v) error = nil, want one containing %q", tc.spec, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
				t.Errorf("Create(%+v) error = %v, want one containing %q (and wrapping %v)", tc.spec, err, tc.want, tc.wantIs)
			}
		})
	}
}

func TestIDAndWorkDir(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	if err := os.Mkdir(filepath.Join(project, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := local.New(local.Options{})
	for _, tc := range []struct {
		name    string
		spec    providers.Spec
		wantID  string // regexp
		wantDir string
	}{
		{"RunID", providers.Spec{ProjectDir: project, RunID: "run-42.a_b"}, `^local-run-42\.a_b$`, project},
		{"UnsafeRunID", providers.Spec{ProjectDir: project, RunID: "../x y"}, `^local-[0-9a-f]{12}$`, project},
		{"NoRunID", providers.Spec{ProjectDir: project}, `^local-[0-9a-f]{12}$`, project},
		{"RelativeWorkDir", providers.Spec{ProjectDir: project, WorkDir: "sub"}, `^local-`, filepath.Join(project, "sub")},
		{"AbsoluteWorkDir", providers.Spec{WorkDir: filepath.Join(project, "sub")}, `^local-`, filepath.Join(project, "sub")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := create(t, p, tc.spec)
			if !regexp.MustCompile(tc.wantID).MatchString(sb.ID()) {
				t.Errorf("ID() = %q, want a match of %s", sb.ID(), tc.wantID)
			}
			if sb.WorkDir() != tc.wantDir {
				t.Errorf("WorkDir() = %q, want %q", sb.WorkDir(), tc.wantDir)
			}
		})
	}
	if _, err := p.Attach(t.Context(), "local-x", providers.AttachOptions{}); !errors.Is(err, providers.ErrNotSupported) {
		t.Errorf("Attach error = %v, want ErrNotSupported", err)
	}
}

func TestPathEscapes(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	project := filepath.Join(base, "project")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{project, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"linkfile": secret, "linkdir": outside, "rellink": "../outside/secret"} {
		if err := os.Symlink(target, filepath.Join(project, name)); err != nil {
			t.Fatal(err)
		}
	}
	sb := create(t, local.New(local.Options{}), providers.Spec{ProjectDir: project})
	tgz, err := archive.TarGz(archive.Entry{Name: "planted", Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Download", func(t *testing.T) {
		for _, p := range []string{"../outside/secret", secret, "linkfile", "linkdir/secret", "rellink", "/etc/passwd"} {
			rc, err := sb.Download(t.Context(), p)
			if err == nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				t.Errorf("Download(%q) = %q, want an error", p, b)
			}
		}
		if _, err := sb.Download(t.Context(), "../outside/secret"); !errors.Is(err, local.ErrOutsideWorkDir) {
			t.Errorf("Download(../outside/secret) error = %v, want ErrOutsideWorkDir", err)
		}
		if _, err := sb.Download(t.Context(), "."); err == nil {
			t.Error("Download(.) of a directory: error = nil, want one")
		}
		// A FIFO must be refused, not opened (which would block until a writer came).
		if err := syscall.Mkfifo(filepath.Join(project, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			rc, err := sb.Download(t.Context(), "fifo")
			if err == nil {
				rc.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Download(fifo) error = %v, want \"not a regular file\"", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Download(fifo) blocked")
		}
	})
	t.Run("Upload", func(t *testing.T) {
		for _, dir := range []string{"..", "../outside", outside, "linkdir", "linkdir/deeper", "/tmp"} {
			if err := sb.Upload(t.Context(), dir, bytes.NewReader(tgz)); err == nil {
				t.Errorf("Upload(%q) error = nil, want one", dir)
			}
		}
		if err := sb.Upload(t.Context(), "../outside", bytes.NewReader(tgz)); !errors.Is(err, local.ErrOutsideWorkDir) {
			t.Errorf("Upload(../outside) error = %v, want ErrOutsideWorkDir", err)
		}
		entries, err := os.ReadDir(outside)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("outside directory now holds %d entries, want only the secret", len(entries))
		}
	})
}

func writeScript(t *testing.T, path, body string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

func TestExecResolution(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	bin := t.TempDir()
	writeScript(t, filepath.Join(bin, "custom-tool"), "#!/bin/sh\necho custom\n", 0o755)
	writeScript(t, filepath.Join(project, "prog"), "#!/bin/sh\necho prog\n", 0o755)
	writeScript(t, filepath.Join(project, "noexec"), "#!/bin/sh\necho no\n", 0o644)
	if err := os.Mkdir(filepath.Join(project, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(project, "sub", "subprog"), "#!/bin/sh\necho sub\n", 0o755)
	sb := create(t, local.New(local.Options{}), providers.Spec{ProjectDir: project})
	for _, tc := range []struct {
		name       string
		cmd        providers.Cmd
		wantCode   int
		wantStdout string
	}{
		{"PathFromCmdEnv", providers.Cmd{Argv: []string{"custom-tool"}, Env: map[string]string{"PATH": bin + ":/usr/bin:/bin"}}, 0, "custom\n"},
		{"NotOnHostPath", providers.Cmd{Argv: []string{"custom-tool"}}, 127, ""},
		{"RelativePathEntrySkipped", providers.Cmd{Argv: []string{"prog"}, Env: map[string]string{"PATH": ".:/usr/bin:/bin"}}, 127, ""},
		{"DotSlash", providers.Cmd{Argv: []string{"./prog"}}, 0, "prog\n"},
		{"DotSlashInDir", providers.Cmd{Argv: []string{"./subprog"}, Dir: "sub"}, 0, "sub\n"},
		{"NotExecutable", providers.Cmd{Argv: []string{"./noexec"}}, 126, ""},
		{"Directory", providers.Cmd{Argv: []string{"./sub"}}, 126, ""},
		{"Signal", providers.Shell("kill -TERM $$"), 128 + int(syscall.SIGTERM), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sb, tc.cmd)
			if res.ExitCode != tc.wantCode || string(res.Stdout) != tc.wantStdout {
				t.Errorf("Exec(%q) = exit %d stdout %q (stderr %q), want exit %d stdout %q", tc.cmd.Argv, res.ExitCode, res.Stdout, res.Stderr, tc.wantCode, tc.wantStdout)
			}
		})
	}
}

func TestExecBadInput(t *testing.T) {
	t.Parallel()
	sb := create(t, local.New(local.Options{}), providers.Spec{ProjectDir: t.TempDir()})
	for _, tc := range []struct {
		name   string
		cmd    providers.Cmd
		wantIs error
		want   string
	}{
		{"MissingDir", providers.Cmd{Argv: []string{"true"}, Dir: "nope"}, fs.ErrNotExist, "working directory"},
		{"NegativeTimeout", providers.Cmd{Argv: []string{"true"}, Timeout: -time.Second}, nil, "negative Cmd.Timeout"},
		{"BadEnv", providers.Cmd{Argv: []string{"true"}, Env: map[string]string{"": "x"}}, nil, "invalid variable name"},
		{"EmptyProgram", providers.Cmd{Argv: []string{""}}, nil, "empty command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sb.Exec(t.Context(), tc.cmd)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
				t.Errorf("Exec(%+v) error = %v, want one containing %q", tc.cmd, err, tc.want)
			}
		})
	}
}

// processGone reports whether pid has exited (a zombie counts as gone).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	f := bytes.Fields(b[i+1:])
	return len(f) > 0 && (string(f[0]) == "Z" || string(f[0]) == "X")
}

func TestBackgroundProcessesKilledAtClose(t *testing.T) {
	t.Parallel()
	p := local.New(local.Options{})
	sb, err := p.Create(t.Context(), providers.Spec{ProjectDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, providers.Shell("sleep 60 >/dev/null 2>&1 & echo $!"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("background pid %q: %v", res.Stdout, err)
	}
	if processGone(pid) {
		t.Fatalf("background process %d is not running after Exec returned", pid)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !processGone(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL) // best effort before failing: leave no stray process
		t.Fatalf("background process %d survived Close", pid)
	}
	for deadline := time.Now().Add(10 * time.Second); len(p.Alive()) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if ids := p.Alive(); len(ids) > 0 {
		t.Errorf("Alive() after Close = %v, want none", ids)
	}
}

func TestBackgroundHoldingOutput(t *testing.T) {
	t.Parallel()
	sb := create(t, local.New(local.Options{WaitDelay: 200 * time.Millisecond}), providers.Spec{ProjectDir: t.TempDir()})
	// The background sleep keeps stdout open; Exec returns after WaitDelay with the
	// foreground result instead of waiting for the sleep.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, providers.Shell("sleep 20 & echo started"))
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "started\n" {
		t.Errorf("Exec(sleep 20 & echo started) = %q exit %d err %v, want %q exit 0 nil", res.Stdout, res.ExitCode, err, "started\n")
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("reader went away")
}

func TestFailingStreamWriter(t *testing.T) {
	t.Parallel()
	sb := create(t, local.New(local.Options{}), providers.Spec{ProjectDir: t.TempDir()})
	w := &failingWriter{}
	cmd := providers.Shell("echo one; echo two")
	cmd.Stdout = w
	res := run(t, sb, cmd)
	if string(res.Stdout) != "one\ntwo\n" || res.ExitCode != 0 {
		t.Errorf("Exec with a failing Cmd.Stdout = %q exit %d, want the full capture and exit 0", res.Stdout, res.ExitCode)
	}
	if w.n == 0 {
		t.Error("the failing writer was never called")
	}
}

func TestParentDeadlineIsAnError(t *testing.T) {
	t.Parallel()
	sb := create(t, local.New(local.Options{}), providers.Spec{ProjectDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	res, err := sb.Exec(ctx, providers.Cmd{Argv: []string{"sleep", "30"}, Timeout: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) || res.TimedOut {
		t.Errorf("Exec past the ctx deadline = TimedOut %v, err %v; want TimedOut false and DeadlineExceeded (Cmd.Timeout is the result, ctx is an error)", res.TimedOut, err)
	}
}
