package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/talkops/talkops/agent/model"
)

type aCacheControl struct {
	Type string `json:"type"`
}

type aRequest struct {
	Model      string          `json:"model"`
	MaxTokens  *int            `json:"max_tokens"`
	System     json.RawMessage `json:"system"`
	Messages   []aMessage      `json:"messages"`
	Tools      []aTool         `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
	} `json:"tool_choice"`
	Stream bool `json:"stream"`
}

type aMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type aBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	CacheControl *aCacheControl  `json:"cache_control"`
}

type aTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *aCacheControl  `json:"cache_control"`
}

// blocks reads message content given as a string or as an array of blocks.
func blocks(raw json.RawMessage) ([]aBlock, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []aBlock{{Type: "text", Text: s}}, nil
	}
	var bs []aBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("content must be a string or an array of content blocks")
	}
	return bs, nil
}

// textOf joins the text of a tool_result content (a string or text blocks).
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	bs, err := blocks(raw)
	if err != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// decodeAnthropic fills c from a Messages API body and returns why the real API would
// reject it ("" if it would not). c keeps what was read before a rejection.
func decodeAnthropic(body []byte, c *Call) string {
	var req aRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "request body is not valid JSON: " + err.Error()
	}
	c.Model = req.Model
	c.Stream = req.Stream
	if req.MaxTokens != nil {
		c.MaxTokens = *req.MaxTokens
	}
	if req.ToolChoice != nil {
		c.ToolChoice = req.ToolChoice.Type
	}
	out := &model.Request{}
	c.Request = out
	switch {
	case req.Model == "":
		return "model: Field required"
	case req.MaxTokens == nil || *req.MaxTokens <= 0:
		return "max_tokens: Field required and must be positive"
	case len(req.Messages) == 0:
		return "messages: at least one message is required"
	}

	d := anthropicDecoder{c: c, out: out}
	if why := d.system(req.System); why != "" {
		return why
	}
	if why := d.tools(req.Tools); why != "" {
		return why
	}
	switch c.ToolChoice {
	case "none":
		out.ToolChoice = model.ToolChoiceNone
	case "any":
		out.ToolChoice = model.ToolChoiceRequired
	}
	out.MaxTokens = *req.MaxTokens
	for i := range req.Messages {
		if why := d.message(req.Messages, i); why != "" {
			return why
		}
	}
	if len(d.pendingUses) > 0 && req.Messages[len(req.Messages)-1].Role == "assistant" {
		return "messages: the final assistant message has tool_use blocks without results"
	}
	if d.hasToolBlocks && len(req.Tools) == 0 {
		return "Requests which include `tool_use` or `tool_result` blocks must define tools."
	}
	if n := len(c.CacheBreakpoints); n > 4 {
		return fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", n)
	}
	return ""
}

// anthropicDecoder carries what decodeAnthropic learns across the parts of a request:
// cache breakpoints go to c, the decoded request to out, and the tool_use ids of the
// previous message wait for their results.
type anthropicDecoder struct {
	c             *Call
	out           *model.Request
	pendingUses   []string
	hasToolBlocks bool
}

// system reads the system prompt, a string or an array of text blocks.
func (d *anthropicDecoder) system(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		d.out.System = s
		return ""
	}
	var bs []aBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return "system: must be a string or an array of text blocks"
	}
	var parts []string
	for _, b := range bs {
		parts = append(parts, b.Text)
		if b.CacheControl != nil {
			d.c.CacheBreakpoints = append(d.c.CacheBreakpoints, "system")
		}
	}
	d.out.System = strings.Join(parts, "\n")
	return ""
}

func (d *anthropicDecoder) tools(tools []aTool) string {
	for i, t := range tools {
		if t.CacheControl != nil {
			d.c.CacheBreakpoints = append(d.c.CacheBreakpoints, fmt.Sprintf("tools[%d]", i))
		}
		if t.Name == "" {
			return fmt.Sprintf("tools.%d.name: Field required", i)
		}
		if (t.Type == "" || t.Type == "custom") && len(t.InputSchema) == 0 {
			return fmt.Sprintf("tools.%d.input_schema: Field required", i)
		}
		d.out.Tools = append(d.out.Tools, model.Tool{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
	}
	return ""
}

// anthropicTurn is one message being decoded.
type anthropicTurn struct {
	index    int
	role     string
	msg      model.Message
	texts    []string
	uses     []string        // tool_use ids this message asks for
	answered map[string]bool // tool_use ids of the previous message this one answers
}

// message decodes msgs[i], checking that roles alternate and that every tool_use of the
// previous message is answered.
func (d *anthropicDecoder) message(msgs []aMessage, i int) string {
	m := msgs[i]
	switch {
	case m.Role != "user" && m.Role != "assistant":
		return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
	case i == 0 && m.Role != "user":
		return "messages: first message must use the \"user\" role"
	case i > 0 && msgs[i-1].Role == m.Role:
		return fmt.Sprintf("messages.%d: roles must alternate between \"user\" and \"assistant\"", i)
	}
	bs, err := blocks(m.Content)
	if err != nil {
		return fmt.Sprintf("messages.%d.content: %v", i, err)
	}
	if len(bs) == 0 {
		return fmt.Sprintf("messages.%d: all messages must have non-empty content", i)
	}
	t := &anthropicTurn{index: i, role: m.Role, msg: model.Message{Role: model.Role(m.Role)}, answered: map[string]bool{}}
	for j, b := range bs {
		if b.CacheControl != nil {
			d.c.CacheBreakpoints = append(d.c.CacheBreakpoints, fmt.Sprintf("messages[%d].content[%d]", i, j))
		}
		if why := d.block(t, j, b); why != "" {
			return why
		}
	}
	t.msg.Text = strings.Join(t.texts, "\n")
	if m.Role == "user" {
		var missing []string
		for _, id := range d.pendingUses {
			if !t.answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
		}
	}
	d.pendingUses = t.uses
	d.out.Messages = append(d.out.Messages, t.msg)
	return ""
}

// block decodes content block j of turn t.
func (d *anthropicDecoder) block(t *anthropicTurn, j int, b aBlock) string {
	i := t.index
	switch b.Type {
	case "text":
		if strings.TrimSpace(b.Text) == "" {
			return fmt.Sprintf("messages.%d.content.%d.text: text content blocks must contain non-whitespace text", i, j)
		}
		t.texts = append(t.texts, b.Text)
	case "tool_use":
		d.hasToolBlocks = true
		if t.role != "assistant" {
			return fmt.Sprintf("messages.%d.content.%d: tool_use blocks are only allowed in assistant messages", i, j)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(b.Input)), "{") {
			return fmt.Sprintf("messages.%d.content.%d.input: Input should be a valid dictionary", i, j)
		}
		t.uses = append(t.uses, b.ID)
		t.msg.ToolCalls = append(t.msg.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Input: b.Input})
	case "tool_result":
		d.hasToolBlocks = true
		switch {
		case t.role != "user":
			return fmt.Sprintf("messages.%d.content.%d: tool_result blocks are only allowed in user messages", i, j)
		case !slices.Contains(d.pendingUses, b.ToolUseID):
			return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
		case len(t.texts) > 0:
			return fmt.Sprintf("messages.%d.content.%d: tool_result blocks must come before any text in a user message", i, j)
		}
		t.answered[b.ToolUseID] = true
		t.msg.ToolResults = append(t.msg.ToolResults, model.ToolResult{CallID: b.ToolUseID, Content: textOf(b.Content), IsError: b.IsError})
	default:
		return fmt.Sprintf("messages.%d.content.%d.type: unsupported block type %q in this fake", i, j, b.Type)
	}
	return ""
}

func anthropicReply(c Call, st Step) map[string]any {
	content := []map[string]any{}
	if st.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": st.Text})
	}
	for i, tc := range st.ToolCalls {
		var input any = json.RawMessage("{}")
		switch {
		case tc.RawArguments != "":
			input = tc.RawArguments
		case len(tc.Input) > 0:
			input = tc.Input
		}
		content = append(content, map[string]any{
			"type": "tool_use", "id": callID("toolu_", c.N, i, tc.ID), "name": tc.Name, "input": input,
		})
	}
	stop := "end_turn"
	switch {
	case st.StopReason != "":
		stop = st.StopReason
	case st.Refusal:
		stop = "refusal"
	case len(st.ToolCalls) > 0:
		stop = "tool_use"
	}
	u := estimate(c, st)
	return map[string]any{
		"id":            fmt.Sprintf("msg_fake_%d", c.N),
		"type":          "message",
		"role":          "assistant",
		"model":         c.Model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                u.InputTokens,
			"output_tokens":               u.OutputTokens,
			"cache_creation_input_tokens": u.CacheWriteTokens,
			"cache_read_input_tokens":     u.CacheReadTokens,
		},
	}
}

// sseEvent is one server-sent event of an Anthropic stream.
type sseEvent struct {
	name string
	data any
}

// defaultChunkSize is how many bytes of text or tool input one delta carries by default.
const defaultChunkSize = 16

// anthropicEvents is the reply to c as the event stream the Messages API sends with
// "stream": true, and the index of the event after which a Drop or StreamError step breaks
// the stream (right after the first content delta, so output has started).
func anthropicEvents(c Call, st Step) (events []sseEvent, breakAt int) {
	reply := anthropicReply(c, st)
	u := estimate(c, st)
	size := st.ChunkSize
	if size <= 0 {
		size = defaultChunkSize
	}
	start := map[string]any{}
	for k, v := range reply {
		start[k] = v
	}
	start["content"] = []any{}
	start["stop_reason"] = nil
	// Input and cache counts come with message_start, output tokens with message_delta.
	start["usage"] = map[string]any{
		"input_tokens":                u.InputTokens,
		"output_tokens":               1,
		"cache_creation_input_tokens": u.CacheWriteTokens,
		"cache_read_input_tokens":     u.CacheReadTokens,
	}
	events = append(events,
		sseEvent{"message_start", map[string]any{"type": "message_start", "message": start}},
		sseEvent{"ping", map[string]any{"type": "ping"}})
	for i, block := range reply["content"].([]map[string]any) {
		var deltaType, field, whole string
		startBlock := map[string]any{}
		for k, v := range block {
			startBlock[k] = v
		}
		if block["type"] == "text" {
			deltaType, field, whole = "text_delta", "text", block["text"].(string)
			startBlock["text"] = ""
		} else {
			deltaType, field = "input_json_delta", "partial_json"
			switch in := block["input"].(type) {
			case string: // RawArguments: sent as the raw JSON text, malformed or not
				whole = in
			case json.RawMessage:
				whole = string(in)
			}
			startBlock["input"] = map[string]any{}
		}
		events = append(events, sseEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": startBlock}})
		for _, piece := range chunks(whole, size) {
			events = append(events, sseEvent{"content_block_delta", map[string]any{
				"type": "content_block_delta", "index": i, "delta": map[string]any{"type": deltaType, field: piece}}})
			if breakAt == 0 {
				breakAt = len(events)
			}
		}
		events = append(events, sseEvent{"content_block_stop", map[string]any{"type": "content_block_stop", "index": i}})
	}
	if breakAt == 0 {
		breakAt = 2 // no content: break after message_start and ping
	}
	events = append(events,
		sseEvent{"message_delta", map[string]any{
			"type":  "message_delta",
			"delta": map[string]any{"stop_reason": reply["stop_reason"], "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": u.OutputTokens},
		}},
		sseEvent{"message_stop", map[string]any{"type": "message_stop"}})
	return events, breakAt
}

// chunks splits s into pieces of at most size bytes, never inside a UTF-8 sequence.
func chunks(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func encodeEvent(e sseEvent) []byte {
	data, _ := json.Marshal(e.data) // maps of JSON values always marshal
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", e.name, data)
}

// streamAnthropic answers a streaming request with server-sent events, pausing
// st.EventDelay between events and st.Silence after the opening ones. A StreamError step
// ends with an error event after the first content delta; a Drop step cuts the connection
// there.
func streamAnthropic(w http.ResponseWriter, r *http.Request, c Call, st Step) {
	events, breakAt := anthropicEvents(c, st)
	if st.Drop {
		dropStream(w, events[:breakAt])
		return
	}
	if st.StreamError != "" {
		msg := st.ErrorMessage
		if msg == "" {
			msg = "modeltest: scripted " + st.StreamError
		}
		events = append(events[:breakAt:breakAt], sseEvent{"error", map[string]any{
			"type": "error", "error": map[string]any{"type": st.StreamError, "message": msg}}})
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", fmt.Sprintf("req_fake_%d", c.N))
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for i, e := range events {
		wait := time.Duration(st.EventDelay)
		if i == 2 {
			wait += time.Duration(st.Silence)
		}
		if i > 0 && wait > 0 && !sleepOrDone(r, wait) {
			return
		}
		if _, err := w.Write(encodeEvent(e)); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

func sleepOrDone(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// dropStream sends a 200 event stream with the given events in chunked encoding, then
// closes the connection in the middle of the next chunk: the client sees the stream die
// after output started.
func dropStream(w http.ResponseWriter, events []sseEvent) {
	conn, buf, ok := hijack(w)
	if !ok {
		return
	}
	defer conn.Close()
	fmt.Fprint(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, e := range events {
		data := encodeEvent(e)
		fmt.Fprintf(buf, "%x\r\n%s\r\n", len(data), data)
	}
	fmt.Fprintf(buf, "400\r\nevent: content_block_delta\ndata: {\"type\":\"content_")
	buf.Flush()
}
