package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
)

var anthropicFormat = formats[0]

func userTurn(text string) model.Request {
	return model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: text}}, Tools: tools}
}

// TestAnthropicStreamAccumulates: a reply streamed in one-byte deltas arrives whole — text
// with multi-byte characters, two tool calls whose input JSON is split across many
// input_json_delta events, the stop reason, and usage whose input and cache counts come
// from message_start and output count from message_delta. Every chunk is progress.
func TestAnthropicStreamAccumulates(t *testing.T) {
	t.Parallel()
	input1 := `{"command":"printf 'naïve → ok' && ls -la /tmp","timeout":30}`
	input2 := `{"path":"a/b.txt"}`
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{
		Text: "Looking — then reading. ✓",
		ToolCalls: []modeltest.ToolCall{
			{ID: "toolu_a", Name: "execute", Input: json.RawMessage(input1)},
			{ID: "toolu_b", Name: "read_file", Input: json.RawMessage(input2)},
		},
		Usage:     modeltest.Usage{InputTokens: 11, OutputTokens: 77, CacheReadTokens: 1000, CacheWriteTokens: 200},
		ChunkSize: 1,
	}}})
	defer srv.Close()
	m := newModel(t, anthropicFormat, srv)
	var beats atomic.Int64
	ctx := model.WithProgress(t.Context(), func() { beats.Add(1) })
	r, err := m.Complete(ctx, userTurn("go"))
	if err != nil {
		t.Fatal(err)
	}
	if calls := srv.Calls(); len(calls) != 1 || !calls[0].Stream {
		t.Fatalf("calls = %d, stream = %v; want one streamed call", len(calls), len(calls) == 1 && calls[0].Stream)
	}
	if r.Message.Text != "Looking — then reading. ✓" {
		t.Errorf("Text = %q", r.Message.Text)
	}
	if len(r.Message.ToolCalls) != 2 {
		t.Fatalf("ToolCalls = %+v", r.Message.ToolCalls)
	}
	for i, want := range []model.ToolCall{{ID: "toolu_a", Name: "execute", Input: json.RawMessage(input1)}, {ID: "toolu_b", Name: "read_file", Input: json.RawMessage(input2)}} {
		got := r.Message.ToolCalls[i]
		if got.ID != want.ID || got.Name != want.Name || string(got.Input) != string(want.Input) {
			t.Errorf("ToolCalls[%d] = %s %s %s, want %s %s %s", i, got.ID, got.Name, got.Input, want.ID, want.Name, want.Input)
		}
	}
	if r.StopReason != model.StopToolUse {
		t.Errorf("StopReason = %q", r.StopReason)
	}
	wantUsage := model.Usage{InputTokens: 11, OutputTokens: 77, CacheReadTokens: 1000, CacheWriteTokens: 200}
	if got := r.Usage; got.InputTokens != wantUsage.InputTokens || got.OutputTokens != wantUsage.OutputTokens ||
		got.CacheReadTokens != wantUsage.CacheReadTokens || got.CacheWriteTokens != wantUsage.CacheWriteTokens {
		t.Errorf("Usage = %+v, want the tokens of %+v", got, wantUsage)
	}
	if !r.Usage.Priced || r.Usage.CostUSD <= 0 {
		t.Errorf("Usage not priced: %+v", r.Usage)
	}
	if r.ID != "msg_fake_1" || r.Model != "claude-sonnet-4-5" {
		t.Errorf("ID, Model = %q, %q", r.ID, r.Model)
	}
	// About 130 one-byte deltas; the transport may coalesce them into fewer reads.
	if beats.Load() < 2 {
		t.Errorf("progress reported %d times for a streamed reply", beats.Load())
	}
}

// TestAnthropicStreamFaults: a stream that breaks after output started is retried as a
// whole request under the same RetryPolicy as an error before output; what cannot be
// retried is reported clearly, and a partial reply never leaks into the result.
func TestAnthropicStreamFaults(t *testing.T) {
	t.Parallel()
	partial := "This reply is long enough to be cut in the middle of its text."
	ok := modeltest.Step{Text: "complete"}
	cases := []struct {
		name      string
		steps     []modeltest.Step
		wantCalls int
		wantErr   func(t *testing.T, err error)
	}{
		{name: "overloaded error event retried", steps: []modeltest.Step{{Text: partial, StreamError: "overloaded_error", ErrorMessage: "Overloaded"}, ok}, wantCalls: 2},
		{name: "api error event retried", steps: []modeltest.Step{{Text: partial, StreamError: "api_error"}, ok}, wantCalls: 2},
		{name: "dropped stream retried", steps: []modeltest.Step{{Text: partial, Drop: true}, {ToolCalls: []modeltest.ToolCall{{Name: "execute", Input: schema}}, Drop: true}, ok}, wantCalls: 3},
		{name: "invalid request error event fails at once", steps: []modeltest.Step{{Text: partial, StreamError: "invalid_request_error", ErrorMessage: "prompt is too long"}, ok}, wantCalls: 1,
			wantErr: func(t *testing.T, err error) {
				var apiErr *model.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Type != "invalid_request_error" ||
					!strings.Contains(apiErr.Message, "prompt is too long") || !strings.Contains(err.Error(), "mid-stream") {
					t.Errorf("err = %T %v", err, err)
				}
			}},
		{name: "overloaded every time gives up", steps: []modeltest.Step{{Text: partial, StreamError: "overloaded_error", Repeat: true}}, wantCalls: 3,
			wantErr: func(t *testing.T, err error) {
				var apiErr *model.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != 529 || apiErr.Attempts != 3 || !apiErr.Temporary() {
					t.Errorf("err = %T %v, want a temporary 529 after 3 attempts", err, err)
				}
			}},
		{name: "dropped every time gives up", steps: []modeltest.Step{{Text: partial, Drop: true, Repeat: true}}, wantCalls: 3,
			wantErr: func(t *testing.T, err error) {
				var trErr *model.TransportError
				if !errors.As(err, &trErr) || trErr.Attempts != 3 {
					t.Errorf("err = %T %v, want a TransportError after 3 attempts", err, err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: tc.steps})
			defer srv.Close()
			sleep := &recordSleep{}
			m := newModel(t, anthropicFormat, srv, model.WithRetry(model.RetryPolicy{MaxAttempts: 3, Sleep: sleep.sleep}))
			r, err := m.Complete(t.Context(), userTurn("go"))
			if got := len(srv.Calls()); got != tc.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tc.wantCalls)
			}
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; reply %+v", r)
				}
				tc.wantErr(t, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Message.Text != "complete" || len(r.Message.ToolCalls) != 0 {
				t.Errorf("reply = %+v, want only the retried reply", r.Message)
			}
			if len(sleep.got()) != tc.wantCalls-1 {
				t.Errorf("waits = %v, want one per retry", sleep.got())
			}
		})
	}
}

// TestAnthropicStreamProgress: a slowly streamed reply reports progress all along, while
// a stream that went quiet reports none until it is abandoned.
func TestAnthropicStreamProgress(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
		{Text: strings.Repeat("slow ", 8), ChunkSize: 5, EventDelay: modeltest.Duration(20 * time.Millisecond)},
		{Text: "never", Silence: modeltest.Duration(time.Minute)},
	}})
	defer srv.Close()
	m := newModel(t, anthropicFormat, srv)
	var beats atomic.Int64
	ctx := model.WithProgress(t.Context(), func() { beats.Add(1) })
	if _, err := m.Complete(ctx, userTurn("go")); err != nil {
		t.Fatal(err)
	}
	// 14 events, each flushed after a pause: each is its own read.
	if n := beats.Load(); n < 10 {
		t.Errorf("a paced stream of 14 events reported progress %d times", n)
	}
	beats.Store(0)
	var last atomic.Int64
	quiet := model.WithProgress(t.Context(), func() { beats.Add(1); last.Store(time.Now().UnixNano()) })
	ctx, cancel := context.WithTimeout(quiet, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Complete(ctx, userTurn("go"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the deadline", err)
	}
	if beats.Load() == 0 {
		t.Fatal("the opening events of the quiet stream reported no progress")
	}
	// No progress while the stream was silent: the last one came well before the end.
	if silent := time.Since(time.Unix(0, last.Load())); silent < time.Since(start)/2 {
		t.Errorf("last progress %v before the end of a %v call that was silent after its opening events", silent, time.Since(start))
	}
}

// TestAnthropicStreamRestartedMessage: a stream that sends a second message_start after a
// tool call's input began (a broken gateway splicing two replies) fails the attempt as a
// transport error instead of crashing on the input of a block the restart dropped.
func TestAnthropicStreamRestartedMessage(t *testing.T) {
	t.Parallel()
	start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}`
	events := []string{
		"event: message_start\ndata: " + start,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"execute","input":{}}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}`,
		"event: message_start\ndata: " + start,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "%s\n\n", e)
		}
	}))
	defer srv.Close()
	m, err := model.New("anthropic:claude-sonnet-4-5", srv.URL, func(k string) string {
		if k == "ANTHROPIC_API_KEY" {
			return testKey
		}
		return ""
	}, model.WithRetry(model.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(t.Context(), userTurn("go"))
	var te *model.TransportError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "message_start") {
		t.Fatalf("Complete = %v, want a transport error about the repeated message_start", err)
	}
}
