package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/result"
)

// Redactor removes secrets from text. The runner may pass its own (Options.Redactor); the
// agent always adds the values in Options.Secrets and the model's API key.
type Redactor interface {
	Redact(s string) string
}

// chain applies redactors in order.
type chain []Redactor

func (c chain) Redact(s string) string {
	for _, r := range c {
		if r != nil {
			s = r.Redact(s)
		}
	}
	return s
}

// Event payloads. Each event's Data is one of these, encoded as JSON with secrets
// redacted (a json.RawMessage; decode it into the type named by the event's Type).

// ModelRequestData is the Data of a model.request event. The transcript holds every
// message once: each request lists only the messages added since the previous one.
type ModelRequestData struct {
	Turn int `json:"turn"`
	// Final marks the answer-only call made after a budget ran out (no tools).
	Final       bool            `json:"final,omitempty"`
	System      string          `json:"system,omitempty"` // first request only
	Tools       []string        `json:"tools,omitempty"`  // first request only
	NewMessages []model.Message `json:"new_messages"`
	Messages    int             `json:"messages"` // total in the conversation
	MaxTokens   int             `json:"max_tokens,omitempty"`
}

// ModelResponseData is the Data of a model.response event.
type ModelResponseData struct {
	Turn       int              `json:"turn"`
	Final      bool             `json:"final,omitempty"`
	Text       string           `json:"text,omitempty"`
	ToolCalls  []model.ToolCall `json:"tool_calls,omitempty"`
	StopReason model.StopReason `json:"stop_reason"`
	Model      string           `json:"model,omitempty"`
	Usage      model.Usage      `json:"usage"`
	DurationMS int64            `json:"duration_ms"`
	// TotalCostUSD is the run's spend so far.
	TotalCostUSD float64 `json:"total_cost_usd"`
}

// ToolCallData is the Data of a tool.call event.
type ToolCallData struct {
	Turn   int             `json:"turn"`
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Input  json.RawMessage `json:"input"`
}

// ToolResultData is the Data of a tool.result event.
type ToolResultData struct {
	Turn    int    `json:"turn"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	IsError bool   `json:"is_error,omitempty"`
	// Output is what the model saw (cut to the output limit).
	Output string `json:"output"`
	// OutputBytes is the size of the whole output; OutputFile (relative to the report
	// directory) holds it when it was cut.
	OutputBytes int    `json:"output_bytes"`
	OutputFile  string `json:"output_file,omitempty"`
	ExitCode    *int   `json:"exit_code,omitempty"`
	DurationMS  int64  `json:"duration_ms"`
}

// ToolDeniedData is the Data of a tool.denied event.
type ToolDeniedData struct {
	Turn   int             `json:"turn"`
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Input  json.RawMessage `json:"input"`
	Reason string          `json:"reason"`
	Mode   string          `json:"mode"`
}

// WarningData is the Data of a warning event.
type WarningData struct {
	// Kind: retry, budget, empty_answer, refusal, max_tokens, denials, cost_unknown,
	// final_answer_failed, sandbox.
	Kind string `json:"kind"`
}

// recorder sends events to the sink and appends them to transcript.jsonl, redacted.
type recorder struct {
	sink   events.Sink
	redact Redactor
	path   string // "" = no transcript

	mu   sync.Mutex
	file *os.File
	err  error // first write error, reported once
}

func newRecorder(sink events.Sink, redact Redactor, reportDir string) *recorder {
	if sink == nil {
		sink = events.Discard
	}
	r := &recorder{sink: sink, redact: redact}
	if reportDir != "" {
		r.path = filepath.Join(reportDir, "transcript.jsonl")
	}
	return r
}

// emit records one event. Data is marshalled, redacted and kept as raw JSON.
func (r *recorder) emit(typ events.Type, msg string, data any) {
	ev := events.Event{Time: time.Now(), Type: typ, Stage: result.StageAgent, Message: r.redact.Redact(msg)}
	if data != nil {
		raw, err := json.Marshal(data)
		if err != nil {
			raw, _ = json.Marshal(map[string]string{"encode_error": err.Error()})
		}
		ev.Data = json.RawMessage(r.redact.Redact(string(raw)))
	}
	r.sink.Emit(ev)
	r.write(ev)
}

func (r *recorder) write(ev events.Event) {
	if r.path == "" {
		return
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil && r.err == nil {
		if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
			r.fail(err)
			return
		}
		f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			r.fail(err)
			return
		}
		r.file = f
	}
	if r.file == nil {
		return
	}
	if _, err := r.file.Write(append(line, '\n')); err != nil {
		r.fail(err)
	}
}

// fail reports the first transcript failure on the sink (never fatal: the events still
// flow) and stops writing. Called with mu held.
func (r *recorder) fail(err error) {
	if r.err != nil {
		return
	}
	r.err = err
	if r.file != nil {
		r.file.Close()
		r.file = nil
	}
	msg := r.redact.Redact(fmt.Sprintf("transcript %s cannot be written: %v", r.path, err))
	raw, _ := json.Marshal(WarningData{Kind: "transcript"})
	r.sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageAgent, Message: msg, Data: json.RawMessage(raw)})
}

// close flushes and closes the transcript; a later emit reopens it for appending.
func (r *recorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file != nil {
		r.file.Close()
		r.file = nil
	}
}

// warn emits a warning event.
func (r *recorder) warn(kind, format string, args ...any) {
	r.emit(events.Warning, fmt.Sprintf(format, args...), WarningData{Kind: kind})
}

// finding emits a finding event.
func (r *recorder) finding(f result.Finding) {
	where := f.Path
	if f.StartLine > 0 {
		where = fmt.Sprintf("%s:%d", f.Path, f.StartLine)
	}
	r.emit(events.Finding, fmt.Sprintf("%s %s: %s", f.Severity, where, f.Title), f)
}
