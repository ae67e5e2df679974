package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stderrTail is how much of a plugin's stderr an error quotes.
const stderrTail = 4 << 10

// process is one running plugin: requests go to its stdin as JSON lines, answers come
// back on its stdout, matched by id, in any order. It is safe for concurrent use.
type process struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	tail  *tailBuffer
	caps  Capabilities

	wmu sync.Mutex // one line at a time on stdin

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan response
	err     error         // why the process stopped; set once
	done    chan struct{} // closed when the process has stopped and was reaped
}

// ProcessError is a plugin that stopped, broke the protocol or did not answer in time.
// Its message ends with the tail of the plugin's stderr, where plugins log.
type ProcessError struct {
	Provider string
	Op       string
	Reason   string
	Stderr   string
}

func (e *ProcessError) Error() string {
	msg := fmt.Sprintf("%s plugin: %s: %s", e.Provider, e.Op, e.Reason)
	if e.Stderr != "" {
		msg += "; plugin stderr (last lines):\n" + e.Stderr
	}
	return msg
}

// CallError is an error answer from the plugin: the plugin works, the operation failed.
type CallError struct {
	Provider, Op, Code, Message string
}

func (e *CallError) Error() string {
	return fmt.Sprintf("%s plugin: %s: %s (%s)", e.Provider, e.Op, e.Message, e.Code)
}

// start runs argv and performs the handshake within startTimeout.
func start(ctx context.Context, name string, argv, env []string, dir string, hello helloParams, startTimeout time.Duration) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	// Its own process group, so teardown kills whatever the plugin started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	p := &process{name: name, cmd: cmd, tail: &tailBuffer{max: stderrTail}, pending: map[int64]chan response{}, done: make(chan struct{})}
	cmd.Stderr = p.tail
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s plugin: start %s: %w", name, argv[0], err)
	}
	p.stdin = stdin
	go p.read(stdout)

	var hr helloResult
	if err := p.call(ctx, "hello", hello, &hr, startTimeout); err != nil {
		p.kill()
		return nil, err
	}
	if hr.Protocol != ProtocolVersion {
		p.kill()
		return nil, &ProcessError{Provider: name, Op: "hello", Stderr: p.tail.String(),
			Reason: fmt.Sprintf("the plugin speaks protocol version %d; this talkops speaks version %d", hr.Protocol, ProtocolVersion)}
	}
	p.caps = hr.Capabilities
	return p, nil
}

// read dispatches answers until stdout ends or the plugin breaks the protocol, then reaps
// the process and fails every call still waiting.
func (p *process) read(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	var reason string
	for {
		line, err := readLine(br, maxMessage)
		if err != nil {
			if errors.Is(err, errTooLong) {
				reason = fmt.Sprintf("the plugin wrote a message longer than %d MiB (exec output must be capped at output_limit)", maxMessage>>20)
			}
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r response
		if err := json.Unmarshal(line, &r); err != nil || r.ID == nil {
			reason = fmt.Sprintf("the plugin wrote a line that is not a protocol message: %q", clip(line, 200))
			break
		}
		p.mu.Lock()
		ch, ok := p.pending[*r.ID]
		delete(p.pending, *r.ID)
		p.mu.Unlock()
		if ok {
			ch <- r
		}
	}
	if reason != "" {
		p.killGroup()
	}
	waitErr := p.cmd.Wait()
	p.killGroup() // children the plugin left behind
	if reason == "" {
		reason = "the plugin exited"
		if waitErr != nil {
			reason = "the plugin exited: " + waitErr.Error()
		}
	}
	p.stop(errors.New(reason))
	close(p.done)
}

// stop records why the process is gone and fails every waiting call.
func (p *process) stop(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	for id, ch := range p.pending {
		close(ch)
		delete(p.pending, id)
	}
}

var errTooLong = errors.New("line too long")

// readLine reads one '\n'-terminated line of at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > limit {
			return nil, errTooLong
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return buf, nil
		default:
			return nil, err
		}
	}
}

// call sends op and waits for its answer. When ctx ends first the answer is abandoned
// (it is discarded when it comes). When deadline (if > 0) passes first, the plugin
// hangs: it is stopped and every call waiting on it fails.
func (p *process) call(ctx context.Context, op string, params, result any, deadline time.Duration) error {
	ch := make(chan response, 1)
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return p.failure(op, err.Error())
	}
	p.nextID++
	id := p.nextID
	p.pending[id] = ch
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}

	line, err := json.Marshal(request{ID: id, Op: op, Params: params})
	if err != nil {
		forget()
		return fmt.Errorf("%s plugin: %s: encode request: %w", p.name, op, err)
	}
	// The deadline covers sending the request too: a plugin that stops reading its stdin
	// blocks the write on a full pipe, and with it every later call (teardown's delete).
	var expired <-chan time.Time
	if deadline > 0 {
		t := time.NewTimer(deadline)
		defer t.Stop()
		expired = t.C
	}
	stopWatch := p.watchWrite(ctx, expired)
	p.wmu.Lock()
	_, err = p.stdin.Write(append(line, '\n'))
	p.wmu.Unlock()
	stuck := stopWatch()
	if err != nil {
		forget()
		if stuck {
			return p.failure(op, fmt.Sprintf("the plugin did not read the request within %s, so it was stopped", deadline))
		}
		<-p.doneOr(ctx, time.Second)
		return p.failure(op, "write request: "+p.reason(err).Error())
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return p.failure(op, p.reason(nil).Error()+" during the call")
		}
		if r.Error != nil {
			return p.callError(op, r.Error)
		}
		if result != nil {
			if err := json.Unmarshal(r.Result, result); err != nil {
				p.kill()
				return p.failure(op, fmt.Sprintf("the plugin answered with an invalid result: %v", err))
			}
		}
		return nil
	case <-expired:
		forget()
		p.kill()
		return p.failure(op, fmt.Sprintf("the plugin did not answer within %s, so it was stopped", deadline))
	case <-ctx.Done():
		forget()
		return fmt.Errorf("%s plugin: %s: %w", p.name, op, ctx.Err())
	}
}

// writeGrace is how long a request may still take to send once the caller's context
// ends, before the plugin is stopped: short, to leave teardown most of its budget.
const writeGrace = 2 * time.Second

// watchWrite stops the plugin if sending a request outlasts expired, or writeGrace after
// ctx ends; stop ends the watch and says whether it stopped the plugin.
func (p *process) watchWrite(ctx context.Context, expired <-chan time.Time) (stop func() (stuck bool)) {
	done := make(chan struct{})
	fired := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-expired:
		case <-ctx.Done():
			t := time.NewTimer(writeGrace)
			defer t.Stop()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
		close(fired)
		p.kill()
	}()
	return func() bool {
		close(done)
		select {
		case <-fired:
			return true
		default:
			return false
		}
	}
}

// doneOr returns a channel that is closed when the process is gone or after d.
func (p *process) doneOr(ctx context.Context, d time.Duration) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}()
	return out
}

func (p *process) reason(fallback error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if fallback != nil {
		return fallback
	}
	return errors.New("the plugin stopped")
}

func (p *process) failure(op, reason string) error {
	return &ProcessError{Provider: p.name, Op: op, Reason: reason, Stderr: p.tail.String()}
}

func (p *process) callError(op string, e *wireError) error {
	ce := &CallError{Provider: p.name, Op: op, Code: e.Code, Message: e.Message}
	return ce
}

// alive reports whether the process still answers.
func (p *process) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err == nil
}

// shutdown asks the plugin to exit, closes its stdin and waits up to grace; then (and
// in any case) kills its process group. It is safe to call more than once.
func (p *process) shutdown(ctx context.Context, grace time.Duration) {
	if p.alive() {
		_ = p.call(ctx, "shutdown", struct{}{}, nil, grace)
	}
	p.wmu.Lock()
	_ = p.stdin.Close()
	p.wmu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
	p.kill()
}

// kill stops the plugin's whole process group now and waits until it was reaped.
func (p *process) kill() {
	p.stop(errors.New("the plugin was stopped"))
	p.killGroup()
	// A grandchild that left the group may hold stdout open; do not wait for it forever.
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	}
}

func (p *process) killGroup() {
	if p.cmd.Process == nil {
		return
	}
	// Negative pid: the group. ESRCH (already gone) is fine.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Signal(os.Kill)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.TrimSpace(b.buf))
}

func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
