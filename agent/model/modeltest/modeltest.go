// Package modeltest is a scripted fake model server that speaks the real wire formats of
// the Anthropic Messages API and the OpenAI Chat Completions API, so tests run the official
// SDK clients (and the real talkops binary) against it over loopback HTTP.
//
// One Server answers both formats from one script:
//
//   - POST /v1/messages (Anthropic; base URL = Server.URL). Covered request fields: model,
//     max_tokens, system (string or text blocks), messages with text, tool_use and
//     tool_result blocks (content as string or blocks, is_error), tools (name,
//     description, input_schema), tool_choice, cache_control on system, tool and message
//     blocks (recorded in Call.CacheBreakpoints), the x-api-key and anthropic-version
//     headers. Response: a
//     "message" object with text and tool_use content blocks, stop_reason (end_turn,
//     tool_use, max_tokens, refusal) and usage with input_tokens, output_tokens,
//     cache_creation_input_tokens and cache_read_input_tokens; errors as
//     {"type":"error","error":{"type","message"}} with request-id.
//   - POST /v1/chat/completions (OpenAI; base URL = Server.URL + "/v1"). Covered request
//     fields: model, messages (system, developer, user, assistant with tool_calls, tool
//     with tool_call_id; content as string or text parts), tools (function name,
//     description, parameters), tool_choice, max_tokens / max_completion_tokens, the
//     Authorization: Bearer header. Response: a "chat.completion" with one choice whose
//     message has content, refusal and function tool_calls (arguments as a JSON string,
//     sent verbatim so tests can send malformed JSON), finish_reason (stop, tool_calls,
//     length, content_filter) and usage with prompt_tokens_details.cached_tokens; errors
//     as {"error":{"message","type","param","code"}} with x-request-id.
//
// Anthropic streaming ("stream": true, which the talkops client always uses) is answered
// with a text/event-stream in the API's event sequence: message_start (id, model, usage
// with input and cache tokens), a ping, then per content block content_block_start,
// content_block_delta (text_delta, or input_json_delta carrying the tool input JSON in
// pieces of Step.ChunkSize bytes, sent verbatim so it can be malformed) and
// content_block_stop, then message_delta (stop_reason, output_tokens) and message_stop.
// Faults in a stream come after the first content delta, once output has started: an
// "error" event (Step.StreamError, e.g. overloaded_error) or a connection cut in the
// middle of a chunk (Step.Drop). Step.EventDelay paces the events (a slow model) and
// Step.Silence pauses after the opening events (a stream that went quiet). Error statuses
// (Step.Status) are plain JSON answers before any stream, as the API sends them. Not
// covered: thinking, citations and server-tool blocks, and OpenAI streaming (an OpenAI
// request with "stream": true is answered with 400). Both formats check
// what the real APIs check and a client could get wrong — roles alternate (Anthropic),
// every tool call is answered by a tool result with its id, no empty text blocks, tools
// are defined when the history holds tool blocks — and answer 400 invalid_request_error
// otherwise.
//
// Scripts are a list of Steps, one per call (or a Responder func of the recorded call).
// A Step is a reply (text, tool calls, usage, stop reason) or a fault: an error status
// with headers such as Retry-After, a dropped connection (headers and half a body, then
// the connection is closed), or a delay. LoadScript reads a script from a JSON file (the
// Step field names in lower snake case), and the fakemodel command in this directory
// serves one from another process.
package modeltest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/agent/model"
)

// Script is the sequence of answers a Server gives, one Step per call.
type Script struct {
	Steps []Step `json:"steps"`
}

// Step is one answer: a reply, or a fault when Status or Drop is set.
type Step struct {
	// Text is the assistant's text.
	Text string `json:"text,omitempty"`
	// ToolCalls are the tools the assistant calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Refusal makes the reply a refusal (Anthropic stop_reason "refusal"; OpenAI message
	// "refusal" with finish_reason "stop").
	Refusal bool `json:"refusal,omitempty"`
	// StopReason overrides the stop reason in the provider-neutral vocabulary (end_turn,
	// tool_use, max_tokens, refusal).
	StopReason string `json:"stop_reason,omitempty"`
	// Usage is reported as is; when zero, tokens are estimated from the sizes (4 bytes a
	// token) with no cache use.
	Usage Usage `json:"usage,omitzero"`

	// Status, when non-zero, answers with this HTTP error status and a provider-shaped
	// error body with ErrorType and ErrorMessage (defaults derived from the status).
	Status       int    `json:"status,omitempty"`
	ErrorType    string `json:"error_type,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	// Headers are added to the response (e.g. "Retry-After": "1").
	Headers map[string]string `json:"headers,omitempty"`
	// Drop sends a 200 status, headers and part of the body, then closes the connection.
	// A streamed reply is cut after its first content delta, so output has started.
	Drop bool `json:"drop,omitempty"`
	// Delay waits this long before answering, or until the client goes away.
	Delay Duration `json:"delay,omitempty"`

	// The fields below shape a streamed (Anthropic "stream": true) reply only.

	// StreamError ends the stream after its first content delta with an error event of
	// this type (e.g. "overloaded_error") and the message ErrorMessage.
	StreamError string `json:"stream_error,omitempty"`
	// ChunkSize is how many bytes of text or tool input JSON one delta carries
	// (default 16).
	ChunkSize int `json:"chunk_size,omitempty"`
	// EventDelay is the pause before every event after the first: a model writing slowly.
	EventDelay Duration `json:"event_delay,omitempty"`
	// Silence is a pause after message_start and the first ping, before any content: a
	// stream that started, then went quiet.
	Silence Duration `json:"silence,omitempty"`
	// Repeat keeps answering with this step for every later call.
	Repeat bool `json:"repeat,omitempty"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	// ID defaults to toolu_N / call_N.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Input is the arguments object.
	Input json.RawMessage `json:"input,omitempty"`
	// RawArguments, when set, is sent instead of Input verbatim: as OpenAI's arguments
	// string, and as an Anthropic input that is a JSON string rather than an object.
	// Use it to send malformed arguments.
	RawArguments string `json:"raw_arguments,omitempty"`
}

// Usage is the token usage a step reports.
type Usage struct {
	InputTokens      int64 `json:"input_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens,omitempty"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Duration is a time.Duration that reads "1.5s" or a number of seconds from JSON.
type Duration time.Duration

// UnmarshalJSON accepts "250ms", "2s" or 2.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration: want a string like \"2s\" or a number of seconds, got %s", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a string like "2s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Call is one request the server received.
type Call struct {
	// N is the call's number, from 1.
	N int `json:"n"`
	// Time is when the request arrived.
	Time time.Time `json:"time"`
	// Format is "anthropic" or "openai".
	Format string      `json:"format"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"-"`
	// Request is the body decoded into the provider-neutral shape (nil if it did not parse).
	Request *model.Request `json:"request,omitempty"`
	// Model is the model named in the body.
	Model string `json:"model"`
	// CacheBreakpoints names the blocks that carried cache_control (Anthropic):
	// "system", "tools[i]", "messages[i].content[j]".
	CacheBreakpoints []string `json:"cache_breakpoints,omitempty"`
	// MaxTokens is max_tokens or max_completion_tokens.
	MaxTokens int `json:"max_tokens"`
	// ToolChoice is the tool_choice type ("" when absent).
	ToolChoice string `json:"tool_choice,omitempty"`
	// Stream is set when the request asked for a streamed reply ("stream": true).
	Stream bool `json:"stream,omitempty"`
	// Invalid is the reason the request was rejected with 400, if it was.
	Invalid string `json:"invalid,omitempty"`
}

// Responder chooses the answer to a call; Server.Calls has every earlier call.
type Responder func(c Call) Step

// Server is a running fake. Close it when done.
type Server struct {
	// URL is the base URL for the Anthropic SDK; OpenAIURL is the one for OpenAI's.
	URL string

	srv     *httptest.Server
	respond Responder
	apiKey  string

	mu    sync.Mutex
	calls []Call
	rec   *os.File
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the server answer 401 unless the request carries key (x-api-key for
// Anthropic, Authorization: Bearer for OpenAI).
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithRecord appends every call, as a JSON line, to the file at path.
func WithRecord(path string) Option {
	return func(s *Server) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			s.rec = f
		}
	}
}

// NewServer starts a server on 127.0.0.1 that answers with script's steps in order. After
// the last step (unless it repeats) every call gets 400 "script exhausted".
func NewServer(script Script, opts ...Option) *Server {
	return NewServerFunc(scripted(script), opts...)
}

func scripted(script Script) Responder {
	var mu sync.Mutex
	next := 0
	return func(Call) Step {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(script.Steps) {
			return Step{Status: http.StatusBadRequest, ErrorType: "invalid_request_error",
				ErrorMessage: fmt.Sprintf("modeltest: script exhausted after %d steps", len(script.Steps))}
		}
		st := script.Steps[next]
		if !st.Repeat {
			next++
		}
		return st
	}
}

// NewServerFunc starts a server on 127.0.0.1 that asks respond for every answer.
func NewServerFunc(respond Responder, opts ...Option) *Server {
	s, mux := newServer(respond, opts)
	// httptest listens on 127.0.0.1 by default.
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Listen starts a server like NewServer on addr ("127.0.0.1:0" picks a free port), for
// the fakemodel command and other processes.
func Listen(addr string, script Script, opts ...Option) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	s, mux := newServer(scripted(script), opts)
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

func newServer(respond Responder, opts []Option) (*Server, *http.ServeMux) {
	s := &Server{respond: respond}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.handle("anthropic"))
	mux.HandleFunc("POST /v1/chat/completions", s.handle("openai"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("modeltest: no endpoint %s %s (have POST /v1/messages, POST /v1/chat/completions)", r.Method, r.URL.Path), http.StatusNotFound)
	})
	return s, mux
}

// OpenAIURL is the base URL for the OpenAI SDK (URL + "/v1").
func (s *Server) OpenAIURL() string { return s.URL + "/v1" }

// Close stops the server and waits for its handlers.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec != nil {
		s.rec.Close()
		s.rec = nil
	}
}

// Calls returns the calls received so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// LoadScript reads a Script from a JSON file.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("read script: %w", err)
	}
	var sc Script
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return Script{}, fmt.Errorf("script %s: %w (fields: see modeltest.Step)", path, err)
	}
	for i, st := range sc.Steps {
		for j, tc := range st.ToolCalls {
			if tc.Name == "" {
				return Script{}, fmt.Errorf("script %s: steps[%d].tool_calls[%d]: name is required", path, i, j)
			}
		}
	}
	return sc, nil
}

func (s *Server) handle(format string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c := Call{Time: time.Now(), Format: format, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
		var invalid string
		if format == "anthropic" {
			invalid = decodeAnthropic(body, &c)
			if invalid == "" && r.Header.Get("Anthropic-Version") == "" {
				invalid = "anthropic-version: header is required"
			}
		} else {
			invalid = decodeOpenAI(body, &c)
		}
		if invalid == "" && s.apiKey != "" && !s.authorized(format, r) {
			s.record(&c)
			writeError(w, format, Step{Status: http.StatusUnauthorized})
			return
		}
		c.Invalid = invalid
		s.record(&c)
		if invalid != "" {
			writeError(w, format, Step{Status: http.StatusBadRequest, ErrorType: "invalid_request_error", ErrorMessage: invalid})
			return
		}
		st := s.respond(c)
		if st.Delay > 0 {
			t := time.NewTimer(time.Duration(st.Delay))
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		for k, v := range st.Headers {
			w.Header().Set(k, v)
		}
		switch {
		case format == "anthropic" && c.Stream && st.Status == 0:
			streamAnthropic(w, r, c, st)
		case st.Drop:
			drop(w, format)
		case st.Status != 0:
			writeError(w, format, st)
		case format == "anthropic":
			writeJSON(w, "request-id", fmt.Sprintf("req_fake_%d", c.N), anthropicReply(c, st))
		default:
			writeJSON(w, "x-request-id", fmt.Sprintf("req_fake_%d", c.N), openAIReply(c, st))
		}
	}
}

func readBody(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(r.Body).WriteTo(&b); err != nil {
		return nil, fmt.Errorf("modeltest: read body: %w", err)
	}
	return []byte(b.String()), nil
}

func (s *Server) authorized(format string, r *http.Request) bool {
	if format == "anthropic" {
		return r.Header.Get("X-Api-Key") == s.apiKey
	}
	return r.Header.Get("Authorization") == "Bearer "+s.apiKey
}

func (s *Server) record(c *Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.N = len(s.calls) + 1
	s.calls = append(s.calls, *c)
	if s.rec != nil {
		line, err := json.Marshal(c)
		if err == nil {
			_, _ = s.rec.Write(append(line, '\n')) // the record is a debugging aid, best effort like opening it
		}
	}
}

func writeJSON(w http.ResponseWriter, idHeader, id string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "modeltest: encode reply: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(idHeader, id)
	w.Write(data)
}

// hijack takes over the connection under w so a handler can break it mid-response; ok
// is false (and w answered 500 when it cannot be taken over) otherwise.
func hijack(w http.ResponseWriter) (conn net.Conn, buf *bufio.ReadWriter, ok bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "modeltest: cannot drop the connection (no hijacker)", http.StatusInternalServerError)
		return nil, nil, false
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return nil, nil, false
	}
	return conn, buf, true
}

// drop hijacks the connection, sends a 200 with a Content-Length longer than what follows,
// and closes it: the client sees the connection die mid-response.
func drop(w http.ResponseWriter, format string) {
	conn, buf, ok := hijack(w)
	if !ok {
		return
	}
	defer conn.Close()
	partial := `{"id":"msg_dropped","type":"message","content":[{"type":"text","text":"half`
	if format == "openai" {
		partial = `{"id":"chatcmpl-dropped","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"half`
	}
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(partial)+500, partial)
	buf.Flush()
}

func writeError(w http.ResponseWriter, format string, st Step) {
	typ, msg := st.ErrorType, st.ErrorMessage
	if typ == "" {
		typ = defaultErrorType(format, st.Status)
	}
	if msg == "" {
		msg = fmt.Sprintf("modeltest: scripted %d %s", st.Status, http.StatusText(st.Status))
		if st.Status == http.StatusUnauthorized {
			msg = "invalid x-api-key"
			if format == "openai" {
				msg = "Incorrect API key provided."
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	var body any
	if format == "anthropic" {
		w.Header().Set("request-id", "req_fake_error")
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	} else {
		w.Header().Set("x-request-id", "req_fake_error")
		code := any(nil)
		if st.Status == http.StatusUnauthorized {
			code = "invalid_api_key"
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	}
	data, _ := json.Marshal(body)
	w.WriteHeader(st.Status)
	w.Write(data)
}

func defaultErrorType(format string, status int) string {
	switch {
	case status == 401:
		if format == "openai" {
			return "invalid_request_error"
		}
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 429:
		if format == "openai" {
			return "rate_limit_exceeded"
		}
		return "rate_limit_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// estimate returns the usage a step reports: its own, or one estimated from sizes.
func estimate(c Call, st Step) Usage {
	if st.Usage != (Usage{}) {
		return st.Usage
	}
	out := int64(len(st.Text)/4 + 1)
	for _, tc := range st.ToolCalls {
		out += int64(len(tc.Input)/4 + len(tc.RawArguments)/4 + 10)
	}
	return Usage{InputTokens: int64(len(c.Body)/4 + 1), OutputTokens: out}
}

func callID(prefix string, callN, i int, id string) string {
	if id != "" {
		return id
	}
	return fmt.Sprintf("%s%d_%d", prefix, callN, i+1)
}
