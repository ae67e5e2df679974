package modeltest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
)

// decodeCase is one request body and what the fake must record for it: the reason for a
// 400 (a prefix of Call.Invalid, "" when accepted) and, when set, the decoded call.
type decodeCase struct {
	name        string
	body        string
	wantInvalid string
	want        *modeltest.Call // Model, MaxTokens, ToolChoice, Stream, CacheBreakpoints, Request
}

// postCall sends body to the fake in the given format and returns the call it recorded.
func postCall(t *testing.T, format, body string) modeltest.Call {
	t.Helper()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "ok"}}})
	defer srv.Close()
	url := srv.URL + "/v1/messages"
	if format == "openai" {
		url = srv.OpenAIURL() + "/chat/completions"
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	calls := srv.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls = %d, want 1", len(calls))
	}
	c := calls[0]
	wantStatus := http.StatusOK
	if c.Invalid != "" {
		wantStatus = http.StatusBadRequest
	}
	if resp.StatusCode != wantStatus {
		t.Errorf("status = %d, want %d (Invalid %q)", resp.StatusCode, wantStatus, c.Invalid)
	}
	return c
}

func runDecodeCases(t *testing.T, format string, cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := postCall(t, format, tc.body)
			if tc.wantInvalid == "" && c.Invalid != "" || !strings.HasPrefix(c.Invalid, tc.wantInvalid) {
				t.Errorf("Invalid = %q, want prefix %q", c.Invalid, tc.wantInvalid)
			}
			if tc.want == nil {
				return
			}
			got := modeltest.Call{Model: c.Model, MaxTokens: c.MaxTokens, ToolChoice: c.ToolChoice, Stream: c.Stream,
				CacheBreakpoints: c.CacheBreakpoints, Request: c.Request}
			if diff := cmp.Diff(*tc.want, got); diff != "" {
				t.Errorf("decoded call mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnthropicRequestRules pins every rule the fake enforces on a Messages API body, and
// the shape it decodes an accepted one into.
func TestAnthropicRequestRules(t *testing.T) {
	t.Parallel()
	const tools = `"tools":[{"name":"execute","input_schema":{"type":"object"}}]`
	msgs := func(m string) string {
		return `{"model":"m","max_tokens":10,` + tools + `,"messages":` + m + `}`
	}
	user := `{"role":"user","content":"hi"}`
	use := `{"role":"assistant","content":[{"type":"tool_use","id":"u1","name":"execute","input":{"command":"ls"}}]}`
	runDecodeCases(t, "anthropic", []decodeCase{
		{name: "NotJSON", body: `{`, wantInvalid: "request body is not valid JSON: "},
		{name: "NoModel", body: `{"max_tokens":10,"messages":[` + user + `]}`, wantInvalid: "model: Field required"},
		{name: "NoMaxTokens", body: `{"model":"m","messages":[` + user + `]}`, wantInvalid: "max_tokens: Field required and must be positive"},
		{name: "ZeroMaxTokens", body: `{"model":"m","max_tokens":0,"messages":[` + user + `]}`, wantInvalid: "max_tokens: Field required and must be positive"},
		{name: "NoMessages", body: `{"model":"m","max_tokens":10,"messages":[]}`, wantInvalid: "messages: at least one message is required"},
		{name: "SystemNumber", body: `{"model":"m","max_tokens":10,"system":7,"messages":[` + user + `]}`, wantInvalid: "system: must be a string or an array of text blocks"},
		{name: "ToolWithoutName", body: `{"model":"m","max_tokens":10,"tools":[{"input_schema":{}}],"messages":[` + user + `]}`, wantInvalid: "tools.0.name: Field required"},
		{name: "CustomToolWithoutSchema", body: `{"model":"m","max_tokens":10,"tools":[{"type":"custom","name":"x"}],"messages":[` + user + `]}`, wantInvalid: "tools.0.input_schema: Field required"},
		{name: "ServerToolWithoutSchema", body: `{"model":"m","max_tokens":10,"tools":[{"type":"bash_20250124","name":"bash"}],"messages":[` + user + `]}`},
		{name: "SystemRole", body: msgs(`[{"role":"system","content":"x"}]`), wantInvalid: "messages.0.role: Input should be 'user' or 'assistant'"},
		{name: "AssistantFirst", body: msgs(`[{"role":"assistant","content":"x"}]`), wantInvalid: `messages: first message must use the "user" role`},
		{name: "RolesRepeat", body: msgs(`[` + user + `,` + user + `]`), wantInvalid: "messages.1: roles must alternate"},
		{name: "ContentNumber", body: msgs(`[{"role":"user","content":3}]`), wantInvalid: "messages.0.content: content must be a string or an array of content blocks"},
		{name: "ContentEmpty", body: msgs(`[{"role":"user","content":[]}]`), wantInvalid: "messages.0: all messages must have non-empty content"},
		{name: "BlankText", body: msgs(`[{"role":"user","content":" "}]`), wantInvalid: "messages.0.content.0.text: text content blocks must contain non-whitespace text"},
		{name: "ToolUseFromUser", body: msgs(`[{"role":"user","content":[{"type":"tool_use","id":"u1","name":"execute","input":{}}]}]`), wantInvalid: "messages.0.content.0: tool_use blocks are only allowed in assistant messages"},
		{name: "ToolUseInputNotObject", body: msgs(`[` + user + `,{"role":"assistant","content":[{"type":"tool_use","id":"u1","name":"execute","input":[1]}]}]`), wantInvalid: "messages.1.content.0.input: Input should be a valid dictionary"},
		{name: "ToolResultFromAssistant", body: msgs(`[` + user + `,{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"u1"}]}]`), wantInvalid: "messages.1.content.0: tool_result blocks are only allowed in user messages"},
		{name: "ToolResultUnknownID", body: msgs(`[` + user + `,` + use + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"u2","content":"x"}]}]`), wantInvalid: "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: u2."},
		{name: "ToolResultAfterText", body: msgs(`[` + user + `,` + use + `,{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"u1","content":"x"}]}]`), wantInvalid: "messages.2.content.1: tool_result blocks must come before any text in a user message"},
		{name: "ImageBlock", body: msgs(`[{"role":"user","content":[{"type":"image"}]}]`), wantInvalid: `messages.0.content.0.type: unsupported block type "image" in this fake`},
		{name: "ResultMissing", body: msgs(`[` + user + `,` + use + `,` + user + `]`), wantInvalid: "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: u1."},
		{name: "FinalToolUseUnanswered", body: msgs(`[` + user + `,` + use + `]`), wantInvalid: "messages: the final assistant message has tool_use blocks without results"},
		{name: "ToolBlocksWithoutTools", body: `{"model":"m","max_tokens":10,"messages":[` + user + `,` + use + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"u1","content":"x"}]}]}`, wantInvalid: "Requests which include `tool_use` or `tool_result` blocks must define tools."},
		{name: "FiveCacheBreakpoints", body: `{"model":"m","max_tokens":10,
			"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],
			"tools":[{"name":"a","input_schema":{},"cache_control":{"type":"ephemeral"}},{"name":"b","input_schema":{},"cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}},{"type":"text","text":"y","cache_control":{"type":"ephemeral"}}]}]}`,
			wantInvalid: "A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{name: "Conversation", body: `{"model":"claude","max_tokens":64,"stream":true,"tool_choice":{"type":"any"},
			"system":[{"type":"text","text":"be brief"},{"type":"text","text":"be right","cache_control":{"type":"ephemeral"}}],
			"tools":[{"name":"execute","description":"run","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
			"messages":[` + user + `,` + use + `,{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"u1","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"is_error":true},
				{"type":"text","text":"go on","cache_control":{"type":"ephemeral"}}]}]}`,
			want: &modeltest.Call{Model: "claude", MaxTokens: 64, ToolChoice: "any", Stream: true,
				CacheBreakpoints: []string{"system", "tools[0]", "messages[2].content[1]"},
				Request: &model.Request{System: "be brief\nbe right", MaxTokens: 64, ToolChoice: model.ToolChoiceRequired,
					Tools: []model.Tool{{Name: "execute", Description: "run", Schema: json.RawMessage(`{"type":"object"}`)}},
					Messages: []model.Message{
						{Role: model.RoleUser, Text: "hi"},
						{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "u1", Name: "execute", Input: json.RawMessage(`{"command":"ls"}`)}}},
						{Role: model.RoleUser, Text: "go on", ToolResults: []model.ToolResult{{CallID: "u1", Content: "a\nb", IsError: true}}},
					}}}},
		{name: "SystemStringToolChoiceNone", body: `{"model":"m","max_tokens":5,"system":"sys","tool_choice":{"type":"none"},` + tools + `,"messages":[` + user + `]}`,
			want: &modeltest.Call{Model: "m", MaxTokens: 5, ToolChoice: "none",
				Request: &model.Request{System: "sys", MaxTokens: 5, ToolChoice: model.ToolChoiceNone,
					Tools:    []model.Tool{{Name: "execute", Schema: json.RawMessage(`{"type":"object"}`)}},
					Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}}},
	})
}

// TestOpenAIRequestRules pins every rule the fake enforces on a Chat Completions body,
// and the shape it decodes an accepted one into.
func TestOpenAIRequestRules(t *testing.T) {
	t.Parallel()
	const tools = `"tools":[{"type":"function","function":{"name":"execute","parameters":{"type":"object"}}}]`
	msgs := func(m string) string { return `{"model":"m",` + tools + `,"messages":` + m + `}` }
	user := `{"role":"user","content":"hi"}`
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"execute","arguments":"{\"command\":\"ls\"}"}}]}`
	runDecodeCases(t, "openai", []decodeCase{
		{name: "NotJSON", body: `[`, wantInvalid: "We could not parse the JSON body of your request: "},
		{name: "NoModel", body: `{"messages":[` + user + `]}`, wantInvalid: "you must provide a model parameter"},
		{name: "Stream", body: `{"model":"m","stream":true,"messages":[` + user + `]}`, wantInvalid: "modeltest: streaming is not supported by this fake"},
		{name: "NoMessages", body: `{"model":"m","messages":[]}`, wantInvalid: "'messages' must contain at least one message"},
		{name: "BothMaxTokens", body: `{"model":"m","max_tokens":1,"max_completion_tokens":2,"messages":[` + user + `]}`, wantInvalid: "max_tokens and max_completion_tokens cannot both be set"},
		{name: "ToolNotFunction", body: `{"model":"m","tools":[{"type":"web"}],"messages":[` + user + `]}`, wantInvalid: "tools[0].type: only 'function' is supported by this fake"},
		{name: "ToolWithoutName", body: `{"model":"m","tools":[{"type":"function","function":{}}],"messages":[` + user + `]}`, wantInvalid: "Missing required parameter: 'tools[0].function.name'."},
		{name: "ToolChoiceWithoutTools", body: `{"model":"m","tool_choice":"auto","messages":[` + user + `]}`, wantInvalid: "Invalid value for 'tool_choice'"},
		{name: "ContentNumber", body: msgs(`[{"role":"user","content":1}]`), wantInvalid: "messages[0].content: content must be a string or an array of content parts"},
		{name: "ResultMissing", body: msgs(`[` + user + `,` + call + `,` + user + `]`), wantInvalid: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: c1"},
		{name: "ToolCallWithoutID", body: msgs(`[` + user + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"execute"}}]}]`), wantInvalid: "messages[1].tool_calls[0]: id and function.name are required"},
		{name: "EmptyAssistant", body: msgs(`[` + user + `,{"role":"assistant","content":""}]`), wantInvalid: "messages[1]: an assistant message needs content or tool_calls"},
		{name: "ToolUnknownID", body: msgs(`[` + user + `,{"role":"tool","tool_call_id":"c9","content":"x"}]`), wantInvalid: "Invalid parameter: messages[1] with role 'tool' must be a response"},
		{name: "BadRole", body: msgs(`[{"role":"robot","content":"x"}]`), wantInvalid: `messages[0].role: invalid role "robot"`},
		{name: "FinalCallUnanswered", body: msgs(`[` + user + `,` + call + `]`), wantInvalid: "An assistant message with 'tool_calls' must be followed by tool messages"},
		{name: "Conversation", body: `{"model":"gpt","max_completion_tokens":32,"tool_choice":{"type":"function","function":{"name":"execute"}},` + tools + `,"messages":[
			{"role":"system","content":"be brief"},{"role":"developer","content":[{"type":"text","text":"be right"}]},` + user + `,
			{"role":"assistant","content":"let me look","tool_calls":[{"id":"c1","type":"function","function":{"name":"execute","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"execute","arguments":"not json"}}]},
			{"role":"tool","tool_call_id":"c2","content":"two"},{"role":"tool","tool_call_id":"c1","content":"one"}]}`,
			want: &modeltest.Call{Model: "gpt", MaxTokens: 32, ToolChoice: "function",
				Request: &model.Request{System: "be brief\nbe right", MaxTokens: 32,
					Tools: []model.Tool{{Name: "execute", Schema: json.RawMessage(`{"type":"object"}`)}},
					Messages: []model.Message{
						{Role: model.RoleUser, Text: "hi"},
						{Role: model.RoleAssistant, Text: "let me look", ToolCalls: []model.ToolCall{
							{ID: "c1", Name: "execute", Input: json.RawMessage(`{}`)},
							{ID: "c2", Name: "execute", Input: json.RawMessage(`"not json"`)}}},
						{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c2", Content: "two"}, {CallID: "c1", Content: "one"}}},
					}}}},
		{name: "ToolChoiceRequiredMaxTokens", body: `{"model":"m","max_tokens":7,"tool_choice":"required",` + tools + `,"messages":[` + user + `]}`,
			want: &modeltest.Call{Model: "m", MaxTokens: 7, ToolChoice: "required",
				Request: &model.Request{MaxTokens: 7, ToolChoice: model.ToolChoiceRequired,
					Tools:    []model.Tool{{Name: "execute", Schema: json.RawMessage(`{"type":"object"}`)}},
					Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}}},
	})
}
