package faulttest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// markerVar tags every talkops process a test starts; leftovers() finds processes that
// carry it (or the marker in their command line, or a working directory under the test's
// root) after the run.
const markerVar = "TALKOPS_FAULTTEST_MARKER"

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// TestMain removes the talkops binary built by the first test that needed it.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// talkopsBin builds the real talkops binary once per test process (the same `go build`
// a user runs, plus the talkops_testprovider tag, which adds the fake provider) and
// returns its path.
func talkopsBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "talkops-faulttest-bin-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "talkops")
		buildErr = buildTalkops(buildPath, "-tags", "talkops_testprovider")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// buildTalkops builds ./cmd/talkops to path with the flags of `make build` (without the
// version stamp), so sizes and memory figures are the release binary's; extra are more
// go build flags.
func buildTalkops(path string, extra ...string) error {
	args := append([]string{"build", "-trimpath", "-ldflags", "-s -w"}, extra...)
	cmd := exec.Command("go", append(args, "-o", path, "github.com/talkops/talkops/cmd/talkops")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/talkops: %w\n%s", err, out)
	}
	return nil
}

func newMarker() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "ftmark" + hex.EncodeToString(b)
}

// writeFiles creates files (relative paths → content) under dir; *.sh files are
// executable.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if strings.HasSuffix(name, "id_rsa") {
			mode = 0o600
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// hermeticEnv is the environment of one talkops process: its own HOME, state dir and
// TMPDIR under root, the host's PATH, the marker, and nothing else from the host.
func hermeticEnv(root, marker string) map[string]string {
	return map[string]string{
		"HOME":           filepath.Join(root, "home"),
		"XDG_STATE_HOME": filepath.Join(root, "state"),
		"TMPDIR":         filepath.Join(root, "tmp"),
		"PATH":           os.Getenv("PATH"),
		markerVar:        marker,
	}
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// event is one stream-json line, with Data left raw.
type event struct {
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"`
	Stage   string          `json:"stage"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// eventLog collects a process's stdout and parses the stream-json events in it.
type eventLog struct {
	mu      sync.Mutex
	raw     bytes.Buffer
	events  []event
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		l.mu.Lock()
		l.raw.Write(line)
		l.raw.WriteByte('\n')
		var e event
		if json.Unmarshal(line, &e) == nil && e.Type != "" {
			l.events = append(l.events, e)
		}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
	// Drain whatever a scanner error left (a line over 16 MiB): stdout must not block.
	_, _ = io.Copy(io.Discard, r)
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw.String()
}

// find returns the first event that satisfies ok.
func (l *eventLog) find(ok func(event) bool) (event, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if ok(e) {
			return e, true, nil
		}
	}
	return event{}, false, l.changed
}

// lockedBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// proc is a running talkops process.
type proc struct {
	cmd      *exec.Cmd
	stdout   *eventLog
	stderr   *lockedBuffer
	done     chan struct{}
	code     int       // valid after done: the exit code, or 128+signal
	peakKB   int64     // valid after done: the peak resident set (getrusage ru_maxrss), in KiB
	exitedAt time.Time // valid after done
}

// startTalkops starts the talkops binary in dir with exactly env.
func startTalkops(t testing.TB, dir string, env map[string]string, args ...string) *proc {
	t.Helper()
	return startProcess(t, dir, env, talkopsBin(t), args...)
}

// startProcess starts argv[0] (an absolute path) like startTalkops.
func startProcess(t testing.TB, dir string, env map[string]string, path string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = envList(env)
	p := &proc{cmd: cmd, stdout: newEventLog(), stderr: &lockedBuffer{}, done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	copied := make(chan struct{})
	go func() {
		p.stdout.consume(out)
		close(copied)
	}()
	go func() {
		<-copied
		err := cmd.Wait()
		p.exitedAt = time.Now()
		p.code = exitCodeOf(err)
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			p.peakKB = ru.Maxrss // Linux reports KiB
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// wait waits for the process to exit and returns its code; ok is false if it did not exit
// within d (it is then killed).
func (p *proc) wait(d time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
		return p.code, true
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		return p.code, false
	}
}

func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitEvent waits until the process printed an event that satisfies ok, or exited.
func (p *proc) waitEvent(ok func(event) bool, d time.Duration) (event, bool) {
	deadline := time.After(d)
	for {
		e, found, changed := p.stdout.find(ok)
		if found {
			return e, true
		}
		select {
		case <-changed:
		case <-p.done:
			e, found, _ := p.stdout.find(ok)
			return e, found
		case <-deadline:
			return event{}, false
		}
	}
}

// runID is the run id from the run.started event ("" if the run never started).
func (p *proc) runID() string {
	e, ok, _ := p.stdout.find(func(e event) bool { return e.Type == "run.started" })
	if !ok {
		return ""
	}
	var d struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.RunID
}

// readReport reads the result.json a run wrote to reportDir and checks it against the
// schema, as every reader of the record does; a missing or invalid one fails the test,
// with why (the exit code and stderr, say) after the error.
func readReport(t testing.TB, reportDir, why string) (*result.Result, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(reportDir, "result.json"))
	if err != nil {
		t.Fatalf("no result.json: %v\n%s", err, why)
	}
	r, err := result.Decode(b)
	if err != nil {
		t.Fatalf("result.json: %v\n%s", err, why)
	}
	return r, b
}

// runTalkops runs talkops to completion (bounded) and returns its exit code and output.
func runTalkops(t testing.TB, dir string, env map[string]string, within time.Duration, args ...string) (int, string, string) {
	t.Helper()
	p := startTalkops(t, dir, env, args...)
	code, ok := p.wait(within)
	if !ok {
		t.Errorf("talkops %s did not exit within %s\nstderr:\n%s", strings.Join(args, " "), within, p.stderr)
	}
	return code, p.stdout.String(), p.stderr.String()
}

// leftover is a live process that belongs to a test.
type leftover struct {
	PID  int
	Comm string
	Why  string
}

func (l leftover) String() string { return fmt.Sprintf("pid %d (%s): %s", l.PID, l.Comm, l.Why) }

// leftovers scans /proc for live (non-zombie) processes other than this one that carry
// the marker in their environment or command line, or whose working directory is under
// root. Processes in other mount namespaces (bwrap, containers) are found by the command
// line marker the tests put into every long-running command.
func leftovers(marker, root string) []leftover {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	envWant := []byte(markerVar + "=" + marker)
	var out []leftover
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		base := "/proc/" + e.Name()
		stat, err := os.ReadFile(base + "/stat")
		if err != nil {
			continue
		}
		comm, state := parseStat(string(stat))
		if state == "Z" || state == "X" {
			continue
		}
		var why string
		if env, err := os.ReadFile(base + "/environ"); err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool {
			return bytes.Equal(kv, envWant)
		}) {
			why = "environment carries the marker"
		} else if cmdline, err := os.ReadFile(base + "/cmdline"); err == nil && bytes.Contains(cmdline, []byte(marker)) {
			why = "command line " + strconv.Quote(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		} else if cwd, err := os.Readlink(base + "/cwd"); err == nil && root != "" && (cwd == root || strings.HasPrefix(cwd, root+"/")) {
			why = "working directory " + cwd
		}
		if why != "" {
			out = append(out, leftover{PID: pid, Comm: comm, Why: why})
		}
	}
	return out
}

func parseStat(s string) (comm, state string) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return "", ""
	}
	return s[open+1 : end], s[end+2 : end+3]
}

// waitNoLeftovers waits up to d for the test's processes to be gone and returns those
// still alive.
func waitNoLeftovers(marker, root string, d time.Duration) []leftover {
	deadline := time.Now().Add(d)
	for {
		left := leftovers(marker, root)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loopCmd is a shell command that runs until killed and carries marker in its command
// line (as $0 of the inner shell), so leftovers() finds it in any namespace.
func loopCmd(marker string) string {
	return fmt.Sprintf("sh -c 'while :; do sleep 1; done' %s", marker)
}
