// Package fakekit holds what the remote providers' fake servers share: fault injection by
// endpoint and call number, a call log, sandbox bookkeeping for a ledger, and real command
// execution on the host in a process group that a timeout, a kill or a sandbox delete can
// stop as a whole.
//
// The fakes are test doubles of the services, not of the commands: a command sent to a
// fake runs for real with /bin/sh, so exit codes, output and files are real.
package fakekit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Fault is an injected failure: the fake answers with Status instead of serving the call.
type Fault struct {
	Status int
	// Late makes the fake carry the call out first and answer with the fault instead of
	// its real answer, as a proxy in front of a service does when it loses the service's
	// answer (a 502 or 503 after the command ran): the client cannot tell the work was
	// done.
	Late bool
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Body replaces the fake's own error body for Status.
	Body string
	// Header is added to the response.
	Header map[string]string
}

// SetHeaders adds the fault's Header, and its Retry-After when set, to h.
func (f Fault) SetHeaders(h http.Header) {
	for k, v := range f.Header {
		h.Set(k, v)
	}
	if f.RetryAfter != "" {
		h.Set("Retry-After", f.RetryAfter)
	}
}

// Write answers with the fault: its headers, then its Body as JSON with its Status, or,
// when it has no Body, what errorBody writes for the Status (the fake's own error shape).
func (f Fault) Write(w http.ResponseWriter, errorBody func(w http.ResponseWriter, status int)) {
	f.SetHeaders(w.Header())
	if f.Body == "" {
		errorBody(w, f.Status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, f.Body)
}

// Answer counts a call of endpoint and, when a fault is injected for it, answers with
// the fault (see Fault.Write) and returns true.
func (fs *Faults) Answer(w http.ResponseWriter, endpoint string, errorBody func(w http.ResponseWriter, status int)) bool {
	f, ok := fs.Hit(endpoint)
	if ok {
		f.Write(w, errorBody)
	}
	return ok
}

// Serve counts a call of endpoint and serves it with handle, unless a fault is injected
// for it: then the fault answers instead (see Fault.Write), after handle has run with its
// answer thrown away when the fault is Late.
func (fs *Faults) Serve(w http.ResponseWriter, endpoint string, errorBody func(w http.ResponseWriter, status int), handle func(w http.ResponseWriter)) {
	f, ok := fs.Hit(endpoint)
	if !ok {
		handle(w)
		return
	}
	if f.Late {
		handle(httptest.NewRecorder())
	}
	f.Write(w, errorBody)
}

// WriteJSON answers with status and v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Faults injects failures into named endpoints ("create", "exec", "delete", ...). It is
// safe for concurrent use.
type Faults struct {
	mu    sync.Mutex
	calls map[string]int
	nth   map[string]map[int]Fault
	every map[string]Fault
}

// Inject makes the nth call (1-based) of endpoint fail with f.
func (fs *Faults) Inject(endpoint string, nth int, f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.nth == nil {
		fs.nth = map[string]map[int]Fault{}
	}
	if fs.nth[endpoint] == nil {
		fs.nth[endpoint] = map[int]Fault{}
	}
	fs.nth[endpoint][nth] = f
}

// InjectAll makes every call of endpoint fail with f, until Clear.
func (fs *Faults) InjectAll(endpoint string, f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.every == nil {
		fs.every = map[string]Fault{}
	}
	fs.every[endpoint] = f
}

// Clear removes every fault of endpoint.
func (fs *Faults) Clear(endpoint string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.nth, endpoint)
	delete(fs.every, endpoint)
}

// Hit counts a call of endpoint and returns the fault to answer with, if any.
func (fs *Faults) Hit(endpoint string) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.calls == nil {
		fs.calls = map[string]int{}
	}
	fs.calls[endpoint]++
	if f, ok := fs.every[endpoint]; ok {
		return f, true
	}
	f, ok := fs.nth[endpoint][fs.calls[endpoint]]
	return f, ok
}

// Calls returns how many calls endpoint received, failed ones included.
func (fs *Faults) Calls(endpoint string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.calls[endpoint]
}

// Procs runs commands on the host and remembers them, so that a sandbox delete can kill
// them all: every command gets the environment variable FAKEKIT_SANDBOX=<random token>,
// which its descendants inherit, and KillAll kills each process on the host carrying it,
// whatever process group or session it moved to. The zero value is ready.
type Procs struct {
	mu     sync.Mutex
	live   map[*exec.Cmd]struct{}
	killed bool
	token  string
}

// markerVar is the environment variable that tags a fake sandbox's processes.
const markerVar = "FAKEKIT_SANDBOX"

// Command is one command to run for real.
type Command struct {
	// Path and Args are the program and its arguments (Args excludes the program).
	Path string
	Args []string
	// Stdin feeds the command; nil is empty.
	Stdin io.Reader
	Dir   string
	// Env is the whole environment; the host's is not inherited.
	Env []string
	// Timeout kills the whole process group after this long; 0 is no limit.
	Timeout time.Duration
	// Combined sends stderr into Stdout, as some APIs return it.
	Combined bool
	// Stdout and Stderr, when set, also receive output as it is produced.
	Stdout, Stderr io.Writer
}

// Outcome is how a command ended.
type Outcome struct {
	Stdout, Stderr []byte
	ExitCode       int
	TimedOut       bool
	// Killed is set when KillAll (a delete) stopped the command.
	Killed bool
	// StartErr is set when the command could not start at all.
	StartErr error
}

// ErrKilled is returned by Run after KillAll.
var ErrKilled = errors.New("sandbox deleted")

// Run runs c and waits for it; ctx ending kills it like a timeout does.
func (p *Procs) Run(ctx context.Context, c Command) Outcome {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin = c.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, errb lockedBuffer
	cmd.Stdout = tee(&out, c.Stdout)
	if c.Combined {
		cmd.Stderr = cmd.Stdout
	} else {
		cmd.Stderr = tee(&errb, c.Stderr)
	}
	// Don't wait for grandchildren that keep the pipes open after a kill.
	cmd.WaitDelay = 2 * time.Second

	p.mu.Lock()
	if p.killed {
		p.mu.Unlock()
		return Outcome{StartErr: ErrKilled}
	}
	if p.token == "" {
		p.token = newToken()
	}
	cmd.Env = append(cmd.Env, markerVar+"="+p.token)
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return Outcome{StartErr: err}
	}
	if p.live == nil {
		p.live = map[*exec.Cmd]struct{}{}
	}
	p.live[cmd] = struct{}{}
	p.mu.Unlock()

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timer <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timer = t.C
	}
	var o Outcome
	var err error
	select {
	case err = <-done:
	case <-timer:
		o.TimedOut = true
		killGroup(cmd)
		err = <-done
	case <-ctx.Done():
		killGroup(cmd)
		err = <-done
	}
	p.mu.Lock()
	delete(p.live, cmd)
	o.Killed = p.killed
	p.mu.Unlock()
	o.Stdout, o.Stderr = out.Bytes(), errb.Bytes()
	o.ExitCode = 0
	if err != nil {
		o.ExitCode = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			o.ExitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				o.ExitCode = 128 + int(ws.Signal())
			}
		}
	}
	return o
}

// KillAll kills every running command's process group and every other process that
// descends from one of the commands; later Runs fail with ErrKilled.
func (p *Procs) KillAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = true
	for cmd := range p.live {
		killGroup(cmd)
	}
	if p.token != "" {
		// One scan can miss a child forked after /proc was listed by a process the scan
		// then killed (a real sandbox's delete takes the whole machine). Scan again until
		// a pass finds nothing: a SIGKILLed process forks no more.
		for range 100 {
			if killTagged(markerVar+"="+p.token) == 0 {
				break
			}
		}
	}
}

// killTagged SIGKILLs every process whose environment holds marker, scanning /proc
// (Linux), and returns how many it signalled; elsewhere it does nothing more than the
// group kill did.
func killTagged(marker string) (killed int) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := []byte(marker)
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
				break
			}
		}
	}
	return killed
}

func newToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// BaseEnv is the environment a fake sandbox's commands start with: PATH from the host (so
// the host's tools are found), HOME set to home, and nothing else from the host.
func BaseEnv(home string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{"PATH=" + path, "HOME=" + home, "LANG=C.UTF-8"}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

func tee(buf io.Writer, w io.Writer) io.Writer {
	if w == nil {
		return buf
	}
	return io.MultiWriter(buf, w)
}

// WriteFile writes what r holds to the host file dest, creating its parent directories,
// and returns how many bytes it wrote.
func WriteFile(dest string, r io.Reader) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(dest)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}
