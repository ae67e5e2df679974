package bwrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
)

// requireBwrap skips when bubblewrap cannot run here, except under CI=true where the
// engine is installed on purpose and a skip would hide a broken setup.
func requireBwrap(t *testing.T) {
	t.Helper()
	p := New(Options{StateDir: t.TempDir()})
	_, err := p.ensureUsable(t.Context(), resolved{})
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("bubblewrap is required in CI (.ci/docker.sh start installs it): %v", err)
	}
	t.Skipf("bubblewrap cannot run here: %v", err)
}

// requireBusybox returns the host's static busybox (for nc, and to build a rootfs).
func requireBusybox(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("busybox is required in CI: apt-get install -y busybox-static")
	}
	t.Skip("busybox not installed (apt-get install -y busybox-static)")
	return ""
}

func newSandbox(t *testing.T, opts Options, spec providers.Spec) *Sandbox {
	t.Helper()
	requireBwrap(t)
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	if spec.RunID == "" {
		spec.RunID = t.Name()
	}
	sb, err := New(opts).Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb.(*Sandbox)
}

func run(t *testing.T, sb providers.Sandbox, script string) providers.ExecResult {
	t.Helper()
	res, err := sb.Exec(t.Context(), providers.Shell(script))
	if err != nil {
		t.Fatalf("Exec(%q): %v", script, err)
	}
	return res
}

func TestExec(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{}, providers.Spec{Env: map[string]string{"FROM_SPEC": "spec"}})
	tests := []struct {
		name       string
		cmd        providers.Cmd
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "echo", cmd: providers.Shell("echo hello"), wantStdout: "hello\n"},
		{name: "exit code is a result", cmd: providers.Shell("echo oops >&2; exit 3"), wantCode: 3, wantStderr: "oops\n"},
		{name: "argv not shell", cmd: providers.Cmd{Argv: []string{"printf", "%s|", "a b", "$HOME"}}, wantStdout: "a b|$HOME|"},
		{name: "env layers", cmd: providers.Cmd{Argv: []string{"sh", "-c", "echo $FROM_SPEC $FROM_CMD $HOME $USER"}, Env: map[string]string{"FROM_CMD": "cmd"}}, wantStdout: "spec cmd /home/sandbox sandbox\n"},
		// Unset as on most hosts: Go's test cache keys results on the variables a test reads.
		{name: "TMPDIR unset", cmd: providers.Shell(`echo "${TMPDIR-unset}"`), wantStdout: "unset\n"},
		{name: "stdin", cmd: providers.Cmd{Argv: []string{"cat"}, Stdin: strings.NewReader("fed\n")}, wantStdout: "fed\n"},
		{name: "default dir", cmd: providers.Shell("pwd"), wantStdout: "/workspace\n"},
		{name: "relative dir", cmd: providers.Cmd{Argv: []string{"pwd"}, Dir: "."}, wantStdout: "/workspace\n"},
		{name: "absolute dir", cmd: providers.Cmd{Argv: []string{"pwd"}, Dir: "/tmp"}, wantStdout: "/tmp\n"},
		{name: "identity", cmd: providers.Shell("id -u; id -g; hostname"), wantStdout: "1000\n1000\nsandbox\n"},
		{name: "no capabilities", cmd: providers.Shell("grep CapEff /proc/self/status"), wantStdout: "CapEff:\t0000000000000000\n"},
		{name: "command not found", cmd: providers.Cmd{Argv: []string{"no-such-command-talkops"}}, wantCode: 127, wantStderr: "bwrap: execvp no-such-command-talkops: No such file or directory\n"},
		{name: "killed by signal", cmd: providers.Shell("kill -9 $$"), wantCode: 137},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := sb.Exec(t.Context(), tt.cmd)
			if err != nil {
				t.Fatalf("Exec(%q) error: %v", tt.cmd.Argv, err)
			}
			got := []any{res.ExitCode, string(res.Stdout), string(res.Stderr)}
			want := []any{tt.wantCode, tt.wantStdout, tt.wantStderr}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Exec(%q) (-want +got):\n%s", tt.cmd.Argv, diff)
			}
		})
	}
}

func TestExecStreamsAndTruncates(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{}, providers.Spec{})
	var live bytes.Buffer
	res, err := sb.Exec(t.Context(), providers.Cmd{
		Argv:        []string{"sh", "-c", "i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done"},
		Stdout:      &live,
		OutputLimit: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Stdout) > 200 {
		t.Errorf("Truncated = %v, len(Stdout) = %d; want true and the output capped", res.Truncated, len(res.Stdout))
	}
	if !strings.HasPrefix(string(res.Stdout), "line0\n") || !strings.HasSuffix(string(res.Stdout), "line99\n") {
		t.Errorf("Stdout = %q, want head and tail kept", res.Stdout)
	}
	if n := strings.Count(live.String(), "\n"); n != 100 {
		t.Errorf("streamed %d lines, want all 100", n)
	}
}

func TestExecBadInput(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{}, providers.Spec{})
	tests := []struct {
		name string
		cmd  providers.Cmd
		want string
	}{
		{"empty argv", providers.Cmd{}, "empty argv"},
		{"bad env name", providers.Cmd{Argv: []string{"true"}, Env: map[string]string{"A=B": "x"}}, `environment variable name "A=B"`},
		{"missing dir", providers.Cmd{Argv: []string{"true"}, Dir: "/workspace/nope"}, "Can't chdir to /workspace/nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sb.Exec(t.Context(), tt.cmd)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Exec(%v) error = %v, want it to contain %q", tt.cmd.Argv, err, tt.want)
			}
		})
	}
}

func TestTimeoutKillsTree(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{}, providers.Spec{})
	marker := fmt.Sprintf("%d.%d", time.Now().UnixNano()%1000+1000, os.Getpid()%1000)
	start := time.Now()
	res, err := sb.Exec(t.Context(), providers.Cmd{
		Argv:    []string{"sh", "-c", "setsid sleep " + marker + " & sleep " + marker + "; echo never"},
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Exec returned after %s, want promptly after the 300ms timeout", el)
	}
	if !res.TimedOut || res.ExitCode != 124 {
		t.Errorf("TimedOut, ExitCode = %v, %d; want true, 124", res.TimedOut, res.ExitCode)
	}
	if !strings.Contains(string(res.Stderr), "timed out") {
		t.Errorf("Stderr = %q, want the timeout named", res.Stderr)
	}
	waitNoProcess(t, "sleep "+marker)
}

// waitNoProcess fails when a host process whose command line contains s is still alive
// after a short grace period.
func waitNoProcess(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		found := ""
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), s) {
				found = e.Name()
			}
		}
		if found == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s (%q) survived the sandbox command", found, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{}, providers.Spec{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := sb.Exec(ctx, providers.Shell("sleep 30"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Exec error = %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Exec returned after %s, want promptly after cancel", el)
	}
}

func TestCloseKillsRunningAndIsIdempotent(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	state := t.TempDir()
	sbx, err := New(Options{StateDir: state}).Create(t.Context(), providers.Spec{RunID: "close"})
	if err != nil {
		t.Fatal(err)
	}
	sb := sbx.(*Sandbox)
	errc := make(chan error, 1)
	go func() {
		_, err := sb.Exec(t.Context(), providers.Shell("sleep 30"))
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, providers.ErrClosed) {
			t.Errorf("running Exec error = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("running Exec did not return after Close")
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if _, err := sb.Exec(t.Context(), providers.Shell("true")); !errors.Is(err, providers.ErrClosed) {
		t.Errorf("Exec after Close = %v, want ErrClosed", err)
	}
	if _, err := os.Stat(sb.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("sandbox directory after Close: %v, want it removed", err)
	}
	if sb.cg != nil {
		for _, d := range []string{sb.cg.memDir, sb.cg.pidsDir} {
			if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("cgroup %s after Close: %v, want it removed", d, err)
			}
		}
	}
}

func TestUploadDownload(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{}, providers.Spec{})
	tgz, err := archive.TarGz(
		archive.Entry{Name: "a.txt", Body: []byte("alpha\n")},
		archive.Entry{Name: "sub/b.txt", Body: []byte("beta\n")},
		archive.Entry{Name: "escape", Mode: fs.ModeSymlink | 0o777, Linkname: "sub/b.txt"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Upload(t.Context(), ".", bytes.NewReader(tgz)); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if err := sb.Upload(t.Context(), "/tmp/deep/dir", bytes.NewReader(tgz)); err != nil {
		t.Fatalf("Upload to /tmp: %v", err)
	}
	res := run(t, sb, "cat a.txt sub/b.txt /tmp/deep/dir/a.txt; echo gamma > made.txt; ln -s /etc/passwd link; mkdir ro; chmod 555 ro")
	if got, want := string(res.Stdout), "alpha\nbeta\nalpha\n"; got != want {
		t.Errorf("cat uploaded files = %q, want %q", got, want)
	}
	for path, want := range map[string]string{"made.txt": "gamma\n", "/workspace/sub/b.txt": "beta\n", "/tmp/deep/dir/a.txt": "alpha\n"} {
		rc, err := sb.Download(t.Context(), path)
		if err != nil {
			t.Errorf("Download(%q): %v", path, err)
			continue
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != want {
			t.Errorf("Download(%q) = %q, want %q", path, b, want)
		}
	}
	for path, wantErr := range map[string]error{
		"missing.txt": fs.ErrNotExist,
		"link":        nil, // absolute symlink leaving the sandbox: refused
		"/etc/passwd": providers.ErrNotSupported,
		"../../x":     providers.ErrNotSupported,
	} {
		rc, err := sb.Download(t.Context(), path)
		if err == nil {
			rc.Close()
			t.Errorf("Download(%q) succeeded, want an error", path)
			continue
		}
		if wantErr != nil && !errors.Is(err, wantErr) {
			t.Errorf("Download(%q) = %v, want %v", path, err, wantErr)
		}
	}
}

// TestIsolation checks, from inside the sandbox, what the host keeps to itself.
func TestIsolation(t *testing.T) { // not parallel: t.Setenv plants the canary
	busybox := requireBusybox(t)
	requireBwrap(t)

	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("host-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "main.tf"), []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TALKOPS_TEST_CANARY", "canary-value-1234")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello-from-host")
			c.Close()
		}
	})
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	ncScript := fmt.Sprintf("%s nc -w 2 127.0.0.1 %d </dev/null", busybox, port)

	sb := newSandbox(t, Options{}, providers.Spec{})
	tgz := tarDir(t, project)
	if err := sb.Upload(t.Context(), ".", bytes.NewReader(tgz)); err != nil {
		t.Fatal(err)
	}

	t.Run("host file outside the workspace", func(t *testing.T) {
		res := run(t, sb, "cat "+secret)
		if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "host-secret") {
			t.Errorf("cat %s = %d %q, want a failure", secret, res.ExitCode, res.Stdout)
		}
		if !strings.Contains(string(res.Stderr), "No such file") {
			t.Errorf("stderr = %q, want No such file (the path does not exist in the sandbox)", res.Stderr)
		}
		res = run(t, sb, "ls / ; ls /etc")
		for _, hidden := range []string{"root\n", "shadow", "var\n", "opt\n"} {
			if strings.Contains(string(res.Stdout), hidden) {
				t.Errorf("ls / and /etc show %q:\n%s", hidden, res.Stdout)
			}
		}
	})
	t.Run("system directories are read-only", func(t *testing.T) {
		res := run(t, sb, "touch /usr/talkops-evil")
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Read-only") {
			t.Errorf("touch /usr = %d %q, want Read-only file system", res.ExitCode, res.Stderr)
		}
	})
	t.Run("host loopback server unreachable", func(t *testing.T) {
		res := run(t, sb, ncScript)
		if strings.Contains(string(res.Stdout), "hello-from-host") {
			t.Errorf("sandbox reached the host's 127.0.0.1:%d: %q", port, res.Stdout)
		}
		res = run(t, sb, "cat /proc/net/dev")
		if strings.Count(string(res.Stdout), ":") != 1 || !strings.Contains(string(res.Stdout), "lo:") {
			t.Errorf("/proc/net/dev = %q, want only lo", res.Stdout)
		}
	})
	t.Run("network option shares the host network", func(t *testing.T) {
		// The positive control: the same command reaches the server when asked to.
		netSB := newSandbox(t, Options{Network: true}, providers.Spec{})
		res := run(t, netSB, ncScript)
		if !strings.Contains(string(res.Stdout), "hello-from-host") {
			t.Errorf("with network = true, nc = %d %q %q, want the host's greeting", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("writes do not reach the host project", func(t *testing.T) {
		res := run(t, sb, "echo changed > main.tf; echo new > added.txt; cat main.tf")
		if string(res.Stdout) != "changed\n" {
			t.Fatalf("write in sandbox failed: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		b, err := os.ReadFile(filepath.Join(project, "main.tf"))
		if err != nil || string(b) != "original\n" {
			t.Errorf("host main.tf = %q, %v; want it unchanged", b, err)
		}
		if _, err := os.Stat(filepath.Join(project, "added.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("added.txt appeared in the host project: %v", err)
		}
	})
	t.Run("host environment not visible", func(t *testing.T) {
		res := run(t, sb, "env; cat /proc/1/environ")
		if strings.Contains(string(res.Stdout), "canary-value-1234") {
			t.Errorf("host env var visible in sandbox:\n%s", res.Stdout)
		}
	})
	t.Run("host processes not visible", func(t *testing.T) {
		res := run(t, sb, "ls /proc | grep -c '^[0-9]'")
		if n := strings.TrimSpace(string(res.Stdout)); n != "2" && n != "3" && n != "4" {
			t.Errorf("sandbox sees %s processes, want only its own (bwrap init, sh, ls)", n)
		}
	})
	t.Run("tmp is private and persists between commands", func(t *testing.T) {
		marker := filepath.Join(os.TempDir(), "talkops-bwrap-host-marker")
		if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(marker) })
		run(t, sb, "echo kept > /tmp/state")
		res := run(t, sb, "cat /tmp/state; ls /tmp")
		if strings.Contains(string(res.Stdout), "talkops-bwrap-host-marker") {
			t.Errorf("host /tmp visible in sandbox: %q", res.Stdout)
		}
		if !strings.HasPrefix(string(res.Stdout), "kept\n") {
			t.Errorf("/tmp/state = %q, want it kept between commands", res.Stdout)
		}
	})
}

// tarDir returns dir as a gzip-compressed tar of regular files.
func tarDir(t *testing.T, dir string) []byte {
	t.Helper()
	var entries []archive.Entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		entries = append(entries, archive.Entry{Name: rel, Body: b})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := archive.TarGz(entries...)
	if err != nil {
		t.Fatal(err)
	}
	return tgz
}

func TestLimits(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	env := detectCgroups()
	if _, err := createCgroupProbe(env); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("cgroups must be writable for root in CI: %v", err)
		}
		t.Skipf("no writable cgroup here (%v): memory and pids limits fall back to rlimits", err)
	}
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t, Options{Memory: "64m"}, providers.Spec{})
		if sb.Limits().Mechanism != LimitsCgroupV1 && sb.Limits().Mechanism != LimitsCgroupV2 {
			t.Fatalf("Limits = %v, want a cgroup", sb.Limits())
		}
		start := time.Now()
		res := run(t, sb, `x=$(head -c 300000000 /dev/zero | tr '\0' a); echo survived ${#x}`)
		if el := time.Since(start); el > 60*time.Second {
			t.Errorf("memory hog took %s", el)
		}
		if res.ExitCode != 137 || !strings.Contains(string(res.Stderr), "talkops: killed: memory limit (64 MiB) exceeded") {
			t.Errorf("memory hog = exit %d, stdout %q, stderr %q; want 137 and the cause", res.ExitCode, res.Stdout, res.Stderr)
		}
		res = run(t, sb, "echo still usable")
		if res.ExitCode != 0 {
			t.Errorf("after OOM: exit %d %q", res.ExitCode, res.Stderr)
		}
	})
	t.Run("pids", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t, Options{Pids: 16}, providers.Spec{})
		res := run(t, sb, `i=0; while [ $i -lt 40 ]; do sleep 2 & i=$((i+1)); done; wait`)
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "talkops: pids limit (16 processes/threads) reached") {
			t.Errorf("fork bomb = exit %d, stderr %q; want a failure naming the pids limit", res.ExitCode, res.Stderr)
		}
	})
	t.Run("cpu seconds", func(t *testing.T) {
		t.Parallel()
		sb := newSandbox(t, Options{CPUSeconds: 1}, providers.Spec{})
		res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"sh", "-c", "while :; do :; done"}, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 152 || !strings.Contains(string(res.Stderr), "talkops: killed: cpu time limit (1s) exceeded") {
			t.Errorf("busy loop = exit %d, timed out %v, stderr %q; want 152 and the cause", res.ExitCode, res.TimedOut, res.Stderr)
		}
	})
}

func TestRlimitFallback(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit not installed")
	}
	sb := newSandbox(t, Options{Limits: LimitsRlimit, Memory: "256m", CPUSeconds: 7}, providers.Spec{})
	if got := sb.Limits().Mechanism; got != LimitsRlimit {
		t.Fatalf("Mechanism = %q, want %q", got, LimitsRlimit)
	}
	res := run(t, sb, "ulimit -v; ulimit -t")
	if got, want := string(res.Stdout), "262144\n7\n"; got != want {
		t.Errorf("ulimit -v, -t = %q, want %q", got, want)
	}
}

// createCgroupProbe checks that a sandbox cgroup can be made here.
func createCgroupProbe(env cgroupEnv) (*cgroup, error) {
	cg, err := createCgroup(env, "talkops-probe-"+fmt.Sprint(os.Getpid()), 1<<30, 100)
	if err != nil {
		return nil, err
	}
	return cg, cg.remove()
}

func TestRootfs(t *testing.T) {
	t.Parallel()
	busybox := requireBusybox(t)
	root := busyboxRootfs(t, busybox)
	sb := newSandbox(t, Options{Rootfs: root}, providers.Spec{})
	res := run(t, sb, "ls /usr/bin | head -3; test -e /usr/bin/bash && echo host-bash; cat /etc/os-release 2>&1; echo ok > /workspace/f; cat /workspace/f; touch /bin/x 2>&1 || echo ro")
	out := string(res.Stdout)
	if strings.Contains(out, "host-bash") || strings.Contains(out, "Debian") {
		t.Errorf("rootfs sandbox sees host system files:\n%s", out)
	}
	if !strings.Contains(out, "ok\n") || !strings.Contains(out, "ro\n") {
		t.Errorf("rootfs sandbox: want a writable workspace and a read-only root, got:\n%s", out)
	}
}

// busyboxRootfs builds a minimal root file system from a static busybox.
func busyboxRootfs(t *testing.T, busybox string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"bin", "etc"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestListAttachDelete(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	state := t.TempDir()
	p := New(Options{StateDir: state})
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sbx, err := p.Create(t.Context(), providers.Spec{RunID: "Run 42/x", Labels: map[string]string{
		providers.LabelRunID: "Run 42/x", providers.LabelCreatedBy: "talkops", providers.LabelExpiresAt: exp.Format(time.RFC3339),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sbx.Close(context.WithoutCancel(t.Context())) })
	if !strings.HasPrefix(sbx.ID(), "talkops-run-42-x-") {
		t.Errorf("ID = %q, want talkops-run-42-x-<hex>", sbx.ID())
	}
	run(t, sbx, "echo attached > note")

	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 {
		t.Fatalf("List = %v, want one sandbox", infos)
	}
	got := infos[0]
	if got.ID != sbx.ID() || got.RunID != "Run 42/x" || got.State != "running" || !got.ExpiresAt.Equal(exp) || got.Labels[providers.LabelOwnerPID] != fmt.Sprint(os.Getpid()) {
		t.Errorf("List()[0] = %+v, want id %s, run id, state running, expiry %s, owner pid", got, sbx.ID(), exp)
	}

	att, err := p.Attach(t.Context(), sbx.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if res := run(t, att, "cat note"); string(res.Stdout) != "attached\n" {
		t.Errorf("attached sandbox sees %q, want the file written before", res.Stdout)
	}
	if err := att.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, sbx.ID())); err != nil {
		t.Errorf("closing an attached sandbox removed it: %v", err)
	}
	if _, err := p.Attach(t.Context(), "talkops-nope-0000abcd", providers.AttachOptions{}); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Attach(unknown) = %v, want ErrNotFound", err)
	}

	if err := p.Delete(t.Context(), sbx.ID()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := p.Delete(t.Context(), sbx.ID()); err != nil {
		t.Errorf("second Delete = %v, want nil", err)
	}
	if infos, _ := p.List(t.Context()); len(infos) != 0 {
		t.Errorf("List after Delete = %v, want none", infos)
	}
	if err := p.Delete(t.Context(), "../etc"); err == nil {
		t.Error("Delete(\"../etc\") succeeded, want a refusal")
	}
}

func TestCreateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       Options
		spec       providers.Spec
		want       string
		wantConfig bool
	}{
		{"missing bwrap", Options{Bwrap: "/nonexistent/bwrap"}, providers.Spec{}, "apt-get install -y bubblewrap", false},
		{"bad memory", Options{Memory: "lots"}, providers.Spec{}, `memory = "lots"`, true},
		{"bad limits", Options{Limits: "strict"}, providers.Spec{}, `limits = "strict"`, true},
		{"bad overlay", Options{Overlay: "on"}, providers.Spec{}, `overlay = "on": want "auto" or "off"`, true},
		{"relative rootfs", Options{Rootfs: "rootfs"}, providers.Spec{}, "rootfs", true},
		{"reserved work dir", Options{}, providers.Spec{WorkDir: "/usr/src"}, "inside /usr", true},
		{"bad env", Options{}, providers.Spec{Env: map[string]string{"": "x"}}, "environment variable name", true},
		{"missing rootfs", Options{Rootfs: "/nonexistent/rootfs"}, providers.Spec{}, "not a directory", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "missing rootfs" {
				requireBwrap(t)
			}
			tt.opts.StateDir = t.TempDir()
			_, err := New(tt.opts).Create(t.Context(), tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Create(%+v) = %v, want an error containing %q", tt.opts, err, tt.want)
			}
			if got := errors.Is(err, providers.ErrConfig); got != tt.wantConfig {
				t.Errorf("errors.Is(%v, ErrConfig) = %v, want %v", err, got, tt.wantConfig)
			}
			if ents, _ := os.ReadDir(tt.opts.StateDir); len(ents) != 0 {
				t.Errorf("failed Create left %d entries in the state dir", len(ents))
			}
		})
	}
}

// TestCreateExplainsNamespaceFailure: a host where bwrap cannot create namespaces fails
// Create with the host-level diagnosis (what to change), not only the probe's exit.
func TestCreateExplainsNamespaceFailure(t *testing.T) {
	t.Parallel()
	fake := filepath.Join(t.TempDir(), "bwrap")
	script := "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	_, err := New(Options{Bwrap: fake, StateDir: state}).Create(t.Context(), providers.Spec{})
	if err == nil || !strings.Contains(err.Error(), "cannot create a sandbox on this host") || !strings.Contains(err.Error(), "No permissions") {
		t.Errorf("Create with a bwrap that cannot make namespaces = %v, want the host diagnosis with bwrap's message", err)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("failed Create left %d entries in the state dir", len(ents))
	}
}

// goRoot is a host directory that has a bin subdirectory: the Go installation.
func goRoot() string { return filepath.Dir(filepath.Dir(runtimeGOROOTBin())) }

func runtimeGOROOTBin() string {
	p, err := exec.LookPath("go")
	if err != nil {
		return "/usr/bin/x"
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return p
	}
	return real
}

func TestOptionsResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want resolved
	}{
		{"defaults", Options{}, resolved{memory: 2 << 30, pids: DefaultPids, workDir: "/workspace", limits: LimitsAuto, path: DefaultPath, overlay: OverlayAuto}},
		{"explicit", Options{Memory: "512MiB", Pids: 10, CPUSeconds: 3, WorkingDir: "/src", Limits: LimitsRlimit, Network: true, Path: "/opt/bin:/usr/bin", Overlay: OverlayOff},
			resolved{network: true, memory: 512 << 20, memorySet: true, pids: 10, cpuSeconds: 3, workDir: "/src", limits: LimitsRlimit, path: "/opt/bin:/usr/bin", overlay: OverlayOff}},
		{"unlimited", Options{Memory: "0", Pids: -1}, resolved{workDir: "/workspace", limits: LimitsAuto, path: DefaultPath, overlay: OverlayAuto}},
		{"ro_binds put their bin directories on PATH", Options{ReadOnlyBinds: []string{goRoot(), "/nonexistent-talkops-bind"}},
			resolved{memory: 2 << 30, pids: DefaultPids, workDir: "/workspace", limits: LimitsAuto,
				roBinds: []string{goRoot(), "/nonexistent-talkops-bind"}, path: goRoot() + "/bin:" + DefaultPath, overlay: OverlayAuto}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(resolved{})); diff != "" {
				t.Errorf("resolve(%+v) (-want +got):\n%s", tt.opts, diff)
			}
		})
	}
}

func TestParseCgroupEnv(t *testing.T) {
	t.Parallel()
	v1Mounts := `35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
36 25 0:31 / /sys/fs/cgroup/pids rw,relatime shared:15 - cgroup cgroup rw,pids
30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`
	tests := []struct {
		name, mounts, self string
		want               cgroupEnv
	}{
		{"v1 nested", v1Mounts, "8:pids:/\n4:memory:/process_api/abc\n0::/\n",
			cgroupEnv{v1Memory: "/sys/fs/cgroup/memory/process_api/abc", v1Pids: "/sys/fs/cgroup/pids"}},
		{"v1 in container", "35 25 0:30 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n36 25 0:31 /docker/x /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
			"4:memory:/docker/x\n8:pids:/docker/x\n", cgroupEnv{v1Memory: "/sys/fs/cgroup/memory", v1Pids: "/sys/fs/cgroup/pids"}},
		{"v2", "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", "0::/user.slice/session-1.scope\n",
			cgroupEnv{v2: "/sys/fs/cgroup/user.slice/session-1.scope"}},
		{"none", "20 1 0:1 / / rw - ext4 /dev/sda rw\n", "0::/\n", cgroupEnv{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseCgroupEnv(tt.mounts, tt.self)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(cgroupEnv{})); diff != "" {
				t.Errorf("parseCgroupEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	for run, prefix := range map[string]string{
		"":                                      "talkops-run-",
		"GH 1234/attempt 2":                     "talkops-gh-1234-attempt-2-",
		"a-very-long-run-identifier-that-keeps": "talkops-a-very-long-run-identifi-",
		"ÄÖ!!":                                  "talkops-run-",
	} {
		id := newID(run)
		if !strings.HasPrefix(id, prefix) || !validID(id) {
			t.Errorf("newID(%q) = %q, want prefix %q and a valid id", run, id, prefix)
		}
	}
}
