package contract

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
)

func testProvisionClose(t T, s *suite) {
	sb := s.create(t)
	if res := exec(t, sb, providers.Cmd{Argv: []string{"true"}}); res.ExitCode != 0 {
		t.Fatalf("Exec(true) exit code = %d, want 0; stderr: %s", res.ExitCode, res.Stderr)
	}
	if ids, ok := s.h.Alive(t.Context()); ok && !slices.Contains(ids, sb.ID()) {
		t.Errorf("Alive = %v, want it to hold the open sandbox %s (else NoLeaks proves nothing)", ids, sb.ID())
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	s.assertGone(t.Context(), t, sb.ID())
}

func testCloseTwice(t T, s *suite) {
	sb := s.create(t)
	for i := 1; i <= 2; i++ {
		if err := sb.Close(t.Context()); err != nil {
			t.Fatalf("Close() call %d = %v, want nil", i, err)
		}
	}
}

func testCreateCancelled(t T, s *suite) {
	before, ok := s.h.Alive(t.Context())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sb, err := s.p.Create(ctx, s.spec(t))
	if err == nil {
		_ = sb.Close(context.Background())
		t.Fatal("Create(cancelled ctx) error = nil, want one wrapping context.Canceled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Create(cancelled ctx) error = %v, want one wrapping context.Canceled", err)
	}
	if !ok {
		return
	}
	after, _ := s.h.Alive(t.Context())
	if added := difference(after, before); len(added) > 0 {
		t.Errorf("Create(cancelled ctx) left sandboxes alive: %v", added)
	}
}

func testExecEcho(t T, s *suite) {
	sb := s.create(t)
	// Arguments must reach the program verbatim, even through providers whose API runs a
	// shell string.
	args := []string{"hello", "two  spaces", "$HOME", "a;b", "'single'", `"double"`, `back\slash`, "*", ""}
	res := exec(t, sb, providers.Cmd{Argv: append([]string{"printf", "[%s]\n"}, args...)})
	var want strings.Builder
	for _, a := range args {
		fmt.Fprintf(&want, "[%s]\n", a)
	}
	if !bytes.Equal(res.Stdout, []byte(want.String())) || len(res.Stderr) != 0 || res.ExitCode != 0 || res.TimedOut || res.Truncated {
		t.Errorf("Exec(printf %q) = stdout %q, stderr %q, exit %d, timed out %v, truncated %v; want stdout %q, nothing else",
			args, res.Stdout, res.Stderr, res.ExitCode, res.TimedOut, res.Truncated, want.String())
	}
	if res.Duration <= 0 {
		t.Errorf("Exec(printf) Duration = %v, want > 0", res.Duration)
	}

	res = exec(t, sb, providers.Cmd{Argv: []string{"echo", "hello", "world"}})
	if got, want := string(res.Stdout), "hello world\n"; got != want || res.ExitCode != 0 {
		t.Errorf("Exec(echo hello world) = %q exit %d, want %q exit 0", got, res.ExitCode, want)
	}
}

func testExecEmptyArgv(t T, s *suite) {
	sb := s.create(t)
	for _, argv := range [][]string{nil, {}} {
		ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
		_, err := sb.Exec(ctx, providers.Cmd{Argv: argv})
		cancel()
		if err == nil {
			t.Errorf("Exec(Argv %#v) error = nil, want an error", argv)
		}
	}
}

func testStdoutStderrApart(t T, s *suite) {
	sb := s.create(t)
	var outStream, errStream syncBuffer
	cmd := providers.Shell("echo out1; echo err1 >&2; echo out2; echo err2 >&2")
	cmd.Stdout, cmd.Stderr = &outStream, &errStream
	res := exec(t, sb, cmd)
	want := map[string]string{"stdout": "out1\nout2\n", "stderr": "err1\nerr2\n", "streamed stdout": "out1\nout2\n", "streamed stderr": "err1\nerr2\n"}
	got := map[string]string{"stdout": string(res.Stdout), "stderr": string(res.Stderr), "streamed stdout": outStream.String(), "streamed stderr": errStream.String()}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("Exec(%q) %s = %q, want %q", cmd.Argv, k, got[k], want[k])
		}
	}
}

func testExecNonZeroExit(t T, s *suite) {
	sb := s.create(t)
	for _, code := range []int{1, 2, 42, 255} {
		t.Run(fmt.Sprint(code), func(t T) {
			script := fmt.Sprintf("echo failing >&2; exit %d", code)
			res := exec(t, sb, providers.Shell(script))
			if res.ExitCode != code || res.TimedOut || string(res.Stderr) != "failing\n" {
				t.Errorf("Exec(%q) = exit %d, timedOut %v, stderr %q; want exit %d, false, %q",
					script, res.ExitCode, res.TimedOut, res.Stderr, code, "failing\n")
			}
		})
	}
}

func testExecEnvAndDir(t T, s *suite) {
	spec := s.spec(t)
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["PROVIDERTEST_SPEC"] = "from spec"
	env["PROVIDERTEST_OVERRIDE"] = "spec"
	spec.Env = env
	sb := s.createSpec(t.Context(), t, spec)

	const script = `printf '%s|%s|%s' "$PROVIDERTEST_SPEC" "$PROVIDERTEST_CMD" "$PROVIDERTEST_OVERRIDE"`
	tricky := `a "quoted" 'value' with $dollar, \backslash and spaces`
	t.Run("CmdEnv", func(t T) {
		cmd := providers.Shell(script)
		cmd.Env = map[string]string{"PROVIDERTEST_CMD": tricky, "PROVIDERTEST_OVERRIDE": "cmd"}
		res := exec(t, sb, cmd)
		if got, want := string(res.Stdout), "from spec|"+tricky+"|cmd"; got != want {
			t.Errorf("Exec with Cmd.Env: stdout = %q, want %q", got, want)
		}
	})
	t.Run("CmdEnvIsPerCommand", func(t T) {
		res := exec(t, sb, providers.Shell(script))
		if got, want := string(res.Stdout), "from spec||spec"; got != want {
			t.Errorf("Exec without Cmd.Env: stdout = %q, want %q", got, want)
		}
	})

	// The physical working directory, resolved by the sandbox's own shell, so that a
	// WorkDir below a symlink compares equal.
	wd := sb.WorkDir()
	physical := strings.TrimSpace(string(exec(t, sb, providers.Cmd{Argv: []string{"sh", "-c", `cd "$1" && pwd -P`, "sh", wd}}).Stdout))
	if physical == "" {
		t.Fatalf("cannot resolve WorkDir %q in the sandbox", wd)
	}
	sh(t, sb, "mkdir -p sub/dir")
	for _, tc := range []struct{ name, dir, want string }{
		{"Empty", "", physical},
		{"Relative", "sub/dir", physical + "/sub/dir"},
		{"DotRelative", "./sub", physical + "/sub"},
		{"Absolute", path.Join(wd, "sub"), physical + "/sub"},
	} {
		t.Run("Dir"+tc.name, func(t T) {
			cmd := providers.Shell("pwd -P")
			cmd.Dir = tc.dir
			res := exec(t, sb, cmd)
			if got := strings.TrimSpace(string(res.Stdout)); got != tc.want || res.ExitCode != 0 {
				t.Errorf("Exec(pwd -P) with Dir %q = %q exit %d, want %q exit 0; stderr: %s", tc.dir, got, res.ExitCode, tc.want, res.Stderr)
			}
		})
	}
}

func testExecStdin(t T, s *suite) {
	sb := s.create(t)
	t.Run("Binary", func(t T) {
		payload := make([]byte, 0, 256*512)
		for i := range cap(payload) {
			payload = append(payload, byte(i))
		}
		cmd := providers.Cmd{Argv: []string{"cat"}, Stdin: bytes.NewReader(payload)}
		res := exec(t, sb, cmd)
		if !bytes.Equal(res.Stdout, payload) || res.ExitCode != 0 {
			t.Errorf("Exec(cat) with %d bytes of stdin: got %d bytes exit %d, want them back exit 0", len(payload), len(res.Stdout), res.ExitCode)
		}
	})
	t.Run("Nil", func(t T) {
		// A nil Stdin is empty: cat must see EOF at once, not wait for input.
		res := exec(t, sb, providers.Cmd{Argv: []string{"cat"}})
		if len(res.Stdout) != 0 || res.ExitCode != 0 {
			t.Errorf("Exec(cat) with nil stdin = %q exit %d, want empty exit 0", res.Stdout, res.ExitCode)
		}
	})
}

func testExecConcurrent(t T, s *suite) {
	sb := s.create(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]string, n)
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
			defer cancel()
			res, err := sb.Exec(ctx, providers.Cmd{Argv: []string{"sh", "-c", `echo "out $1"; echo "err $1" >&2; exit "$1"`, "sh", fmt.Sprint(i)}})
			switch {
			case err != nil:
				errs[i] = err.Error()
			case string(res.Stdout) != fmt.Sprintf("out %d\n", i) || string(res.Stderr) != fmt.Sprintf("err %d\n", i) || res.ExitCode != i:
				errs[i] = fmt.Sprintf("stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
			}
		})
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("concurrent Exec %d: %s", i, e)
		}
	}
}

// heartbeat starts a background child that appends to file once a second for at most a
// minute, then runs sleep 30 in the foreground. The file stops growing only if the whole
// process tree was killed.
func heartbeat(file string) string {
	return fmt.Sprintf(`(i=0; while [ $i -lt 60 ]; do echo $i >> %s; i=$((i+1)); sleep 1; done) & sleep 30`, file)
}

// waitForFile waits until Download of p returns something.
func waitForFile(t T, sb providers.Sandbox, p string) {
	t.Helper()
	deadline := time.Now().Add(promptly)
	for time.Now().Before(deadline) {
		if n, err := fileSize(t.Context(), sb, p); err == nil && n > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the background command did not write %s within %v", p, promptly)
}

func fileSize(ctx context.Context, sb providers.Sandbox, p string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rc, err := sb.Download(ctx, p)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return len(b), err
}

// assertTreeDead fails if the heartbeat file keeps growing.
func assertTreeDead(t T, sb providers.Sandbox, file string) {
	t.Helper()
	n1, err := fileSize(t.Context(), sb, file)
	if err != nil {
		t.Fatalf("Download(%s): %v", file, err)
	}
	time.Sleep(2500 * time.Millisecond)
	n2, err := fileSize(t.Context(), sb, file)
	if err != nil {
		t.Fatalf("Download(%s): %v", file, err)
	}
	if n2 != n1 {
		t.Errorf("heartbeat file %s grew from %d to %d bytes: a process of the command survived", file, n1, n2)
	}
}

func testExecCancel(t T, s *suite) {
	sb := s.create(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := startExec(ctx, sb, providers.Shell(heartbeat("beat-cancel")))
	waitForFile(t, sb, "beat-cancel")
	start := time.Now()
	cancel()
	o := await(t, ch, promptly, "after cancel")
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("Exec(sleep 30) after cancel: err = %v (exit %d), want one wrapping context.Canceled", o.err, o.res.ExitCode)
	}
	t.Logf("Exec returned %v after cancel", time.Since(start).Round(time.Millisecond))
	assertTreeDead(t, sb, "beat-cancel")
	// The sandbox survives a cancelled command.
	if got := sh(t, sb, "echo still here"); got != "still here\n" {
		t.Errorf("Exec after a cancelled Exec = %q, want %q", got, "still here\n")
	}
}

func testExecTimeout(t T, s *suite) {
	sb := s.create(t)
	t.Run("Expires", func(t T) {
		cmd := providers.Shell(heartbeat("beat-timeout"))
		cmd.Timeout = 2 * time.Second
		start := time.Now()
		res := exec(t, sb, cmd)
		took := time.Since(start)
		if !res.TimedOut || res.ExitCode != 124 {
			t.Errorf("Exec(sleep 30) with Timeout %v = exit %d, TimedOut %v; want exit 124, TimedOut true", cmd.Timeout, res.ExitCode, res.TimedOut)
		}
		if took > cmd.Timeout+promptly {
			t.Errorf("Exec(sleep 30) with Timeout %v took %v", cmd.Timeout, took)
		}
		assertTreeDead(t, sb, "beat-timeout")
	})
	t.Run("NotReached", func(t T) {
		cmd := providers.Shell("echo quick")
		cmd.Timeout = time.Minute
		res := exec(t, sb, cmd)
		if res.TimedOut || res.ExitCode != 0 || string(res.Stdout) != "quick\n" {
			t.Errorf("Exec(echo quick) with Timeout 1m = %q exit %d TimedOut %v, want %q exit 0 TimedOut false", res.Stdout, res.ExitCode, res.TimedOut, "quick\n")
		}
	})
}

func testOutputLimit(t T, s *suite) {
	sb := s.create(t)
	const limit = 4096
	const lines = 5000
	var full strings.Builder
	for i := range lines {
		fmt.Fprintf(&full, "line %d\n", i)
	}
	var streamed syncBuffer
	cmd := providers.Shell(fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; i=$((i+1)); done; echo small >&2`, lines))
	cmd.OutputLimit = limit
	cmd.Stdout = &streamed
	res := exec(t, sb, cmd)
	if !res.Truncated {
		t.Errorf("Exec printing %d bytes with OutputLimit %d: Truncated = false, want true", full.Len(), limit)
	}
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "line 0\nline 1\n") || !strings.HasSuffix(out, fmt.Sprintf("line %d\n", lines-1)) {
		t.Errorf("truncated stdout does not keep head and tail: starts %q, ends %q", head(out), tail(out))
	}
	if len(out) > limit+256 {
		t.Errorf("truncated stdout is %d bytes, want at most the limit %d plus a short marker", len(out), limit)
	}
	if got := string(res.Stderr); got != "small\n" {
		t.Errorf("stderr under the limit = %q, want %q (each stream is capped on its own)", got, "small\n")
	}
	if streamed.String() != full.String() {
		t.Errorf("Cmd.Stdout received %d bytes, want the whole %d-byte output", len(streamed.String()), full.Len())
	}

	small := providers.Shell("echo short")
	small.OutputLimit = limit
	if res := exec(t, sb, small); res.Truncated || string(res.Stdout) != "short\n" {
		t.Errorf("Exec(echo short) with OutputLimit %d = %q Truncated %v, want %q false", limit, res.Stdout, res.Truncated, "short\n")
	}
}

func head(s string) string { return s[:min(len(s), 40)] }
func tail(s string) string { return s[max(0, len(s)-40):] }

func testExecNotFound(t T, s *suite) {
	sb := s.create(t)
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"OnPath", []string{"providertest-no-such-program", "arg"}},
		{"AbsolutePath", []string{"/nonexistent/providertest/program"}},
		{"InShell", []string{"sh", "-c", "providertest-no-such-program"}},
	} {
		t.Run(tc.name, func(t T) {
			ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
			defer cancel()
			res, err := sb.Exec(ctx, providers.Cmd{Argv: tc.argv})
			if err != nil || res.ExitCode != 127 {
				t.Errorf("Exec(%q) = exit %d, err %v; want exit 127, err nil", tc.argv, res.ExitCode, err)
			}
		})
	}
}

func testUploadDownload(t T, s *suite) {
	sb := s.create(t)
	binary := make([]byte, 256*16)
	for i := range binary {
		binary[i] = byte(i)
	}
	big := make([]byte, 20<<20)
	rng := rand.NewChaCha8([32]byte{'p', 'r', 'o', 'v', 'i', 'd', 'e', 'r'})
	_, _ = rng.Read(big)
	files := map[string][]byte{
		"binary.dat":         binary,
		"empty":              {},
		"big.bin":            big,
		"a/b/c/deep.txt":     []byte("deep\n"),
		"run.sh":             []byte("#!/bin/sh\necho ran\n"),
		"plain.txt":          []byte("plain\n"),
		"with space/ü n.txt": []byte("unicode\n"),
	}
	tgz, err := archive.TarGz(
		archive.Entry{Name: "a", Mode: fs.ModeDir | 0o755},
		archive.Entry{Name: "a/b", Mode: fs.ModeDir | 0o755},
		archive.Entry{Name: "a/b/c", Mode: fs.ModeDir | 0o755},
		archive.Entry{Name: "a/b/c/deep.txt", Body: files["a/b/c/deep.txt"]},
		archive.Entry{Name: "binary.dat", Body: binary},
		archive.Entry{Name: "empty", Body: files["empty"]},
		archive.Entry{Name: "big.bin", Body: big},
		archive.Entry{Name: "run.sh", Mode: 0o755, Body: files["run.sh"]},
		archive.Entry{Name: "plain.txt", Mode: 0o644, Body: files["plain.txt"]},
		archive.Entry{Name: "with space/ü n.txt", Body: files["with space/ü n.txt"]},
	)
	if err != nil {
		t.Fatalf("build archive: %v", err)
	}
	upload(t, sb, "up", tgz)

	for name, want := range files {
		got := download(t, sb, path.Join("up", name))
		if sha256.Sum256(got) != sha256.Sum256(want) {
			t.Errorf("Download(up/%s) = %d bytes, want the %d uploaded bytes", name, len(got), len(want))
		}
	}
	abs := path.Join(sb.WorkDir(), "up/a/b/c/deep.txt")
	if got := string(download(t, sb, abs)); got != "deep\n" {
		t.Errorf("Download(%q) = %q, want %q", abs, got, "deep\n")
	}
	if got := sh(t, sb, "cat up/a/b/c/deep.txt 'up/with space/ü n.txt'"); got != "deep\nunicode\n" {
		t.Errorf("uploaded files seen by Exec = %q, want %q", got, "deep\nunicode\n")
	}
	if got := sh(t, sb, "test -x up/run.sh && ./up/run.sh"); got != "ran\n" {
		t.Errorf("executable upload: ./up/run.sh = %q, want %q", got, "ran\n")
	}
	if res := exec(t, sb, providers.Shell("test -x up/plain.txt")); res.ExitCode == 0 {
		t.Errorf("test -x up/plain.txt = 0, want non-zero (mode 0644 must not become executable)")
	}

	t.Run("IntoWorkDir", func(t T) {
		tgz, err := archive.TarGz(archive.Entry{Name: "top.txt", Body: []byte("top\n")})
		if err != nil {
			t.Fatal(err)
		}
		upload(t, sb, "", tgz)
		if got := sh(t, sb, "cat top.txt"); got != "top\n" {
			t.Errorf("Upload(\"\") then cat top.txt = %q, want %q", got, "top\n")
		}
	})
	t.Run("AbsoluteDir", func(t T) {
		tgz, err := archive.TarGz(archive.Entry{Name: "x.txt", Body: []byte("x\n")})
		if err != nil {
			t.Fatal(err)
		}
		dir := path.Join(sb.WorkDir(), "absdir")
		upload(t, sb, dir, tgz)
		if got := string(download(t, sb, "absdir/x.txt")); got != "x\n" {
			t.Errorf("Upload(%q) then Download(absdir/x.txt) = %q, want %q", dir, got, "x\n")
		}
	})
	t.Run("Overwrite", func(t T) {
		for _, body := range []string{"first version, longer\n", "second\n"} {
			tgz, err := archive.TarGz(archive.Entry{Name: "over.txt", Body: []byte(body)})
			if err != nil {
				t.Fatal(err)
			}
			upload(t, sb, "up", tgz)
			if got := string(download(t, sb, "up/over.txt")); got != body {
				t.Errorf("Download after uploading %q = %q", body, got)
			}
		}
	})
}

func testDownloadMissing(t T, s *suite) {
	sb := s.create(t)
	for _, p := range []string{"providertest-missing", "missing-dir/file"} {
		ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
		rc, err := sb.Download(ctx, p)
		cancel()
		if err == nil {
			rc.Close()
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Download(%q) error = %v, want one wrapping fs.ErrNotExist", p, err)
		}
	}
}

func closed(t T, s *suite) providers.Sandbox {
	t.Helper()
	sb := s.create(t)
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	return sb
}

func testExecAfterClose(t T, s *suite) {
	sb := closed(t, s)
	_, err := sb.Exec(t.Context(), providers.Shell("echo hi"))
	if !errors.Is(err, providers.ErrClosed) {
		t.Errorf("Exec after Close error = %v, want one wrapping providers.ErrClosed", err)
	}
}

func testUploadAfterClose(t T, s *suite) {
	sb := closed(t, s)
	tgz, err := archive.TarGz(archive.Entry{Name: "f", Body: []byte("f")})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Upload(t.Context(), "", bytes.NewReader(tgz)); !errors.Is(err, providers.ErrClosed) {
		t.Errorf("Upload after Close error = %v, want one wrapping providers.ErrClosed", err)
	}
}

func testDownloadAfterClose(t T, s *suite) {
	sb := closed(t, s)
	rc, err := sb.Download(t.Context(), "f")
	if err == nil {
		rc.Close()
	}
	if !errors.Is(err, providers.ErrClosed) {
		t.Errorf("Download after Close error = %v, want one wrapping providers.ErrClosed", err)
	}
}

func testCloseKillsExec(t T, s *suite) {
	sb := s.create(t)
	ch := startExec(t.Context(), sb, providers.Shell("sleep 30"))
	// Give the command time to start; Close must kill it either way.
	time.Sleep(500 * time.Millisecond)
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close() with a running command = %v, want nil", err)
	}
	o := await(t, ch, promptly, "after Close")
	if o.err == nil && o.res.ExitCode == 0 {
		t.Errorf("Exec(sleep 30) interrupted by Close = exit 0, err nil; want an error or a non-zero exit")
	}
}

func testCloseAfterParentCancel(t T, s *suite) {
	runCtx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sb := s.createSpec(runCtx, t, s.spec(t))
	ch := startExec(runCtx, sb, providers.Shell("sleep 30"))
	time.Sleep(500 * time.Millisecond)
	cancel()
	await(t, ch, promptly, "after cancelling the run context")
	ctx, stop := context.WithTimeout(context.WithoutCancel(runCtx), closeTimeout)
	defer stop()
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close(fresh ctx) after the run context was cancelled = %v, want nil", err)
	}
	s.assertGone(ctx, t, sb.ID())
}

func testAttachNeverDeletes(t T, s *suite) {
	sb := s.create(t)
	sh(t, sb, "echo original > attach.txt")
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	att, err := s.p.Attach(ctx, sb.ID(), providers.AttachOptions{})
	if errors.Is(err, providers.ErrNotSupported) {
		t.Skipf("Attach: %v (accepted: the provider has no attach)", err)
	}
	if err != nil {
		t.Fatalf("Attach(%s) error: %v", sb.ID(), err)
	}
	if att.ID() != sb.ID() || att.WorkDir() != sb.WorkDir() {
		t.Errorf("attached sandbox = ID %q WorkDir %q, want %q %q", att.ID(), att.WorkDir(), sb.ID(), sb.WorkDir())
	}
	if got := sh(t, att, "cat attach.txt"); got != "original\n" {
		t.Errorf("attached sandbox: cat attach.txt = %q, want %q", got, "original\n")
	}
	if err := att.Close(ctx); err != nil {
		t.Fatalf("Close() of the attached sandbox = %v, want nil", err)
	}
	if ids, ok := s.h.Alive(ctx); ok && !slices.Contains(ids, sb.ID()) {
		t.Errorf("closing an attached sandbox deleted it: Alive = %v lacks %s", ids, sb.ID())
	}
	if got := sh(t, sb, "cat attach.txt"); got != "original\n" {
		t.Errorf("original sandbox after the attached one closed: cat attach.txt = %q, want %q", got, "original\n")
	}
}

func testAttachUnknown(t T, s *suite) {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	att, err := s.p.Attach(ctx, "providertest-unknown-"+randomHex(t, 4), providers.AttachOptions{})
	if err == nil {
		_ = att.Close(ctx)
	}
	if !errors.Is(err, providers.ErrNotFound) && !errors.Is(err, providers.ErrNotSupported) {
		t.Errorf("Attach(unknown id) error = %v, want one wrapping providers.ErrNotFound (or ErrNotSupported)", err)
	}
}

func testNoLeaks(t T, s *suite) {
	before, ok := s.h.Alive(t.Context())
	if !ok {
		t.Skip("the harness cannot list live sandboxes")
	}
	var sbs []providers.Sandbox
	for range 3 {
		sbs = append(sbs, s.create(t))
	}
	alive, _ := s.h.Alive(t.Context())
	for _, sb := range sbs {
		if !slices.Contains(alive, sb.ID()) {
			t.Errorf("Alive = %v lacks the open sandbox %s", alive, sb.ID())
		}
	}
	// Leave each in a different state: idle, after a cancelled command, with a command
	// running at Close.
	ctx, cancel := context.WithCancel(t.Context())
	ch := startExec(ctx, sbs[1], providers.Shell("sleep 30"))
	time.Sleep(300 * time.Millisecond)
	cancel()
	await(t, ch, promptly, "after cancel")
	running := startExec(t.Context(), sbs[2], providers.Shell("sleep 30"))
	time.Sleep(300 * time.Millisecond)
	for _, sb := range sbs {
		if err := sb.Close(t.Context()); err != nil {
			t.Errorf("Close(%s) = %v, want nil", sb.ID(), err)
		}
	}
	await(t, running, promptly, "after Close")
	after, _ := s.h.Alive(t.Context())
	if leaked := difference(after, before); len(leaked) > 0 {
		t.Errorf("sandboxes alive after Close: %v", leaked)
	}
}

// difference returns the elements of a not in b.
func difference(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
