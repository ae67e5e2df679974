package modeltest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/agent/model/modeltest"
)

// streamed is the answer to a streaming request; the body is closed when the test ends.
type streamed struct {
	status      int
	contentType string
	body        io.Reader
}

// streamRequest posts a minimal streaming Messages request.
func streamRequest(t *testing.T, srv *modeltest.Server) streamed {
	t.Helper()
	body := `{"model":"claude-test","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}],
		"tools":[{"name":"execute","input_schema":{"type":"object"}}]}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return streamed{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: resp.Body}
}

type wireEvent struct {
	name string
	data map[string]any
}

// readEvents parses a text/event-stream as a client would, returning the events and
// the read error that ended it (nil for a clean end).
func readEvents(t *testing.T, r io.Reader) ([]wireEvent, error) {
	t.Helper()
	var events []wireEvent
	sc := bufio.NewScanner(r)
	var cur wireEvent
	var bad error // a malformed event is only acceptable as the torn end of a broken body
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				events = append(events, cur)
			}
			cur = wireEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				bad = fmt.Errorf("event %s: data is not JSON: %w", cur.name, err)
				continue
			}
			if cur.data["type"] != cur.name {
				t.Errorf("event %s carries type %v", cur.name, cur.data["type"])
			}
		}
	}
	if bad != nil && sc.Err() == nil {
		t.Fatal(bad)
	}
	return events, sc.Err()
}

func names(events []wireEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.name)
	}
	return out
}

// TestStreamWireFormat checks the event sequence on the wire, independently of any SDK.
func TestStreamWireFormat(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
		{Text: "hello world", ToolCalls: []modeltest.ToolCall{{ID: "toolu_1", Name: "execute", Input: json.RawMessage(`{"command":"ls"}`)}}, ChunkSize: 6,
			Usage: modeltest.Usage{InputTokens: 5, OutputTokens: 9, CacheReadTokens: 3}},
		{Text: "partial output", StreamError: "overloaded_error"},
		{Text: "partial output", Drop: true},
	}})
	defer srv.Close()

	resp := streamRequest(t, srv)
	if resp.contentType != "text/event-stream" || resp.status != 200 {
		t.Fatalf("status %d, content type %q", resp.status, resp.contentType)
	}
	events, err := readEvents(t, resp.body)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if diff := cmp.Diff(want, names(events)); diff != "" {
		t.Fatalf("event sequence (-want +got):\n%s", diff)
	}
	var text, input strings.Builder
	for _, e := range events {
		if d, ok := e.data["delta"].(map[string]any); ok && e.name == "content_block_delta" {
			switch d["type"] {
			case "text_delta":
				text.WriteString(d["text"].(string))
			case "input_json_delta":
				input.WriteString(d["partial_json"].(string))
			}
		}
	}
	if text.String() != "hello world" || input.String() != `{"command":"ls"}` {
		t.Errorf("deltas joined = %q and %q", text.String(), input.String())
	}
	start := events[0].data["message"].(map[string]any)
	if u := start["usage"].(map[string]any); u["input_tokens"] != 5.0 || u["cache_read_input_tokens"] != 3.0 {
		t.Errorf("message_start usage = %v", u)
	}
	delta := events[len(events)-2].data
	if delta["delta"].(map[string]any)["stop_reason"] != "tool_use" || delta["usage"].(map[string]any)["output_tokens"] != 9.0 {
		t.Errorf("message_delta = %v", delta)
	}

	events, err = readEvents(t, streamRequest(t, srv).body)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(events); got[len(got)-1] != "error" || got[len(got)-2] != "content_block_delta" {
		t.Errorf("error step sent %v, want an error event right after the first delta", got)
	} else if e := events[len(events)-1].data["error"].(map[string]any); e["type"] != "overloaded_error" {
		t.Errorf("error event = %v", e)
	}

	events, err = readEvents(t, streamRequest(t, srv).body)
	if err == nil || len(events) == 0 || names(events)[len(events)-1] != "content_block_delta" {
		t.Errorf("drop step: events %v, read error %v; want a delta then a broken body", names(events), err)
	}
	if calls := srv.Calls(); len(calls) != 3 || !calls[0].Stream {
		t.Errorf("calls = %d, first streamed = %v", len(calls), len(calls) > 0 && calls[0].Stream)
	}
}
