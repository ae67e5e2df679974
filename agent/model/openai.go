package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

const openAIDefaultBaseURL = "https://api.openai.com/v1/"

// openAIWire speaks the OpenAI Chat Completions API (POST {base}/chat/completions,
// non-streaming, function tools) through the official SDK.
type openAIWire struct {
	svc       openai.ChatCompletionService
	provider  string
	model     string
	maxTokens int
	// completionTokens selects max_completion_tokens (OpenAI, Azure) over the older
	// max_tokens that most compatible servers understand.
	completionTokens bool
}

func newOpenAI(provider, name, baseURL, key string, hc *http.Client, cfg config) *openAIWire {
	if baseURL == "" {
		baseURL = openAIDefaultBaseURL
	}
	// The service is built directly rather than through openai.NewClient, which would
	// read OPENAI_* variables (organization, project, custom headers) from the process
	// environment; configuration comes from New's getenv only.
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(baseURL),
		option.WithMaxRetries(0), // RetryPolicy retries
		option.WithRequestTimeout(cfg.requestTimeout),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	host := ""
	if u, err := url.Parse(baseURL); err == nil {
		host = u.Hostname()
	}
	return &openAIWire{
		svc:              openai.NewChatCompletionService(opts...),
		provider:         provider,
		model:            name,
		maxTokens:        cfg.maxTokens,
		completionTokens: host == "api.openai.com" || strings.HasSuffix(host, ".azure.com"),
	}
}

func (w *openAIWire) complete(ctx context.Context, req Request) (Response, error) {
	params, err := w.params(req)
	if err != nil {
		return Response{}, err
	}
	cc, err := w.svc.New(ctx, params)
	if err != nil {
		return Response{}, w.error(ctx, err)
	}
	if cc == nil || len(cc.Choices) == 0 { // a 200 whose body is JSON null decodes without error
		return Response{}, &TransportError{Provider: w.provider, Err: errors.New("response has no choices")}
	}
	return openAIResponse(cc), nil
}

func (w *openAIWire) params(req Request) (openai.ChatCompletionNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = w.maxTokens
	}
	p := openai.ChatCompletionNewParams{
		Model:    w.model,
		Messages: openAIMessages(req.System, req.Messages),
	}
	if w.completionTokens {
		p.MaxCompletionTokens = openai.Int(int64(maxTokens))
	} else {
		p.MaxTokens = openai.Int(int64(maxTokens))
	}
	for _, t := range req.Tools {
		var params shared.FunctionParameters
		if len(t.Schema) > 0 {
			if err := json.Unmarshal(t.Schema, &params); err != nil {
				return p, fmt.Errorf("tool %s: input schema is not a JSON object: %w", t.Name, err)
			}
		}
		p.Tools = append(p.Tools, openai.ChatCompletionToolUnionParam{
			OfFunction: &openai.ChatCompletionFunctionToolParam{
				Function: shared.FunctionDefinitionParam{
					Name:        t.Name,
					Description: openai.String(t.Description),
					Parameters:  params,
				},
			},
		})
	}
	if len(req.Tools) > 0 {
		switch req.ToolChoice {
		case ToolChoiceNone:
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
		case ToolChoiceRequired:
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		}
	}
	return p, nil
}

func openAIMessages(system string, msgs []Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.ToolCalls {
				args := string(c.Input)
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: c.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      c.Name,
							Arguments: args,
						},
					},
				})
			}
			if m.Text == "" && len(a.ToolCalls) == 0 {
				continue
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			for _, r := range m.ToolResults {
				out = append(out, openai.ToolMessage(r.Content, r.CallID))
			}
			if m.Text != "" {
				out = append(out, openai.UserMessage(m.Text))
			}
		}
	}
	return out
}

func openAIResponse(cc *openai.ChatCompletion) Response {
	choice := cc.Choices[0]
	msg := choice.Message
	out := Message{Role: RoleAssistant, Text: msg.Content}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i+1)
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: id, Name: tc.Function.Name, Input: validJSON([]byte(tc.Function.Arguments))})
	}
	stop := StopOther
	switch choice.FinishReason {
	case "stop":
		stop = StopEndTurn
	case "tool_calls", "function_call":
		stop = StopToolUse
	case "length":
		stop = StopMaxTokens
	case "content_filter":
		stop = StopRefusal
	}
	if msg.Refusal != "" {
		stop = StopRefusal
		if out.Text == "" {
			out.Text = msg.Refusal
		}
	}
	// Some compatible servers say "stop" while returning tool calls.
	if len(out.ToolCalls) > 0 && stop != StopMaxTokens && stop != StopRefusal {
		stop = StopToolUse
	}
	cached := cc.Usage.PromptTokensDetails.CachedTokens
	return Response{
		Message:    out,
		StopReason: stop,
		Usage: Usage{
			InputTokens:     max(cc.Usage.PromptTokens-cached, 0),
			CacheReadTokens: cached,
			OutputTokens:    cc.Usage.CompletionTokens,
		},
		Model: cc.Model,
		ID:    cc.ID,
	}
}

func (w *openAIWire) error(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		e := &APIError{Provider: w.provider, Status: apiErr.StatusCode, Type: apiErr.Type, Message: apiErr.Message}
		if e.Type == "" {
			e.Type = apiErr.Code
		}
		if e.Message == "" {
			e.Type, e.Message = errorBody(apiErr.RawJSON())
		}
		if apiErr.Response != nil {
			e.RetryAfter = parseRetryAfter(apiErr.Response.Header, time.Now())
			e.RequestID = apiErr.Response.Header.Get("X-Request-Id")
		}
		return e
	}
	return &TransportError{Provider: w.provider, Err: err}
}
