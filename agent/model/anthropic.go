package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// anthropicWire speaks the Anthropic Messages API (POST /v1/messages with "stream": true)
// through the official SDK, accumulating the server-sent events into one reply.
//
// Streaming lets the caller see progress (see WithProgress): every byte of the event
// stream, pings included, counts, so a model that is slowly writing a long reply is told
// apart from a connection that went silent. A stream that breaks, whether before or after
// output started (a dropped connection, an "error" event such as overloaded_error), fails
// the attempt as a whole: the partial reply is discarded and RetryPolicy decides, exactly
// as for an error before any output, whether the request (which is idempotent) is sent
// again.
type anthropicWire struct {
	client    anthropic.Client
	model     string
	maxTokens int
	caching   bool
}

func newAnthropic(name, baseURL, key string, hc *http.Client, cfg config) *anthropicWire {
	opts := []option.RequestOption{
		// Credentials and endpoint come from New's getenv only, never from the process
		// environment (ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN, profiles).
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // RetryPolicy retries
		option.WithAPIKey(key),
		// One attempt, stream included, is bounded by this and by the caller's context.
		option.WithRequestTimeout(cfg.requestTimeout),
		option.WithMiddleware(reportProgress),
	}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	return &anthropicWire{
		client:    anthropic.NewClient(opts...),
		model:     name,
		maxTokens: cfg.maxTokens,
		caching:   cfg.promptCaching,
	}
}

func (w *anthropicWire) complete(ctx context.Context, req Request) (Response, error) {
	params, err := w.params(req)
	if err != nil {
		return Response{}, err
	}
	stream := w.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	// The tool inputs as streamed: Accumulate replaces input that is not valid JSON with
	// {}, but the agent must see malformed arguments to report them to the model.
	inputs := map[int64][]byte{}
	started, stopped := false, false
	for stream.Next() {
		ev := stream.Current()
		if !started && ev.Type != "message_start" {
			return Response{}, &TransportError{Provider: "anthropic", Err: fmt.Errorf("event stream began with %q, not message_start", ev.Type)}
		}
		if started && ev.Type == "message_start" {
			// A second start would reset the content the streamed tool inputs index into.
			return Response{}, &TransportError{Provider: "anthropic", Err: errors.New("event stream sent a second message_start")}
		}
		started = true
		if err := msg.Accumulate(ev); err != nil {
			return Response{}, &TransportError{Provider: "anthropic", Err: fmt.Errorf("malformed event stream: %w", err)}
		}
		switch ev.Type {
		case "content_block_delta":
			if ev.Delta.Type == "input_json_delta" {
				inputs[ev.Index] = append(inputs[ev.Index], ev.Delta.PartialJSON...)
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return Response{}, anthropicError(ctx, err)
	}
	if !started {
		return Response{}, &TransportError{Provider: "anthropic", Err: errors.New("the response held no stream events (does this endpoint support \"stream\": true?)")}
	}
	if !stopped {
		// A body that ends cleanly but early (a proxy closing the connection between
		// events) is as broken as a reset.
		return Response{}, &TransportError{Provider: "anthropic", Err: errors.New("event stream ended before message_stop")}
	}
	for i, in := range inputs {
		msg.Content[i].Input = in
	}
	return anthropicResponse(&msg), nil
}

// reportProgress makes every read of a response body a sign of progress for the call's
// context (see WithProgress).
func reportProgress(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if fn := progressFunc(req.Context()); fn != nil && resp != nil && resp.Body != nil {
		resp.Body = &progressBody{ReadCloser: resp.Body, progress: fn}
	}
	return resp, err
}

type progressBody struct {
	io.ReadCloser
	progress func()
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.progress()
	}
	return n, err
}

func (w *anthropicWire) params(req Request) (anthropic.MessageNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = w.maxTokens
	}
	p := anthropic.MessageNewParams{
		Model:     w.model,
		MaxTokens: int64(maxTokens),
		Messages:  anthropicMessages(req.Messages),
	}
	ephemeral := anthropic.NewCacheControlEphemeralParam()
	if req.System != "" {
		block := anthropic.TextBlockParam{Text: req.System}
		if w.caching {
			block.CacheControl = ephemeral
		}
		p.System = []anthropic.TextBlockParam{block}
	}
	for i, t := range req.Tools {
		schema, err := anthropicSchema(t.Schema)
		if err != nil {
			return p, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		tp := anthropic.ToolParam{
			Name:        t.Name,
			Description: anthropic.String(t.Description),
			InputSchema: schema,
		}
		if w.caching && i == len(req.Tools)-1 {
			tp.CacheControl = ephemeral
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	if len(req.Tools) > 0 {
		switch req.ToolChoice {
		case ToolChoiceNone:
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
		case ToolChoiceRequired:
			p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
		}
	}
	if w.caching && len(p.Messages) > 0 {
		// A moving breakpoint on the newest block: the next turn reads everything up to
		// here from the cache.
		last := &p.Messages[len(p.Messages)-1]
		if n := len(last.Content); n > 0 {
			setCacheControl(&last.Content[n-1], ephemeral)
		}
	}
	return p, nil
}

func setCacheControl(b *anthropic.ContentBlockParamUnion, cc anthropic.CacheControlEphemeralParam) {
	switch {
	case b.OfText != nil:
		b.OfText.CacheControl = cc
	case b.OfToolResult != nil:
		b.OfToolResult.CacheControl = cc
	case b.OfToolUse != nil:
		b.OfToolUse.CacheControl = cc
	}
}

// anthropicSchema splits a JSON Schema object into the SDK's input schema shape.
func anthropicSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var s anthropic.ToolInputSchemaParam
	if len(raw) == 0 {
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	if props, ok := m["properties"]; ok {
		s.Properties = props
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		if k == "properties" || k == "required" || k == "type" {
			continue
		}
		if s.ExtraFields == nil {
			s.ExtraFields = map[string]any{}
		}
		s.ExtraFields[k] = v
	}
	return s, nil
}

// anthropicMessages converts the conversation, merging consecutive messages of one role
// (the API wants strict alternation) and dropping blocks the API rejects (empty text).
func anthropicMessages(msgs []Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	for _, m := range msgs {
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case RoleAssistant:
			if strings.TrimSpace(m.Text) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, objectOrEmpty(c.Input), c.Name))
			}
		default:
			// Tool results must open the user message.
			for _, r := range m.ToolResults {
				content := r.Content
				if strings.TrimSpace(content) == "" {
					content = "(no output)"
				}
				blocks = append(blocks, anthropic.NewToolResultBlock(r.CallID, content, r.IsError))
			}
			if strings.TrimSpace(m.Text) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
		}
		if len(blocks) == 0 {
			continue
		}
		role := anthropic.MessageParamRoleUser
		if m.Role == RoleAssistant {
			role = anthropic.MessageParamRoleAssistant
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: blocks})
	}
	return out
}

// objectOrEmpty returns raw when it is a JSON object, else {} (the API requires an object
// for tool_use input; a malformed input was already reported to the model as an error).
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	trimmed := strings.TrimSpace(string(raw))
	if strings.HasPrefix(trimmed, "{") && json.Valid(raw) {
		return raw
	}
	return json.RawMessage("{}")
}

func anthropicResponse(msg *anthropic.Message) Response {
	var texts []string
	var calls []ToolCall
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			calls = append(calls, ToolCall{ID: b.ID, Name: b.Name, Input: validJSON(b.Input)})
		}
	}
	stop := StopOther
	switch msg.StopReason {
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		stop = StopEndTurn
	case anthropic.StopReasonToolUse:
		stop = StopToolUse
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		stop = StopMaxTokens
	case anthropic.StopReasonRefusal:
		stop = StopRefusal
	}
	if len(calls) > 0 && stop != StopMaxTokens {
		stop = StopToolUse
	}
	return Response{
		Message: Message{Role: RoleAssistant, Text: strings.Join(texts, "\n"), ToolCalls: calls},
		Usage: Usage{
			InputTokens:      msg.Usage.InputTokens,
			CacheReadTokens:  msg.Usage.CacheReadInputTokens,
			CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
			OutputTokens:     msg.Usage.OutputTokens,
		},
		StopReason: stop,
		Model:      msg.Model,
		ID:         msg.ID,
	}
}

// validJSON returns raw if it is valid JSON, "{}" if empty, and otherwise raw as a JSON
// string, so a Message always marshals.
func validJSON(raw []byte) json.RawMessage {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return json.RawMessage("{}")
	}
	if json.Valid(raw) {
		return json.RawMessage(raw)
	}
	s, _ := json.Marshal(string(raw))
	return s
}

func anthropicError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		e := &APIError{Provider: "anthropic", Status: apiErr.StatusCode, RequestID: apiErr.RequestID}
		e.Type, e.Message = errorBody(apiErr.RawJSON())
		if e.Status == http.StatusOK {
			// An "error" event inside a 200 stream: give it the status the same error
			// has before a stream starts, so RetryPolicy treats both alike.
			e.Status = streamErrorStatus(e.Type)
			e.Message = "error event mid-stream: " + e.Message
		}
		if apiErr.Response != nil {
			e.RetryAfter = parseRetryAfter(apiErr.Response.Header, time.Now())
			if e.RequestID == "" {
				e.RequestID = apiErr.Response.Header.Get("Request-Id")
			}
		}
		return e
	}
	return &TransportError{Provider: "anthropic", Err: err}
}

// streamErrorStatus maps the type of an error event to the HTTP status the API uses for
// that error type (https://docs.anthropic.com/en/api/errors).
func streamErrorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	}
	return http.StatusInternalServerError // api_error and types unknown today
}

// errorBody extracts the type and message of an error body in either provider's shape:
// {"type":"error","error":{"type":..,"message":..}} or {"error":{"message":..,"type":..}}
// or the inner object alone. Anything else is returned as the message, shortened.
func errorBody(raw string) (typ, msg string) {
	var body struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Error   *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) == nil {
		if body.Error != nil && (body.Error.Message != "" || body.Error.Type != "") {
			typ = body.Error.Type
			if typ == "" {
				if c, ok := body.Error.Code.(string); ok {
					typ = c
				}
			}
			return typ, body.Error.Message
		}
		if body.Message != "" {
			return body.Type, body.Message
		}
	}
	raw = strings.TrimSpace(raw)
	if len(raw) > 500 {
		raw = raw[:500] + "…"
	}
	return "", raw
}
