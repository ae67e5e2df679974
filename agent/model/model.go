// Package model is the agent's provider-neutral view of a chat model with tool use, and its
// clients for the Anthropic Messages API and the OpenAI Chat Completions API (and every
// server that speaks it: Ollama, vLLM, LiteLLM, OpenRouter, Azure OpenAI).
//
// A Model has one method, Complete, which sends a whole conversation (system prompt,
// messages, tool definitions) and returns the assistant's next message with its token usage
// and cost. New builds a Model from a spec such as "anthropic:claude-sonnet-4-5" or
// "openai:gpt-4.1"; the returned Model retries rate limits, server errors and dropped
// connections itself (see RetryPolicy) and reports failures as *APIError or
// ErrNoCredentials so the CLI can pick an exit code with errors.As and errors.Is.
// Anthropic replies are streamed; WithProgress lets a caller watch the bytes arrive.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Model is a chat model that can call tools. Implementations are safe for concurrent use.
type Model interface {
	// Complete sends the request and returns the assistant's reply. A reply that refuses,
	// is empty or is cut by max tokens is a Response (see StopReason), not an error; errors
	// are for calls that produced no reply (*APIError, transport failures, ctx).
	Complete(ctx context.Context, req Request) (Response, error)
}

// Pricer is implemented by models that know their price, so callers can estimate the cost
// of a call before making it. ok is false when no price is known for the model.
type Pricer interface {
	Price() (p Price, ok bool)
}

// SecretHolder is implemented by models that hold credentials; callers add the values to
// their redaction list so a key never reaches a transcript or an event.
type SecretHolder interface {
	Secrets() []string
}

// Role is who wrote a message.
type Role string

// Roles. Tool results travel in user messages, as in the Anthropic Messages API; the OpenAI
// client turns them into role "tool" messages.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one turn of the conversation.
type Message struct {
	Role Role `json:"role"`
	// Text is the plain text of the message ("" for none).
	Text string `json:"text,omitempty"`
	// ToolCalls are the tools the assistant asked to run (assistant messages only).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolResults answer the previous assistant message's ToolCalls, in the same order
	// (user messages only).
	ToolResults []ToolResult `json:"tool_results,omitempty"`
}

// ToolCall is one tool invocation requested by the model.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is the arguments as the model sent them. It is usually a JSON object but is
	// not validated here: a model can send malformed JSON, and the caller reports that
	// back to the model as a tool error.
	Input json.RawMessage `json:"input"`
}

// ToolResult is the outcome of one ToolCall.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
}

// Tool describes a tool the model may call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Schema is the JSON Schema of the arguments; it must be an object schema.
	Schema json.RawMessage `json:"input_schema"`
}

// ToolChoice says whether the model may call tools in this request.
type ToolChoice string

// Tool choices. With ToolChoiceNone the tool definitions are still sent (providers reject
// histories with tool calls but no tools) and the model is told not to use them;
// ToolChoiceRequired makes it call at least one (Anthropic "any", OpenAI "required").
const (
	ToolChoiceAuto     ToolChoice = ""
	ToolChoiceNone     ToolChoice = "none"
	ToolChoiceRequired ToolChoice = "required"
)

// Request is one call to the model.
type Request struct {
	System     string     `json:"system,omitempty"`
	Messages   []Message  `json:"messages"`
	Tools      []Tool     `json:"tools,omitempty"`
	ToolChoice ToolChoice `json:"tool_choice,omitempty"`
	// MaxTokens caps the reply; 0 uses the client's default.
	MaxTokens int `json:"max_tokens,omitempty"`
}

// StopReason says why the model stopped, normalised across providers.
type StopReason string

// Stop reasons.
const (
	StopEndTurn   StopReason = "end_turn"   // finished its reply
	StopToolUse   StopReason = "tool_use"   // wants the ToolCalls run
	StopMaxTokens StopReason = "max_tokens" // cut by the token limit
	StopRefusal   StopReason = "refusal"    // declined (safety) — Text holds the refusal
	StopOther     StopReason = "other"      // anything else the provider reported
)

// Response is the model's reply.
type Response struct {
	Message    Message    `json:"message"`
	StopReason StopReason `json:"stop_reason"`
	Usage      Usage      `json:"usage"`
	// Model is the model name the provider reported (may carry a date suffix).
	Model string `json:"model,omitempty"`
	// ID is the provider's id of the reply.
	ID string `json:"id,omitempty"`
}

// Usage counts the tokens of one call (or a sum of calls) and what they cost.
type Usage struct {
	// InputTokens are input tokens billed at the full input price (neither read from nor
	// written to the prompt cache).
	InputTokens int64 `json:"input_tokens"`
	// CacheReadTokens are input tokens served from the prompt cache.
	CacheReadTokens int64 `json:"cache_read_tokens"`
	// CacheWriteTokens are input tokens written to the prompt cache (Anthropic).
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	// CostUSD is the price of the tokens; 0 when Priced is false.
	CostUSD float64 `json:"cost_usd"`
	// Priced is set when a price was known for the model.
	Priced bool `json:"priced"`
}

// TotalInput is every input token of the call, cached or not.
func (u Usage) TotalInput() int64 { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }

// Add returns the sum of u and v. The sum is Priced only if both were (or one was empty).
func (u Usage) Add(v Usage) Usage {
	priced := u.Priced && v.Priced
	if u == (Usage{}) {
		priced = v.Priced
	} else if v == (Usage{}) {
		priced = u.Priced
	}
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CostUSD:          u.CostUSD + v.CostUSD,
		Priced:           priced,
	}
}

// ErrNoCredentials is returned by New when no API key can be found. The error's text says
// exactly which variable to set; the CLI maps it to a usage error (exit 2).
var ErrNoCredentials = errors.New("no model credentials")

// ErrBadSpec is returned by New for a malformed or unknown model spec (a usage error).
var ErrBadSpec = errors.New("invalid model spec")

// APIError is a call the provider answered with an error status. 400, 401, 403, 404 and
// 422 are not retried; the CLI maps an APIError to exit 3.
type APIError struct {
	Provider string // "anthropic", "openai", ...
	Status   int    // HTTP status
	// Type is the provider's error type ("authentication_error", "rate_limit_error", ...).
	Type string
	// Message is the provider's message, with the API key redacted.
	Message   string
	RequestID string
	// RetryAfter is the wait the provider asked for (Retry-After), 0 if none.
	RetryAfter time.Duration
	// Attempts is how many calls were made before giving up (1 = no retry).
	Attempts int
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s API: HTTP %d", e.Provider, e.Status)
	if e.Type != "" {
		fmt.Fprintf(&b, " %s", e.Type)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	if hint := statusHint(e.Status); hint != "" {
		fmt.Fprintf(&b, "; %s", hint)
	}
	return b.String()
}

// Temporary reports whether the call may succeed if retried later (429, 408, 409, 5xx).
func (e *APIError) Temporary() bool { return retryableStatus(e.Status) }

func statusHint(status int) string {
	switch status {
	case 401:
		return "check that the API key is valid"
	case 403:
		return "the API key is not allowed to use this model or endpoint"
	case 404:
		return "check the model name and the base URL"
	}
	return ""
}

func retryableStatus(status int) bool {
	return status == 408 || status == 409 || status == 429 || status >= 500
}

// TransportError is a call that got no complete HTTP response: connection refused or
// reset, a dropped connection mid-response, a malformed body. It is retried.
type TransportError struct {
	Provider string
	Attempts int
	Err      error
}

func (e *TransportError) Error() string {
	s := fmt.Sprintf("%s API: %v", e.Provider, e.Err)
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

func (e *TransportError) Unwrap() error { return e.Err }
