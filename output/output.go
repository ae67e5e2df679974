// Package output renders the run for people and programs: live progress on stderr, the
// stream-json event feed, and the final text, JSON or quiet summary on stdout.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
)

// Formats accepted by --output-format.
const (
	FormatText       = "text"
	FormatJSON       = "json"
	FormatStreamJSON = "stream-json"
)

// Formats lists the valid --output-format values.
var Formats = []string{FormatText, FormatJSON, FormatStreamJSON}

// JSONLines writes each event as one JSON object per line (stream-json).
func JSONLines(w io.Writer) events.Sink {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return events.Func(func(e events.Event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	})
}

// Progress renders stages, sync progress, setup output and checks as they happen. On a
// terminal, sync progress rewrites one line; elsewhere (CI logs) every line is plain and
// progress is printed at most every few seconds.
func Progress(w io.Writer, tty bool) events.Sink {
	p := &progress{w: w, tty: tty}
	return events.Func(p.emit)
}

type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	inline   bool // a \r progress line is on screen
	lastSync time.Time
}

func (p *progress) emit(e events.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Type {
	case events.SyncProgress:
		d, _ := e.Data.(map[string]any)
		done, _ := d["done"].(bool)
		if !p.tty && !done && time.Since(p.lastSync) < 5*time.Second {
			return // the total always shows
		}
		p.lastSync = time.Now()
		line := "  sync: " + e.Message
		if p.tty {
			fmt.Fprintf(p.w, "\r\x1b[2K%s", line)
			p.inline = true
			return
		}
		p.line(line)
	case events.StageStarted:
		p.line("▸ " + string(e.Stage))
	case events.StageFinished:
		d, _ := e.Data.(map[string]any)
		ms, _ := d["duration_ms"].(int64)
		mark := "✓"
		if e.Message != string(result.StageOK) {
			mark = "✗"
		}
		msg := fmt.Sprintf("%s %s %s (%s)", mark, e.Stage, e.Message, time.Duration(ms)*time.Millisecond)
		if errText, _ := d["error"].(string); errText != "" {
			msg += ": " + firstLine(errText)
		}
		p.line(msg)
	case events.Output:
		p.line("  │ " + e.Message)
	case events.CheckFinished:
		p.line("  " + e.Message)
	case events.RubricItem:
		if !strings.HasPrefix(e.Message, "check ") { // checks were shown as they finished
			p.line("  " + e.Message)
		}
	case events.TeardownFinished:
		p.line("✓ teardown: " + e.Message)
	case events.Warning:
		p.line("! " + e.Message)
	case events.ToolCall, events.ToolDenied:
		p.line("  " + e.Message)
	}
}

func (p *progress) line(s string) {
	if p.inline {
		fmt.Fprint(p.w, "\r\x1b[2K")
		p.inline = false
	}
	// Messages carry command output and model text: no escape may reach the terminal.
	fmt.Fprintln(p.w, hygiene.StripANSI(s))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// VerdictLine is the one line -q prints: "talkops: pass (score 1.00, exit 0)".
func VerdictLine(r *result.Result) string { return hygiene.StripANSI(verdictLine(r)) }

func verdictLine(r *result.Result) string {
	var b strings.Builder
	b.WriteString("talkops: ")
	b.WriteString(r.Verdict)
	if r.Partial {
		b.WriteString(" (partial)")
	}
	if r.Score != nil {
		fmt.Fprintf(&b, " score %.2f", *r.Score)
	}
	fmt.Fprintf(&b, " exit %d", r.ExitCode)
	if r.Reason != "" {
		b.WriteString(": ")
		b.WriteString(firstLine(r.Reason))
	}
	return b.String()
}

// Text writes the human summary printed at the end of a run. The answer, reasons and
// titles are untrusted text: control characters and terminal escapes are stripped.
func Text(w io.Writer, r *result.Result) {
	var b strings.Builder
	text(&b, r)
	_, _ = io.WriteString(w, hygiene.StripANSI(b.String()))
}

// Answer is the agent's final answer as printed: without control characters.
func Answer(r *result.Result) string {
	if r.Agent == nil {
		return ""
	}
	return hygiene.StripANSI(r.Agent.FinalAnswer)
}

func text(w io.Writer, r *result.Result) {
	if r.Agent != nil && r.Agent.FinalAnswer != "" {
		fmt.Fprintln(w, r.Agent.FinalAnswer)
		fmt.Fprintln(w)
	}
	if r.Rubric != nil {
		fmt.Fprintf(w, "Rubric %s: %s (%d pass, %d fail, %d error, %d skipped)\n", r.Rubric.Name, r.Rubric.Status,
			r.Rubric.Counts.Pass, r.Rubric.Counts.Fail, r.Rubric.Counts.Error, r.Rubric.Counts.Skipped)
		for _, it := range r.Rubric.Items {
			fmt.Fprintf(w, "  %-7s %s", it.Status, it.ID)
			if it.Title != "" && it.Title != it.ID {
				fmt.Fprintf(w, " — %s", it.Title)
			}
			if it.Status != result.StatusPass && it.Reason != "" {
				fmt.Fprintf(w, ": %s", firstLine(it.Reason))
			}
			fmt.Fprintln(w)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error in %s: %s\n", e.Stage, e.Message)
	}
	if r.Run.ReportDir != "" {
		fmt.Fprintf(w, "Report: %s/result.json\n", strings.TrimSuffix(r.Run.ReportDir, "/"))
	}
	fmt.Fprintln(w, VerdictLine(r))
}

// JSON writes the result as one JSON object on one line.
func JSON(w io.Writer, r *result.Result) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}
