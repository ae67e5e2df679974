// Package events is the typed stream of what happens during a run. The runner, the agent
// and the rubric emit events; the stream-json output, the progress display, the logs and
// GitHub's ::group:: folding are all views of the same stream.
package events

import (
	"sync"
	"time"

	"github.com/talkops/talkops/result"
)

// Type names an event kind. The values are part of the stream-json format: add, never rename.
type Type string

// Event kinds.
const (
	RunStarted       Type = "run.started"
	RunFinished      Type = "run.finished"
	StageStarted     Type = "stage.started"
	StageFinished    Type = "stage.finished"
	Output           Type = "output" // a line of command output (setup script, check)
	SyncProgress     Type = "sync.progress"
	CheckStarted     Type = "check.started"
	CheckFinished    Type = "check.finished"
	ModelRequest     Type = "model.request"
	ModelResponse    Type = "model.response"
	ToolCall         Type = "tool.call"
	ToolResult       Type = "tool.result"
	ToolDenied       Type = "tool.denied"
	RubricItem       Type = "rubric.item"
	Finding          Type = "finding"
	TeardownStarted  Type = "teardown.started"
	TeardownFinished Type = "teardown.finished"
	Warning          Type = "warning"
)

// Event is one thing that happened. Data holds the kind-specific payload and must marshal
// to JSON; it never contains secrets (emitters redact before emitting).
type Event struct {
	Time    time.Time        `json:"time"`
	Type    Type             `json:"type"`
	Stage   result.StageName `json:"stage,omitempty"`
	Message string           `json:"message,omitempty"`
	Data    any              `json:"data,omitempty"`
}

// Sink receives events. Emit must not block for long and must be safe for concurrent use.
type Sink interface {
	Emit(Event)
}

// Func adapts a function to a Sink.
type Func func(Event)

// Emit calls f(e).
func (f Func) Emit(e Event) { f(e) }

// Discard drops every event.
var Discard Sink = Func(func(Event) {})

// Multi fans events out to several sinks, in order, one event at a time.
func Multi(sinks ...Sink) Sink {
	m := &multi{sinks: sinks}
	return m
}

type multi struct {
	mu    sync.Mutex
	sinks []Sink
}

func (m *multi) Emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sinks {
		s.Emit(e)
	}
}
