package modeltest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/agent/model"
)

type oRequest struct {
	Model               string          `json:"model"`
	Messages            []oMessage      `json:"messages"`
	Tools               []oTool         `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
}

type oMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []oToolCall     `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// oText reads content given as a string, null, or an array of text parts.
func oText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// decodeOpenAI fills c from a Chat Completions body and returns why the real API would
// reject it ("" if it would not). c keeps what was read before a rejection.
func decodeOpenAI(body []byte, c *Call) string {
	var req oRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "We could not parse the JSON body of your request: " + err.Error()
	}
	c.Model = req.Model
	switch {
	case req.MaxCompletionTokens != nil:
		c.MaxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		c.MaxTokens = *req.MaxTokens
	}
	c.ToolChoice = oToolChoice(req.ToolChoice)
	out := &model.Request{MaxTokens: c.MaxTokens}
	c.Request = out
	switch {
	case req.Model == "":
		return "you must provide a model parameter"
	case req.Stream:
		return "modeltest: streaming is not supported by this fake"
	case len(req.Messages) == 0:
		return "'messages' must contain at least one message"
	case req.MaxTokens != nil && req.MaxCompletionTokens != nil:
		return "max_tokens and max_completion_tokens cannot both be set"
	}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return fmt.Sprintf("tools[%d].type: only 'function' is supported by this fake", i)
		}
		if t.Function.Name == "" {
			return fmt.Sprintf("Missing required parameter: 'tools[%d].function.name'.", i)
		}
		out.Tools = append(out.Tools, model.Tool{Name: t.Function.Name, Description: t.Function.Description, Schema: t.Function.Parameters})
	}
	switch c.ToolChoice {
	case "none":
		out.ToolChoice = model.ToolChoiceNone
	case "required":
		out.ToolChoice = model.ToolChoiceRequired
	}
	if c.ToolChoice != "" && len(req.Tools) == 0 {
		return "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
	}

	d := openAIDecoder{out: out}
	for i, m := range req.Messages {
		if why := d.message(i, m); why != "" {
			return why
		}
	}
	if len(d.pending) > 0 {
		return unansweredToolCalls(d.pending)
	}
	return ""
}

// oToolChoice reads tool_choice, a string ("auto") or an object with a type; anything else
// is no tool choice.
func oToolChoice(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &o) // neither a string nor an object: no tool choice
	return o.Type
}

func unansweredToolCalls(ids []string) string {
	return fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(ids, ", "))
}

// openAIDecoder turns Chat Completions messages into out's messages: system and developer
// messages into the system prompt, tool messages into the results of the user turn that
// follows the calls. pending holds the tool_call ids still waiting for a tool message.
type openAIDecoder struct {
	out     *model.Request
	pending []string
}

func (d *openAIDecoder) message(i int, m oMessage) string {
	text, err := oText(m.Content)
	if err != nil {
		return fmt.Sprintf("messages[%d].content: %v", i, err)
	}
	if m.Role != "tool" && len(d.pending) > 0 {
		return unansweredToolCalls(d.pending)
	}
	switch m.Role {
	case "system", "developer":
		if d.out.System != "" {
			d.out.System += "\n"
		}
		d.out.System += text
	case "user":
		d.out.Messages = append(d.out.Messages, model.Message{Role: model.RoleUser, Text: text})
	case "assistant":
		return d.assistant(i, m, text)
	case "tool":
		return d.toolResult(i, m, text)
	default:
		return fmt.Sprintf("messages[%d].role: invalid role %q", i, m.Role)
	}
	return ""
}

func (d *openAIDecoder) assistant(i int, m oMessage, text string) string {
	msg := model.Message{Role: model.RoleAssistant, Text: text}
	for j, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return fmt.Sprintf("messages[%d].tool_calls[%d]: id and function.name are required", i, j)
		}
		d.pending = append(d.pending, tc.ID)
		msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(jsonOrString(tc.Function.Arguments))})
	}
	if text == "" && len(m.ToolCalls) == 0 {
		return fmt.Sprintf("messages[%d]: an assistant message needs content or tool_calls", i)
	}
	d.out.Messages = append(d.out.Messages, msg)
	return ""
}

// toolResult files a tool message under the user turn that answers the calls, opening
// that turn with the first result.
func (d *openAIDecoder) toolResult(i int, m oMessage, text string) string {
	idx := slices.Index(d.pending, m.ToolCallID)
	if idx < 0 {
		//nolint:misspell // "preceeding" is the real API's wording, kept so clients see the same message.
		return fmt.Sprintf("Invalid parameter: messages[%d] with role 'tool' must be a response to a preceeding message with 'tool_calls' (tool_call_id %q).", i, m.ToolCallID)
	}
	d.pending = slices.Delete(d.pending, idx, idx+1)
	res := model.ToolResult{CallID: m.ToolCallID, Content: text}
	if n := len(d.out.Messages); n > 0 && d.out.Messages[n-1].Role == model.RoleUser && d.out.Messages[n-1].Text == "" {
		d.out.Messages[n-1].ToolResults = append(d.out.Messages[n-1].ToolResults, res)
	} else {
		d.out.Messages = append(d.out.Messages, model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{res}})
	}
	return ""
}

func jsonOrString(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func openAIReply(c Call, st Step) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if st.Refusal {
		text := st.Text
		if text == "" {
			text = "I can't help with that."
		}
		msg["refusal"] = text
	} else if st.Text != "" {
		msg["content"] = st.Text
	}
	var calls []map[string]any
	for i, tc := range st.ToolCalls {
		args := tc.RawArguments
		if args == "" {
			args = string(tc.Input)
			if args == "" {
				args = "{}"
			}
		}
		calls = append(calls, map[string]any{
			"id": callID("call_", c.N, i, tc.ID), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": args},
		})
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	finish := "stop"
	switch {
	case st.StopReason == "max_tokens":
		finish = "length"
	case st.StopReason == "refusal":
		finish = "content_filter"
	case st.StopReason == "end_turn":
		finish = "stop"
	case st.StopReason != "":
		finish = st.StopReason
	case len(calls) > 0:
		finish = "tool_calls"
	}
	u := estimate(c, st)
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return map[string]any{
		"id":      fmt.Sprintf("chatcmpl-fake-%d", c.N),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   c.Model,
		"choices": []map[string]any{{
			"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil,
		}},
		"usage": map[string]any{
			"prompt_tokens":     prompt,
			"completion_tokens": u.OutputTokens,
			"total_tokens":      prompt + u.OutputTokens,
			"prompt_tokens_details": map[string]any{
				"cached_tokens": u.CacheReadTokens,
			},
		},
	}
}
