package rubric

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// Output caps for checks.
const (
	// TailBytes is how much of each stream's end a check item keeps.
	TailBytes = 4096
	// MaxParseBytes caps the output (stdout or parse_file) handed to a parser.
	MaxParseBytes = 32 << 20
	// captureBytes is the capture cap for checks whose stdout is not parsed: enough for
	// the tails, with room to spare.
	captureBytes = 64 << 10
	// maxStreamLines caps the events.Output lines emitted per check stream.
	maxStreamLines = 2000
	// maxLineBytes caps one emitted output line.
	maxLineBytes = 4096
)

// stage is the events.Event Stage of everything the rubric emits.
const stage = result.StageRubric

// CheckEvent is the Data of events.CheckStarted and events.CheckFinished.
type CheckEvent struct {
	ID         string            `json:"id"`
	Title      string            `json:"title,omitempty"`
	Argv       []string          `json:"argv,omitempty"`
	Status     result.ItemStatus `json:"status,omitempty"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	TimedOut   bool              `json:"timed_out,omitempty"`
	DurationMS int64             `json:"duration_ms,omitempty"`
	Findings   int               `json:"findings,omitempty"`
	Reason     string            `json:"reason,omitempty"`
}

// OutputLine is the Data of an events.Output event carrying one line of check output (the
// line itself is the event's Message). Output is data from the sandbox: views must escape
// it (for example workflow commands) before printing.
type OutputLine struct {
	Check  string `json:"check"`
	Stream string `json:"stream"` // stdout or stderr
}

// Checker runs a rubric's checks. The zero value is ready to use.
type Checker struct {
	// Redact, when set, is applied to every string taken from a check's output or error
	// before it leaves the package (events, tails, reasons, findings).
	Redact func(string) string
}

// RunChecks runs every check of r in the sandbox with a zero Checker.
func RunChecks(ctx context.Context, sb providers.Sandbox, r *Rubric, sink events.Sink) []result.Item {
	return Checker{}.Run(ctx, sb, r, sink)
}

// Run runs every check of r inside sb, in order, each with its timeout, emitting
// events.CheckStarted, events.Output lines and events.CheckFinished. A check passes when
// its exit code is the expected one, fails otherwise (a timeout is a failure), and is an
// error when it could not run. Once ctx is done the remaining checks are skipped and Run
// returns promptly. There is one item per check, in rubric order.
func (c Checker) Run(ctx context.Context, sb providers.Sandbox, r *Rubric, sink events.Sink) []result.Item {
	if sink == nil {
		sink = events.Discard
	}
	items := make([]result.Item, 0, len(r.Checks))
	for _, ch := range r.Checks {
		if err := ctx.Err(); err != nil {
			it := checkItem(ch)
			it.Status = result.StatusSkipped
			it.Reason = "not run: " + cancelCause(ctx)
			c.finished(sink, ch, it)
			items = append(items, it)
			continue
		}
		if sb == nil {
			it := checkItem(ch)
			it.Status = result.StatusError
			it.Reason = "could not run: no sandbox"
			c.finished(sink, ch, it)
			items = append(items, it)
			continue
		}
		items = append(items, c.runOne(ctx, sb, r, ch, sink))
	}
	return items
}

func checkItem(ch Check) result.Item {
	return result.Item{
		ID:       ch.ID,
		Kind:     KindCheck,
		Title:    ch.Title,
		Required: ch.Required,
		Weight:   ch.Weight,
		Check: &result.Check{
			Argv:       append([]string{}, ch.Argv...),
			ExpectExit: ch.ExpectExit,
		},
	}
}

func (c Checker) runOne(ctx context.Context, sb providers.Sandbox, r *Rubric, ch Check, sink events.Sink) result.Item {
	it := checkItem(ch)
	for i, a := range it.Check.Argv {
		it.Check.Argv[i] = c.redact(a)
	}
	sink.Emit(events.Event{Time: time.Now(), Type: events.CheckStarted, Stage: stage,
		Message: "check " + ch.ID, Data: CheckEvent{ID: ch.ID, Title: ch.Title, Argv: it.Check.Argv}})

	if ch.ParseFile != "" {
		// A report left by an earlier run must not pass for this one's: without it, a
		// tool that fails before writing leaves no file, and that is what gets reported.
		if res, err := sb.Exec(ctx, providers.Cmd{Argv: []string{"rm", "-f", "--", ch.ParseFile}, Timeout: time.Minute}); err != nil || res.ExitCode != 0 {
			why := fmt.Sprintf("exit %d: %s", res.ExitCode, strings.TrimSpace(tail(res.Stderr, 200)))
			if err != nil {
				why = err.Error()
			}
			it.Status = result.StatusError
			it.Reason = c.redact(fmt.Sprintf("could not remove the previous parse_file %s before the check: %s", ch.ParseFile, why))
			c.finished(sink, ch, it)
			return it
		}
	}
	cmd := ch.Cmd()
	cmd.OutputLimit = captureBytes
	if ch.Parse != "" && ch.ParseFile == "" {
		cmd.OutputLimit = MaxParseBytes
	}
	stdout := c.lineWriter(sink, ch.ID, "stdout")
	stderr := c.lineWriter(sink, ch.ID, "stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr

	start := time.Now()
	res, err := sb.Exec(ctx, cmd)
	stdout.flush()
	stderr.flush()
	it.DurationMS = time.Since(start).Milliseconds()
	if err == nil && res.Duration > 0 {
		it.DurationMS = res.Duration.Milliseconds()
	}

	switch {
	case err != nil && ctx.Err() != nil:
		it.Status = result.StatusError
		it.Reason = "interrupted while running: " + cancelCause(ctx)
	case err != nil:
		it.Status = result.StatusError
		it.Reason = c.redact("could not run: " + err.Error())
	default:
		code := res.ExitCode
		it.Check.ExitCode = &code
		it.Check.TimedOut = res.TimedOut
		it.Check.StdoutTail = c.redact(tail(res.Stdout, TailBytes))
		it.Check.StderrTail = c.redact(tail(res.Stderr, TailBytes))
		switch {
		case res.TimedOut:
			it.Status = result.StatusFail
			it.Reason = fmt.Sprintf("timed out after %s", ch.Timeout)
		case code == ch.ExpectExit:
			it.Status = result.StatusPass
		case code == 126 || code == 127:
			// The shell's "not executable" and "not found": the instrument is missing,
			// which says nothing about the project.
			it.Status = result.StatusError
			it.Reason = fmt.Sprintf("exit code %d: the command was not found or is not executable, so the check could not run", code)
		default:
			it.Status = result.StatusFail
			it.Reason = fmt.Sprintf("exit code %d, expected %d", code, ch.ExpectExit)
		}
		if ch.Parse != "" {
			c.attachFindings(ctx, sb, r, ch, res, &it)
		}
	}
	switch it.Status {
	case result.StatusPass:
		it.Score = ptr(1.0)
	case result.StatusFail:
		it.Score = ptr(0.0)
	}
	c.finished(sink, ch, it)
	return it
}

// attachFindings parses the check's output. A parse failure turns a passing check into an
// error (the instrument failed); on a failing check it is only noted in the reason.
func (c Checker) attachFindings(ctx context.Context, sb providers.Sandbox, r *Rubric, ch Check, res providers.ExecResult, it *result.Item) {
	data, err := parseInput(ctx, sb, ch, res)
	var found []result.Finding
	total := 0
	if err == nil {
		found, total, err = parseFindings(ch.Parse, data, FindingContext{Rubric: r.Name, Check: ch.ID, WorkDir: sb.WorkDir()})
	}
	if err != nil {
		note := c.redact(err.Error())
		if it.Status == result.StatusPass {
			it.Status = result.StatusError
			it.Reason = note
		} else {
			it.Reason += "; " + note
		}
		return
	}
	for i := range found {
		found[i].Message = c.redact(found[i].Message)
		found[i].Title = c.redact(found[i].Title)
	}
	it.Findings = found
	if total > len(found) {
		note := fmt.Sprintf("%d findings, the first %d kept", total, len(found))
		if it.Reason == "" {
			it.Reason = note
		} else {
			it.Reason += "; " + note
		}
	}
}

func parseInput(ctx context.Context, sb providers.Sandbox, ch Check, res providers.ExecResult) ([]byte, error) {
	if ch.ParseFile == "" {
		if res.Truncated && len(res.Stdout) >= MaxParseBytes/2 {
			return nil, fmt.Errorf("%s output is larger than %d bytes and was truncated; write it to a file and set parse_file", ch.Parse, MaxParseBytes)
		}
		return res.Stdout, nil
	}
	rc, err := sb.Download(ctx, ch.ParseFile)
	if err != nil {
		return nil, fmt.Errorf("read parse_file %s: %w", ch.ParseFile, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxParseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read parse_file %s: %w", ch.ParseFile, err)
	}
	if len(data) > MaxParseBytes {
		return nil, fmt.Errorf("parse_file %s is larger than %d bytes", ch.ParseFile, MaxParseBytes)
	}
	return data, nil
}

func (c Checker) finished(sink events.Sink, ch Check, it result.Item) {
	ev := CheckEvent{ID: ch.ID, Title: ch.Title, Status: it.Status, DurationMS: it.DurationMS,
		Findings: len(it.Findings), Reason: it.Reason}
	if it.Check != nil {
		ev.ExitCode = it.Check.ExitCode
		ev.TimedOut = it.Check.TimedOut
	}
	sink.Emit(events.Event{Time: time.Now(), Type: events.CheckFinished, Stage: stage,
		Message: "check " + ch.ID + ": " + string(it.Status), Data: ev})
}

func (c Checker) redact(s string) string {
	if c.Redact == nil || s == "" {
		return s
	}
	return c.Redact(s)
}

func cancelCause(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil {
		return cause.Error()
	}
	return "cancelled"
}

func ptr[T any](v T) *T { return &v }

// tail returns the last max bytes of b as valid UTF-8 text, starting at a character
// boundary and marked when cut.
func tail(b []byte, max int) string {
	const mark = "...(truncated)\n"
	if len(b) <= max {
		return cleanText(string(b), max+1)
	}
	b = b[len(b)-(max-len(mark)):]
	for len(b) > 0 && b[0]&0xC0 == 0x80 { // skip continuation bytes
		b = b[1:]
	}
	return mark + cleanText(string(b), max)
}

// streamWriter turns a command's output into events.Output lines, capped in count and
// length; it never fails, so a slow or flooding check cannot break the run.
type streamWriter struct {
	mu      sync.Mutex
	sink    events.Sink
	check   string
	stream  string
	redact  func(string) string
	buf     []byte
	lines   int
	dropped bool
}

func (c Checker) lineWriter(sink events.Sink, check, stream string) *streamWriter {
	return &streamWriter{sink: sink, check: check, stream: stream, redact: c.redact}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLineBytes - len(w.buf)
			if len(p) > room {
				w.buf = append(w.buf, p[:room]...)
				w.emit()
				p = p[room:]
				continue
			}
			w.buf = append(w.buf, p...)
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.emit()
		p = p[i+1:]
	}
	return n, nil
}

func (w *streamWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit()
	}
}

// emit sends the buffered line; the caller holds mu.
func (w *streamWriter) emit() {
	line := strings.TrimSuffix(string(w.buf), "\r")
	w.buf = w.buf[:0]
	if len(line) > maxLineBytes {
		line = line[:maxLineBytes]
	}
	if w.lines >= maxStreamLines {
		if !w.dropped {
			w.dropped = true
			w.sink.Emit(events.Event{Time: time.Now(), Type: events.Output, Stage: stage,
				Message: fmt.Sprintf("(%s output of check %s exceeds %d lines; the rest is not streamed)", w.stream, w.check, maxStreamLines),
				Data:    OutputLine{Check: w.check, Stream: w.stream}})
		}
		return
	}
	w.lines++
	w.sink.Emit(events.Event{Time: time.Now(), Type: events.Output, Stage: stage,
		Message: w.redact(cleanText(line, maxLineBytes)), Data: OutputLine{Check: w.check, Stream: w.stream}})
}
