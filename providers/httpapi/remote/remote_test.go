package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
)

// hostDriver runs scripts with the host's /bin/sh and, like the JSON APIs, turns output
// that is not UTF-8 into U+FFFD.
type hostDriver struct {
	// lastLines, when set, returns only the last lines of each stream, as Runloop does.
	lastLines int
	mu        sync.Mutex
	scripts   []string
	writes    []string
	deleted   int
	failDel   error
}

func (d *hostDriver) Run(ctx context.Context, r Run) (Result, error) {
	d.mu.Lock()
	d.scripts = append(d.scripts, r.Script)
	d.mu.Unlock()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", r.Script)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return Result{}, err
	}
	mangle := func(b []byte) []byte { return []byte(strings.ToValidUTF8(string(b), "\uFFFD")) }
	res := Result{Stdout: mangle(out.Bytes()), Stderr: mangle(errb.Bytes()), ExitCode: code}
	if d.lastLines > 0 {
		for _, b := range []*[]byte{&res.Stdout, &res.Stderr} {
			lines := strings.SplitAfter(string(*b), "\n")
			if len(lines) > d.lastLines+1 {
				*b = []byte(strings.Join(lines[len(lines)-d.lastLines-1:], ""))
				res.Truncated = true
			}
		}
	}
	return res, nil
}

func (d *hostDriver) WriteFile(_ context.Context, path string, body *httpapi.Body) error {
	d.mu.Lock()
	d.writes = append(d.writes, path)
	d.mu.Unlock()
	rc, err := body.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func (d *hostDriver) ReadFile(_ context.Context, path string) (io.ReadCloser, error) {
	return os.Open(path)
}

func (d *hostDriver) Delete(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failDel != nil {
		return d.failDel
	}
	d.deleted++
	return nil
}

func newSandbox(t *testing.T, mod func(*Config)) (*Sandbox, *hostDriver) {
	t.Helper()
	d := &hostDriver{}
	cfg := Config{Provider: "test", ID: "sb-1", WorkDir: t.TempDir(), Owned: true, TempDir: t.TempDir()}
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg, d), d
}

func TestQuoteRoundTrip(t *testing.T) {
	words := []string{"", "plain", "two words", "it's", `"dq"`, "$HOME", "`id`", "a\nb", "tab\t", "back\\slash", "*?[x]", "ü€", "-n", "'''"}
	script := "printf '[%s]' " + strings.Join(func() []string {
		var q []string
		for _, w := range words {
			q = append(q, Quote(w))
		}
		return q
	}(), " ")
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, w := range words {
		want.WriteString("[" + w + "]")
	}
	if got := string(out); got != want.String() {
		t.Errorf("sh saw %q, want %q", got, want.String())
	}
}

func TestPrintfFormatRoundTrip(t *testing.T) {
	var all []byte
	for i := range 256 {
		all = append(all, byte(i))
	}
	all = append(all, []byte("100% \\n not a newline\n")...)
	out, err := exec.Command("/bin/sh", "-c", "printf "+Quote(printfFormat(all))).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, all) {
		t.Errorf("printf printed %q, want %q", out, all)
	}
}

func TestSplitOutput(t *testing.T) {
	for _, tc := range []struct{ in, out, err string }{
		{"hello\n\n--m--\nerr\n", "hello\n", "err\n"},
		{"no newline\n--m--\n", "no newline", ""},
		{"\n--m--\n", "", ""},
		{"fake \n--m--\n in stdout\n\n--m--\nreal\n", "fake \n--m--\n in stdout\n", "real\n"},
		{"killed before the marker", "killed before the marker", ""},
	} {
		o, e := splitOutput([]byte(tc.in), "--m--")
		if string(o) != tc.out || string(e) != tc.err {
			t.Errorf("splitOutput(%q) = %q, %q; want %q, %q", tc.in, o, e, tc.out, tc.err)
		}
	}
}

func TestName(t *testing.T) {
	for _, tc := range []struct {
		run    string
		max    int
		prefix string
	}{
		{"run-123", 63, "talkops-run-123-"},
		{"GH_Run/42 attempt#1", 63, "talkops-gh-run-42-attempt-1-"},
		{"", 63, "talkops-"},
		{strings.Repeat("x", 100), 32, "talkops-" + strings.Repeat("x", 15) + "-"},
	} {
		got := Name(tc.run, tc.max)
		if !strings.HasPrefix(got, tc.prefix) || len(got) > tc.max || len(got) != len(tc.prefix)+8 {
			t.Errorf("Name(%q, %d) = %q, want prefix %q plus 8 random characters, at most %d long", tc.run, tc.max, got, tc.prefix, tc.max)
		}
	}
	if first, second := Name("r", 63), Name("r", 63); first == second {
		t.Errorf("Name returned %q twice, want a random suffix", first)
	}
}

func TestExecBinaryOutputIsExact(t *testing.T) {
	for _, split := range []bool{false, true} {
		sb, _ := newSandbox(t, func(c *Config) { c.SplitStderr = split })
		payload := []byte{0, 1, 0xff, 0xfe, 'a', 0xc3, 0x28, '\n'}
		res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"sh", "-c", "cat; printf '\\377' >&2"}, Stdin: bytes.NewReader(payload)})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(res.Stdout, payload) || !bytes.Equal(res.Stderr, []byte{0xff}) {
			t.Errorf("split=%v: stdout %q stderr %q, want %q and %q", split, res.Stdout, res.Stderr, payload, []byte{0xff})
		}
		sb.Close(t.Context())
		assertNoTempFiles(t, sb)
	}
}

func assertNoTempFiles(t *testing.T, sb *Sandbox) {
	t.Helper()
	// The cleanup runs in the background; Close waited for it.
	left, _ := filepath.Glob(filepath.Join(sb.cfg.TempDir, ".talkops-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left in the sandbox: %v", left)
	}
}

func TestExecTextOutputLeavesNoFiles(t *testing.T) {
	sb, _ := newSandbox(t, nil)
	res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"sh", "-c", "echo ü; echo € >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{string(res.Stdout), string(res.Stderr)}
	if diff := cmp.Diff([]string{"ü\n", "€\n"}, got); diff != "" || res.ExitCode != 3 {
		t.Errorf("output mismatch (-want +got):\n%s exit %d", diff, res.ExitCode)
	}
	sb.Close(t.Context())
	assertNoTempFiles(t, sb)
}

func TestExecLongScriptIsStaged(t *testing.T) {
	sb, d := newSandbox(t, func(c *Config) { c.MaxScript = 2048 })
	long := strings.Repeat("x", 4000)
	res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"printf", "%s", long}})
	if err != nil || string(res.Stdout) != long {
		t.Fatalf("Exec(printf 4000 bytes) = %d bytes, %v", len(res.Stdout), err)
	}
	if len(d.writes) != 1 || !strings.HasSuffix(d.writes[0], ".sh") {
		t.Errorf("writes = %v, want the script staged as one .sh file", d.writes)
	}
	sb.Close(t.Context())
	assertNoTempFiles(t, sb)
}

func TestExecRejectsBadInput(t *testing.T) {
	sb, _ := newSandbox(t, nil)
	for _, cmd := range []providers.Cmd{
		{},
		{Argv: []string{"echo", "a\x00b"}},
		{Argv: []string{"true"}, Env: map[string]string{"BAD-NAME": "x"}},
		{Argv: []string{"true"}, Env: map[string]string{"1X": "x"}},
		{Argv: []string{"true"}, Env: map[string]string{"X": "nul\x00"}},
	} {
		if _, err := sb.Exec(t.Context(), cmd); err == nil {
			t.Errorf("Exec(%q env %q) = nil error, want one", cmd.Argv, cmd.Env)
		}
	}
}

func TestClientSideTimeout(t *testing.T) {
	// A driver that ignores the script's own timeout: the client-side bound still ends
	// the call, reports a timeout, and kills the command.
	sb, d := newSandbox(t, func(c *Config) { c.Grace = 100 * time.Millisecond })
	slow := &slowDriver{hostDriver: d}
	sb.driver = slow
	res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"true"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode != 124 {
		t.Fatalf("Exec = %+v, %v; want TimedOut with exit 124", res, err)
	}
	sb.Close(t.Context())
	if got := slow.kills(); got != 1 {
		t.Errorf("kill scripts = %d, want 1", got)
	}
}

type slowDriver struct {
	*hostDriver
}

func (s *slowDriver) Run(ctx context.Context, r Run) (Result, error) {
	if strings.HasPrefix(r.Script, "pid=$(cat") {
		return s.hostDriver.Run(ctx, r)
	}
	<-ctx.Done()
	return Result{}, ctx.Err()
}

func (s *slowDriver) kills() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sc := range s.scripts {
		if strings.HasPrefix(sc, "pid=$(cat") {
			n++
		}
	}
	return n
}

func TestCloseAttachedNeverDeletes(t *testing.T) {
	sb, d := newSandbox(t, func(c *Config) { c.Owned = false })
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d.deleted != 0 {
		t.Errorf("deleted = %d, want 0 for an attached sandbox", d.deleted)
	}
	if _, err := sb.Exec(t.Context(), providers.Shell("true")); !errors.Is(err, providers.ErrClosed) {
		t.Errorf("Exec after Close = %v, want ErrClosed", err)
	}
}

func TestUploadReportsTarFailure(t *testing.T) {
	sb, _ := newSandbox(t, nil)
	err := sb.Upload(t.Context(), "dir", strings.NewReader("this is not gzip"))
	if err == nil || !strings.Contains(err.Error(), "tar -xzf") {
		t.Fatalf("Upload(garbage) = %v, want the tar failure", err)
	}
	_, err = sb.Download(t.Context(), "nope")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Download(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestExecTruncatedByAPI(t *testing.T) {
	sb, d := newSandbox(t, func(c *Config) { c.KeepLines, c.KeepBytes = 3, 1<<20 })
	d.lastLines = 3
	res, err := sb.Exec(t.Context(), providers.Shell("seq 1 10; echo e >&2"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"; got != want || string(res.Stderr) != "e\n" || res.Truncated {
		t.Errorf("Exec(seq 1 10) = %q / %q truncated %v, want the whole output read back", got, res.Stderr, res.Truncated)
	}
	res, err = sb.Exec(t.Context(), providers.Shell("seq 1 3"))
	if err != nil || string(res.Stdout) != "1\n2\n3\n" {
		t.Errorf("Exec(seq 1 3) = %q, %v", res.Stdout, err)
	}
	sb.Close(t.Context())
	assertNoTempFiles(t, sb)
}

func TestRunRetry(t *testing.T) {
	if got := (Run{Script: "echo x >> f\n"}).Retry(); got != httpapi.RetryUnprocessed {
		t.Errorf("Run.Retry() = %v, want RetryUnprocessed: a command that may have started is not sent again", got)
	}
	if got := (Run{Script: "mkdir -p d\n", Repeatable: true}).Retry(); got != httpapi.RetryIdempotent {
		t.Errorf("Run{Repeatable}.Retry() = %v, want RetryIdempotent", got)
	}
}
