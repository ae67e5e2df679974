package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
)

const testKey = "sk-test-canary-0123456789"

// format describes how to point a client of one wire format at a fake server.
type format struct {
	name    string
	spec    string
	baseURL func(*modeltest.Server) string
	env     string
}

var formats = []format{
	{name: "anthropic", spec: "anthropic:claude-sonnet-4-5", baseURL: func(s *modeltest.Server) string { return s.URL }, env: "ANTHROPIC_API_KEY"},
	{name: "openai", spec: "openai:gpt-4.1", baseURL: func(s *modeltest.Server) string { return s.OpenAIURL() }, env: "OPENAI_API_KEY"},
}

// recordSleep replaces real waiting: it records each wait and returns at once.
type recordSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recordSleep) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recordSleep) got() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.waits...)
}

func newModel(t *testing.T, f format, srv *modeltest.Server, opts ...model.Option) model.Model {
	t.Helper()
	getenv := func(k string) string {
		if k == f.env {
			return testKey
		}
		return ""
	}
	m, err := model.New(f.spec, f.baseURL(srv), getenv, opts...)
	if err != nil {
		t.Fatalf("model.New(%q): %v", f.spec, err)
	}
	return m
}

var schema = json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)

var tools = []model.Tool{
	{Name: "execute", Description: "Run a shell command.", Schema: schema},
	{Name: "read_file", Description: "Read a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
}

func TestCompleteMultiTurnToolUse(t *testing.T) {
	t.Parallel()
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
				{Text: "Let me look.", ToolCalls: []modeltest.ToolCall{
					{Name: "execute", Input: json.RawMessage(`{"command":"ls"}`)},
					{Name: "read_file", Input: json.RawMessage(`{"path":"a.txt"}`)},
				}, Usage: modeltest.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 3000, CacheWriteTokens: 500}},
				{Text: "All done."},
			}}, modeltest.WithAPIKey(testKey))
			defer srv.Close()
			m := newModel(t, f, srv)

			req := model.Request{
				System:   "You are headless.",
				Messages: []model.Message{{Role: model.RoleUser, Text: "list files"}},
				Tools:    tools,
			}
			resp, err := m.Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete #1: %v", err)
			}
			if resp.StopReason != model.StopToolUse {
				t.Errorf("StopReason = %q, want tool_use", resp.StopReason)
			}
			if resp.Message.Text != "Let me look." {
				t.Errorf("Text = %q", resp.Message.Text)
			}
			if len(resp.Message.ToolCalls) != 2 {
				t.Fatalf("ToolCalls = %+v, want 2", resp.Message.ToolCalls)
			}
			c0 := resp.Message.ToolCalls[0]
			if c0.Name != "execute" || c0.ID == "" {
				t.Errorf("ToolCalls[0] = %+v", c0)
			}
			var in struct{ Command string }
			if err := json.Unmarshal(c0.Input, &in); err != nil || in.Command != "ls" {
				t.Errorf("ToolCalls[0].Input = %s (%v), want command ls", c0.Input, err)
			}
			// OpenAI has no cache-write count; its prompt_tokens include the cached ones.
			wantUsage := model.Usage{InputTokens: 1000, CacheReadTokens: 3000, CacheWriteTokens: 500, OutputTokens: 200, Priced: true}
			if f.name == "openai" {
				wantUsage = model.Usage{InputTokens: 1500, CacheReadTokens: 3000, OutputTokens: 200, Priced: true}
			}
			if diff := cmp.Diff(wantUsage, resp.Usage, cmpopts.IgnoreFields(model.Usage{}, "CostUSD")); diff != "" {
				t.Errorf("Usage mismatch (-want +got):\n%s", diff)
			}
			p, ok := m.(model.Pricer).Price()
			if !ok {
				t.Fatalf("no price for %s", f.spec)
			}
			if want := p.Cost(resp.Usage); resp.Usage.CostUSD != want || want <= 0 {
				t.Errorf("CostUSD = %v, want %v (> 0)", resp.Usage.CostUSD, want)
			}

			// Second turn: the history carries the tool calls and their results; the
			// fake rejects a request whose results do not answer every call.
			req.Messages = append(req.Messages, resp.Message, model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{
				{CallID: c0.ID, Name: "execute", Content: "a.txt\nb.txt"},
				{CallID: resp.Message.ToolCalls[1].ID, Name: "read_file", Content: "", IsError: true},
			}})
			resp2, err := m.Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete #2: %v", err)
			}
			if resp2.Message.Text != "All done." || resp2.StopReason != model.StopEndTurn {
				t.Errorf("reply #2 = %q / %q", resp2.Message.Text, resp2.StopReason)
			}
			calls := srv.Calls()
			if len(calls) != 2 {
				t.Fatalf("server saw %d calls, want 2", len(calls))
			}
			got := calls[1].Request
			if got.System != "You are headless." {
				t.Errorf("system = %q", got.System)
			}
			if len(got.Tools) != 2 || got.Tools[0].Name != "execute" {
				t.Errorf("tools = %+v", got.Tools)
			}
			last := got.Messages[len(got.Messages)-1]
			if len(last.ToolResults) != 2 || last.ToolResults[0].Content != "a.txt\nb.txt" || last.ToolResults[0].CallID != c0.ID {
				t.Errorf("tool results sent = %+v", last.ToolResults)
			}
			if f.name == "anthropic" {
				if v := calls[1].Header.Get("Anthropic-Version"); v == "" {
					t.Errorf("no anthropic-version header")
				}
				want := []string{"system", "tools[1]", "messages[2].content[1]"}
				if diff := cmp.Diff(want, calls[1].CacheBreakpoints); diff != "" {
					t.Errorf("cache breakpoints (-want +got):\n%s", diff)
				}
				if !last.ToolResults[1].IsError {
					t.Errorf("is_error not sent")
				}
			}
		})
	}
}

func TestCompleteToolChoiceAndMaxTokens(t *testing.T) {
	t.Parallel()
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "final"}, {Text: "again"}, {Text: "auto"}}})
			defer srv.Close()
			m := newModel(t, f, srv, model.WithMaxTokens(1234))
			for _, choice := range []model.ToolChoice{model.ToolChoiceNone, model.ToolChoiceRequired, model.ToolChoiceAuto} {
				_, err := m.Complete(t.Context(), model.Request{
					Messages:   []model.Message{{Role: model.RoleUser, Text: "hi"}},
					Tools:      tools,
					ToolChoice: choice,
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			wantWire := map[string][]string{"anthropic": {"none", "any", ""}, "openai": {"none", "required", ""}}[f.name]
			for i, c := range srv.Calls() {
				if c.ToolChoice != wantWire[i] || c.MaxTokens != 1234 || c.Model == "" {
					t.Errorf("call %d: tool_choice=%q max_tokens=%d model=%q, want %q/1234/set", i+1, c.ToolChoice, c.MaxTokens, c.Model, wantWire[i])
				}
			}
		})
	}
}

func TestCompleteOddReplies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		step     modeltest.Step
		wantStop model.StopReason
		wantText string
		check    func(t *testing.T, r model.Response)
	}{
		{name: "refusal", step: modeltest.Step{Text: "I won't do that.", Refusal: true}, wantStop: model.StopRefusal, wantText: "I won't do that."},
		{name: "empty", step: modeltest.Step{}, wantStop: model.StopEndTurn, wantText: ""},
		{name: "max tokens", step: modeltest.Step{Text: "cut", StopReason: "max_tokens"}, wantStop: model.StopMaxTokens, wantText: "cut"},
		{name: "malformed arguments", step: modeltest.Step{ToolCalls: []modeltest.ToolCall{{Name: "execute", RawArguments: `{"command": "ls`}}},
			wantStop: model.StopToolUse,
			check: func(t *testing.T, r model.Response) {
				in := r.Message.ToolCalls[0].Input
				if !json.Valid(in) {
					t.Fatalf("Input %q is not valid JSON", in)
				}
				var obj map[string]any
				if json.Unmarshal(in, &obj) == nil {
					t.Errorf("malformed arguments decoded as an object: %s", in)
				}
			}},
	}
	for _, f := range formats {
		for _, tc := range cases {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{tc.step}})
				defer srv.Close()
				m := newModel(t, f, srv)
				r, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}, Tools: tools})
				if err != nil {
					t.Fatal(err)
				}
				if r.StopReason != tc.wantStop {
					t.Errorf("StopReason = %q, want %q", r.StopReason, tc.wantStop)
				}
				if tc.check == nil && r.Message.Text != tc.wantText {
					t.Errorf("Text = %q, want %q", r.Message.Text, tc.wantText)
				}
				if tc.check != nil {
					tc.check(t, r)
				}
			})
		}
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	ok := modeltest.Step{Text: "ok"}
	cases := []struct {
		name      string
		steps     []modeltest.Step
		policy    model.RetryPolicy
		deadline  time.Duration
		wantCalls int
		wantErr   func(t *testing.T, err error)
		wantWaits []time.Duration // nil: not checked; exact values for Retry-After
	}{
		{
			name:      "429 then success honours Retry-After",
			steps:     []modeltest.Step{{Status: 429, Headers: map[string]string{"Retry-After": "7"}}, ok},
			wantCalls: 2, wantWaits: []time.Duration{7 * time.Second},
		},
		{
			name:      "retry-after-ms wins over Retry-After",
			steps:     []modeltest.Step{{Status: 429, Headers: map[string]string{"Retry-After": "7", "Retry-After-Ms": "1500"}}, ok},
			wantCalls: 2, wantWaits: []time.Duration{1500 * time.Millisecond},
		},
		{
			name:      "5xx retried with backoff",
			steps:     []modeltest.Step{{Status: 500}, {Status: 503}, {Status: 529}, ok},
			policy:    model.RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second},
			wantCalls: 4,
		},
		{
			name:      "dropped connection retried",
			steps:     []modeltest.Step{{Drop: true}, ok},
			wantCalls: 2,
		},
		{
			name:      "401 fails fast",
			steps:     []modeltest.Step{{Status: 401}, ok},
			wantCalls: 1,
			wantErr: func(t *testing.T, err error) {
				var apiErr *model.APIError
				if !errors.As(err, &apiErr) {
					t.Fatalf("err = %T %v, want *model.APIError", err, err)
				}
				if apiErr.Status != 401 || apiErr.Provider == "" || apiErr.Message == "" || apiErr.Attempts != 1 {
					t.Errorf("APIError = %+v", apiErr)
				}
				if apiErr.Temporary() {
					t.Errorf("401 reported as temporary")
				}
				if !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), apiErr.Provider) {
					t.Errorf("error text %q lacks provider and status", err)
				}
			},
		},
		{
			name:      "400 and 403 fail fast",
			steps:     []modeltest.Step{{Status: 403}, ok},
			wantCalls: 1,
			wantErr:   wantStatus(403),
		},
		{
			name:      "attempts capped",
			steps:     []modeltest.Step{{Status: 500, Repeat: true}},
			policy:    model.RetryPolicy{MaxAttempts: 3},
			wantCalls: 3,
			wantErr: func(t *testing.T, err error) {
				var apiErr *model.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != 500 || apiErr.Attempts != 3 {
					t.Errorf("err = %v, want 500 after 3 attempts", err)
				}
			},
		},
		{
			name:      "Retry-After beyond the total wait cap gives up at once",
			steps:     []modeltest.Step{{Status: 429, Headers: map[string]string{"Retry-After": "600"}}, ok},
			wantCalls: 1, wantWaits: []time.Duration{},
			wantErr: wantStatus(429),
		},
		{
			name:      "Retry-After beyond the context deadline gives up at once",
			steps:     []modeltest.Step{{Status: 429, Headers: map[string]string{"Retry-After": "60"}}, ok},
			deadline:  5 * time.Second,
			wantCalls: 1, wantWaits: []time.Duration{},
			wantErr: wantStatus(429),
		},
	}
	for _, f := range formats {
		for _, tc := range cases {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := modeltest.NewServer(modeltest.Script{Steps: tc.steps})
				defer srv.Close()
				rec := &recordSleep{}
				policy := tc.policy
				policy.Sleep = rec.sleep
				m := newModel(t, f, srv, model.WithRetry(policy))
				ctx := t.Context()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				var hooked []model.RetryEvent
				ctx = model.WithRetryHook(ctx, func(e model.RetryEvent) { hooked = append(hooked, e) })
				r, err := m.Complete(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}})
				if tc.wantErr == nil {
					if err != nil {
						t.Fatalf("Complete: %v", err)
					}
					if r.Message.Text != "ok" {
						t.Errorf("Text = %q", r.Message.Text)
					}
				} else {
					if err == nil {
						t.Fatalf("Complete succeeded, want an error")
					}
					tc.wantErr(t, err)
				}
				if n := len(srv.Calls()); n != tc.wantCalls {
					t.Errorf("server saw %d calls, want %d", n, tc.wantCalls)
				}
				if len(hooked) != tc.wantCalls-1 && tc.wantErr == nil {
					t.Errorf("retry hook called %d times, want %d", len(hooked), tc.wantCalls-1)
				}
				if tc.wantWaits != nil {
					if diff := cmp.Diff(tc.wantWaits, rec.got(), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("waits (-want +got):\n%s", diff)
					}
				}
				for _, w := range rec.got() {
					if tc.policy.MaxDelay > 0 && w > tc.policy.MaxDelay {
						t.Errorf("backoff %v exceeds MaxDelay %v", w, tc.policy.MaxDelay)
					}
				}
			})
		}
	}
}

func wantStatus(status int) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var apiErr *model.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != status {
			t.Errorf("err = %v, want an APIError with status %d", err, status)
		}
	}
}

// TestRetryAfterRealClock checks the default sleeper really waits out Retry-After.
func TestRetryAfterRealClock(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
		{Status: 429, Headers: map[string]string{"Retry-After": "1"}}, {Text: "ok"},
	}})
	defer srv.Close()
	m := newModel(t, formats[0], srv)
	if _, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}}); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls = %d, want 2", len(calls))
	}
	if gap := calls[1].Time.Sub(calls[0].Time); gap < time.Second {
		t.Errorf("second call came %v after the first, want >= 1s (Retry-After: 1)", gap)
	}
}

func TestCancelDuringCall(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "late", Delay: modeltest.Duration(time.Minute)}}})
	defer srv.Close()
	m := newModel(t, formats[1], srv)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Complete(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Complete returned after %v, want promptly", d)
	}
}

func TestKeyRedactedFromErrors(t *testing.T) {
	t.Parallel()
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
				{Status: 401, ErrorMessage: "key " + testKey + " is revoked"},
			}})
			defer srv.Close()
			m := newModel(t, f, srv)
			_, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}})
			if err == nil || strings.Contains(err.Error(), testKey) {
				t.Errorf("err = %v: want an error without the key", err)
			}
			if got := m.(model.SecretHolder).Secrets(); len(got) != 1 || got[0] != testKey {
				t.Errorf("Secrets() = %q", got)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "from-process-env") // must be ignored: only getenv counts
	t.Setenv("OPENAI_API_KEY", "from-process-env")
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name    string
		spec    string
		baseURL string
		getenv  func(string) string
		opts    []model.Option
		want    string // String() of the model
		wantErr error
		errText string
	}{
		{name: "anthropic spec", spec: "anthropic:claude-sonnet-4-5", getenv: env("ANTHROPIC_API_KEY", "k"), want: "anthropic:claude-sonnet-4-5"},
		{name: "openai spec", spec: "openai:gpt-4.1", getenv: env("OPENAI_API_KEY", "k"), want: "openai:gpt-4.1"},
		{name: "bare claude name", spec: "claude-haiku-4-5", getenv: env("ANTHROPIC_API_KEY", "k"), want: "anthropic:claude-haiku-4-5"},
		{name: "provider only uses default model", spec: "openai:", getenv: env("OPENAI_API_KEY", "k"), want: "openai:gpt-4.1"},
		{name: "no spec follows anthropic key", getenv: env("ANTHROPIC_API_KEY", "k"), want: "anthropic:claude-sonnet-4-5"},
		{name: "no spec follows openai key", getenv: env("OPENAI_API_KEY", "k"), want: "openai:gpt-4.1"},
		{name: "no spec prefers anthropic", getenv: env("OPENAI_API_KEY", "k", "ANTHROPIC_API_KEY", "k"), want: "anthropic:claude-sonnet-4-5"},
		{name: "no spec no key", getenv: env(), wantErr: model.ErrNoCredentials, errText: "ANTHROPIC_API_KEY"},
		{name: "missing key names the variable", spec: "openai:gpt-4.1", getenv: env(), wantErr: model.ErrNoCredentials, errText: "OPENAI_API_KEY"},
		{name: "key env override", spec: "anthropic:claude-sonnet-4-5", getenv: env("MY_KEY", "k"), opts: []model.Option{model.WithKeyEnv("anthropic", "MY_KEY")}, want: "anthropic:claude-sonnet-4-5"},
		{name: "key env override missing", spec: "anthropic:claude-sonnet-4-5", getenv: env("ANTHROPIC_API_KEY", "k"), opts: []model.Option{model.WithKeyEnv("anthropic", "MY_KEY")}, wantErr: model.ErrNoCredentials, errText: "MY_KEY"},
		{name: "ollama needs no key", spec: "ollama:qwen3", getenv: env(), want: "ollama:qwen3"},
		{name: "openai-compatible server without key", spec: "openai:llama", baseURL: "http://127.0.0.1:8000/v1", getenv: env(), want: "openai:llama"},
		{name: "azure needs a base URL", spec: "azure:gpt-4.1", getenv: env("AZURE_OPENAI_API_KEY", "k"), wantErr: model.ErrBadSpec, errText: "base URL"},
		{name: "unknown provider", spec: "bedrock:claude", getenv: env(), wantErr: model.ErrBadSpec, errText: "anthropic, azure, ollama, openai, openrouter"},
		{name: "unknowable bare name", spec: "llama3", getenv: env(), wantErr: model.ErrBadSpec, errText: "PROVIDER:NAME"},
		{name: "bad base URL", spec: "openai:gpt-4.1", baseURL: "localhost:8000", getenv: env("OPENAI_API_KEY", "k"), wantErr: model.ErrBadSpec, errText: "http or https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.New(tc.spec, tc.baseURL, tc.getenv, tc.opts...)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("New(%q) err = %v, want %v", tc.spec, err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.errText) {
					t.Errorf("New(%q) err = %q, want it to mention %q", tc.spec, err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tc.spec, err)
			}
			if got := m.(interface{ String() string }).String(); got != tc.want {
				t.Errorf("New(%q) = %s, want %s", tc.spec, got, tc.want)
			}
		})
	}
}

// TestNoKeyCompatibleServer checks a keyless OpenAI-compatible server gets no bogus key.
func TestNoKeyCompatibleServer(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "hi"}}})
	defer srv.Close()
	m, err := model.New("openai:llama3", srv.OpenAIURL(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if a := srv.Calls()[0].Header.Get("Authorization"); a != "" && a != "Bearer" && a != "Bearer " {
		t.Errorf("Authorization = %q, want none", a)
	}
	if _, priced := m.(model.Pricer).Price(); priced {
		t.Errorf("an unknown compatible model has a price")
	}
}

func TestPriceLookup(t *testing.T) {
	t.Parallel()
	table := model.DefaultPrices.Merge(model.PriceTable{
		"openrouter:anthropic/claude-sonnet-4.5": {Input: 3.3, Output: 16.5},
		"gpt-4.1":                                {Input: 9, Output: 9},
	})
	cases := []struct {
		provider, name string
		want           model.Price
		ok             bool
	}{
		{"anthropic", "claude-sonnet-4-5-20250929", model.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, true},
		{"anthropic", "claude-opus-4-5", model.Price{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}, true},
		{"anthropic", "claude-opus-4-1-20250805", model.Price{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}, true},
		{"openai", "gpt-4.1-mini-2025-04-14", model.Price{Input: 0.4, Output: 1.6, CacheRead: 0.1, CacheWrite: 0.4}, true},
		{"openai", "gpt-4.1", model.Price{Input: 9, Output: 9}, true},
		{"openrouter", "anthropic/claude-sonnet-4.5", model.Price{Input: 3.3, Output: 16.5}, true},
		{"ollama", "qwen3", model.Price{}, true},
		{"anthropic", "claude-sonnet-5", model.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, true},
		{"openai", "my-finetune", model.Price{}, false},
	}
	for _, tc := range cases {
		got, ok := table.Lookup(tc.provider, tc.name)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Lookup(%q, %q) = %+v, %v; want %+v, %v", tc.provider, tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// 1M uncached input + 1M output + 1M cache reads + 1M cache writes of Sonnet.
	p, _ := table.Lookup("anthropic", "claude-sonnet-4-5")
	if got := p.Cost(model.Usage{InputTokens: 1e6, OutputTokens: 1e6, CacheReadTokens: 1e6, CacheWriteTokens: 1e6}); got != 3+15+0.3+3.75 {
		t.Errorf("Cost = %v, want %v", got, 3+15+0.3+3.75)
	}
}

func TestModeltestRejectsBrokenHistory(t *testing.T) {
	t.Parallel()
	// The fake enforces what the real APIs enforce, so a client bug fails the tests.
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{{Text: "never"}}})
			defer srv.Close()
			m := newModel(t, f, srv)
			_, err := m.Complete(t.Context(), model.Request{Tools: tools, Messages: []model.Message{
				{Role: model.RoleUser, Text: "x"},
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "execute", Input: json.RawMessage(`{}`)}}},
				{Role: model.RoleUser, Text: "forgot the result"},
			}})
			var apiErr *model.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
				t.Fatalf("err = %v, want 400", err)
			}
			if calls := srv.Calls(); len(calls) != 1 || calls[0].Invalid == "" {
				t.Errorf("calls = %+v, want one rejected call", calls)
			}
		})
	}
}
