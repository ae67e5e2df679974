package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

const canaryKey = "sk-ant-canary-7d1f0c2e9b8a4c6d"

// collector is an events.Sink that keeps everything.
type collector struct {
	mu  sync.Mutex
	evs []events.Event
}

func (c *collector) Emit(e events.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, e)
}

func (c *collector) all() []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Event(nil), c.evs...)
}

func (c *collector) types() []events.Type {
	var out []events.Type
	for _, e := range c.all() {
		out = append(out, e.Type)
	}
	return out
}

func (c *collector) count(t events.Type) int {
	n := 0
	for _, e := range c.all() {
		if e.Type == t {
			n++
		}
	}
	return n
}

// harness is an agent wired to a fake model and a local sandbox in a temp dir.
type harness struct {
	srv       *modeltest.Server
	dir       string // the sandbox working directory
	reportDir string
	sink      *collector
	sb        providers.Sandbox
	agent     *agent.Agent
}

type setup struct {
	format    string // anthropic (default) or openai
	modelOpts []model.Option
	configure func(o *agent.Options)
}

func newHarness(t *testing.T, respond modeltest.Responder, s setup) *harness {
	t.Helper()
	h := &harness{srv: modeltest.NewServerFunc(respond, modeltest.WithAPIKey(canaryKey)), dir: t.TempDir(), reportDir: t.TempDir(), sink: &collector{}}
	t.Cleanup(h.srv.Close)
	spec, base, env := "anthropic:claude-sonnet-4-5", h.srv.URL, "ANTHROPIC_API_KEY"
	if s.format == "openai" {
		spec, base, env = "openai:gpt-4.1", h.srv.OpenAIURL(), "OPENAI_API_KEY"
	}
	m, err := model.New(spec, base, func(k string) string {
		if k == env {
			return canaryKey
		}
		return ""
	}, append([]model.Option{model.WithRetry(model.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})}, s.modelOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(local.Options{}).Create(t.Context(), providers.Spec{RunID: "agent-test", ProjectDir: h.dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.WithoutCancel(t.Context())) })
	h.sb = sb
	opts := agent.Options{
		Model: m, Sandbox: sb, Approval: agent.Approval{Mode: agent.ModeYes},
		ReportDir: h.reportDir, Sink: h.sink, StallTimeout: -1,
	}
	if s.configure != nil {
		s.configure(&opts)
	}
	h.agent, err = agent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func script(steps ...modeltest.Step) modeltest.Responder {
	var mu sync.Mutex
	i := 0
	return func(modeltest.Call) modeltest.Step {
		mu.Lock()
		defer mu.Unlock()
		if i >= len(steps) {
			return modeltest.Step{Status: 400, ErrorMessage: "test script exhausted"}
		}
		i++
		return steps[i-1]
	}
}

func call(name string, input any) modeltest.ToolCall {
	b, _ := json.Marshal(input)
	return modeltest.ToolCall{Name: name, Input: b}
}

// lastResults returns the tool results the n-th call (1-based) sent.
func lastResults(t *testing.T, srv *modeltest.Server, n int) []model.ToolResult {
	t.Helper()
	calls := srv.Calls()
	if len(calls) < n {
		t.Fatalf("server saw %d calls, want at least %d", len(calls), n)
	}
	msgs := calls[n-1].Request.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if len(msgs[i].ToolResults) > 0 {
			return msgs[i].ToolResults
		}
	}
	t.Fatalf("call %d carries no tool results", n)
	return nil
}

func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"anthropic", "openai"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, script(
				modeltest.Step{Text: "Creating the file.", ToolCalls: []modeltest.ToolCall{
					call("write_file", map[string]any{"path": "infra/hello.txt", "content": "hello from the agent\n"}),
				}, Usage: modeltest.Usage{InputTokens: 2000, OutputTokens: 100, CacheWriteTokens: 1500}},
				modeltest.Step{ToolCalls: []modeltest.ToolCall{
					call("execute", map[string]any{"command": "cat infra/hello.txt && ls infra"}),
				}, Usage: modeltest.Usage{InputTokens: 300, OutputTokens: 50, CacheReadTokens: 3500}},
				modeltest.Step{ToolCalls: []modeltest.ToolCall{
					call("report_finding", map[string]any{"path": "infra/hello.txt", "start_line": 1, "severity": "notice", "title": "Greeting", "message": "The file greets.", "rule": "greeting"}),
				}},
				modeltest.Step{Text: "Done: wrote infra/hello.txt and verified it."},
			), setup{format: format})

			out, err := h.agent.Run(t.Context(), "Create infra/hello.txt and check it.")
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			data, err := os.ReadFile(filepath.Join(h.dir, "infra", "hello.txt"))
			if err != nil || string(data) != "hello from the agent\n" {
				t.Fatalf("file in the sandbox = %q, %v", data, err)
			}
			if out.Final != "Done: wrote infra/hello.txt and verified it." || out.Partial || out.StopReason != agent.StopDone {
				t.Errorf("outcome = %q partial=%v stop=%q", out.Final, out.Partial, out.StopReason)
			}
			if out.Record.Turns != 4 || out.Record.ToolCalls != 3 || out.Record.StopReason != agent.StopDone || out.Record.FinalAnswer != out.Final {
				t.Errorf("record = %+v", out.Record)
			}
			if out.Record.Model != "anthropic:claude-sonnet-4-5" && out.Record.Model != "openai:gpt-4.1" {
				t.Errorf("record model = %q", out.Record.Model)
			}
			if len(out.Commands) != 1 || out.Commands[0].ExitCode != 0 || out.Commands[0].Stdout != "hello from the agent\nhello.txt\n" || out.Commands[0].Turn != 2 {
				t.Errorf("commands = %+v", out.Commands)
			}
			if len(out.Findings) != 1 || out.Findings[0].Source != "agent" || out.Findings[0].Path != "infra/hello.txt" || out.Findings[0].Fingerprint == "" {
				t.Errorf("findings = %+v", out.Findings)
			}
			if u := out.Record.Usage; u.InputTokens == 0 || u.OutputTokens == 0 || u.CostUSD <= 0 {
				t.Errorf("usage = %+v", u)
			}
			if format == "anthropic" && out.Record.Usage.CachedInputTokens != 3500 {
				t.Errorf("cached input tokens = %d, want 3500", out.Record.Usage.CachedInputTokens)
			}
			// Each request carried the previous call's result; the fake validates pairing.
			if res := lastResults(t, h.srv, 2); len(res) != 1 || !strings.Contains(res[0].Content, "Created infra/hello.txt") {
				t.Errorf("results sent in call 2 = %+v", res)
			}
			if res := lastResults(t, h.srv, 3); !strings.Contains(res[0].Content, "hello from the agent") || !strings.Contains(res[0].Content, "[exit code 0]") {
				t.Errorf("results sent in call 3 = %+v", res)
			}
			first := h.srv.Calls()[0].Request
			if !strings.Contains(first.System, "headless") || !strings.Contains(first.System, h.sb.WorkDir()) ||
				!strings.Contains(first.System, "report_finding") || !strings.Contains(first.System, "nobody will answer") {
				t.Errorf("system prompt lacks the headless/workdir/finding guidance:\n%s", first.System)
			}
			want := []events.Type{
				events.ModelRequest, events.ModelResponse, events.ToolCall, events.ToolResult,
				events.ModelRequest, events.ModelResponse, events.ToolCall, events.ToolResult,
				events.ModelRequest, events.ModelResponse, events.ToolCall, events.Finding, events.ToolResult,
				events.ModelRequest, events.ModelResponse,
			}
			if diff := cmp.Diff(want, h.sink.types()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			lines := readTranscript(t, out.Record.Transcript)
			if len(lines) != len(want) {
				t.Errorf("transcript has %d lines, want %d", len(lines), len(want))
			}
			var req agent.ModelRequestData
			if err := json.Unmarshal(lines[0].Data.(json.RawMessage), &req); err != nil || req.System == "" || len(req.Tools) != 9 || len(req.NewMessages) != 1 {
				t.Errorf("first model.request data = %+v (%v)", req, err)
			}
		})
	}
}

type transcriptLine struct {
	Type events.Type
	Data any
}

func readTranscript(t *testing.T, path string) []transcriptLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("transcript: %v", err)
	}
	var out []transcriptLine
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev struct {
			Type events.Type     `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", l, err)
		}
		out = append(out, transcriptLine{Type: ev.Type, Data: ev.Data})
	}
	return out
}

func TestParallelToolCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, script(
		modeltest.Step{ToolCalls: []modeltest.ToolCall{
			call("read_file", map[string]any{"path": "a.txt"}),
			call("grep", map[string]any{"pattern": "beta"}),
			call("ls", map[string]any{}),
			call("execute", map[string]any{"command": "echo executed"}),
			call("read_file", map[string]any{"path": "b.txt"}),
		}},
		modeltest.Step{Text: "Read both."},
	), setup{})
	for name, body := range map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n"} {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := h.agent.Run(t.Context(), "read")
	if err != nil {
		t.Fatal(err)
	}
	if out.Record.Turns != 2 || out.Record.ToolCalls != 5 {
		t.Errorf("turns=%d tool calls=%d, want 2 and 5 (parallel calls are one turn)", out.Record.Turns, out.Record.ToolCalls)
	}
	res := lastResults(t, h.srv, 2)
	wantParts := []string{"alpha", "b.txt:1:beta", "a.txt\nb.txt", "executed", "beta"}
	if len(res) != len(wantParts) {
		t.Fatalf("results = %+v", res)
	}
	for i, r := range res {
		if !strings.Contains(r.Content, wantParts[i]) {
			t.Errorf("result %d = %q, want it to contain %q (results must keep the call order)", i, r.Content, wantParts[i])
		}
	}
}

func TestMalformedAndUnknownCalls(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"anthropic", "openai"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, script(
				modeltest.Step{ToolCalls: []modeltest.ToolCall{
					{Name: "execute", RawArguments: `{"command": "echo hi`},
					{Name: "launch_rockets", Input: json.RawMessage(`{}`)},
				}},
				modeltest.Step{Text: "Recovered."},
			), setup{format: format})
			out, err := h.agent.Run(t.Context(), "go")
			if err != nil {
				t.Fatal(err)
			}
			if out.Final != "Recovered." {
				t.Errorf("final = %q", out.Final)
			}
			res := lastResults(t, h.srv, 2)
			if len(res) != 2 || !strings.Contains(res[0].Content, "arguments") || !strings.Contains(res[1].Content, `no tool "launch_rockets"`) {
				t.Errorf("results = %+v", res)
			}
			if format == "anthropic" && !res[0].IsError {
				t.Errorf("malformed call not flagged as error")
			}
		})
	}
}

func TestOddAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		steps     []modeltest.Step
		wantStop  string
		wantFinal string
		wantCalls int
	}{
		{"empty then answer", []modeltest.Step{{}, {Text: "Here it is."}}, agent.StopDone, "Here it is.", 2},
		{"empty twice", []modeltest.Step{{}, {}}, agent.StopEmpty, "", 2},
		{"refusal", []modeltest.Step{{Text: "I can't help with that.", Refusal: true}}, agent.StopRefused, "I can't help with that.", 1},
		{"cut at max tokens", []modeltest.Step{{Text: "Partial answ", StopReason: "max_tokens"}}, agent.StopDone, "Partial answ", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, script(tc.steps...), setup{})
			out, err := h.agent.Run(t.Context(), "task")
			if err != nil {
				t.Fatal(err)
			}
			if out.StopReason != tc.wantStop || out.Final != tc.wantFinal || out.Partial {
				t.Errorf("outcome = stop %q final %q partial %v; want %q %q false", out.StopReason, out.Final, out.Partial, tc.wantStop, tc.wantFinal)
			}
			if n := len(h.srv.Calls()); n != tc.wantCalls {
				t.Errorf("model calls = %d, want %d", n, tc.wantCalls)
			}
			if tc.wantStop != agent.StopDone && h.sink.count(events.Warning) == 0 {
				t.Errorf("no warning event for %s", tc.wantStop)
			}
		})
	}
}

func TestModelErrors(t *testing.T) {
	t.Parallel()
	t.Run("401 fails fast", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, script(modeltest.Step{Status: 401}), setup{})
		out, err := h.agent.Run(t.Context(), "task")
		var apiErr *model.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 401 {
			t.Fatalf("err = %v, want a 401 APIError", err)
		}
		if out == nil || out.StopReason != agent.StopError {
			t.Errorf("outcome = %+v", out)
		}
		if n := len(h.srv.Calls()); n != 1 {
			t.Errorf("calls = %d, want 1", n)
		}
	})
	t.Run("429 and a dropped connection are retried", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, script(
			modeltest.Step{Status: 429, Headers: map[string]string{"Retry-After-Ms": "20"}},
			modeltest.Step{Drop: true},
			modeltest.Step{Text: "fine"},
		), setup{})
		out, err := h.agent.Run(t.Context(), "task")
		if err != nil || out.Final != "fine" {
			t.Fatalf("Run = %+v, %v", out, err)
		}
		retries := 0
		for _, e := range h.sink.all() {
			if e.Type == events.Warning && strings.Contains(e.Message, "retrying") {
				retries++
			}
		}
		if retries != 2 {
			t.Errorf("retry warnings = %d, want 2", retries)
		}
	})
}

// loopResponder calls execute forever and answers "final summary" when tools are off.
func loopResponder(command string) modeltest.Responder {
	return func(c modeltest.Call) modeltest.Step {
		if c.ToolChoice == "none" {
			return modeltest.Step{Text: "final summary", Usage: modeltest.Usage{InputTokens: 100000, OutputTokens: 500}}
		}
		return modeltest.Step{Text: "working", ToolCalls: []modeltest.ToolCall{call("execute", map[string]any{"command": command})},
			Usage: modeltest.Usage{InputTokens: 100000, OutputTokens: 10000}}
	}
}

func TestMaxTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, loopResponder("true"), setup{configure: func(o *agent.Options) { o.MaxTurns = 3 }})
	out, err := h.agent.Run(t.Context(), "loop forever")
	if err != nil {
		t.Fatal(err)
	}
	if !out.Partial || out.StopReason != agent.StopMaxTurns || out.Final != "final summary" {
		t.Errorf("outcome = partial %v stop %q final %q", out.Partial, out.StopReason, out.Final)
	}
	if out.Record.Turns != 3 || len(out.Commands) != 3 {
		t.Errorf("turns = %d, commands = %d; want 3 and 3", out.Record.Turns, len(out.Commands))
	}
	calls := h.srv.Calls()
	if len(calls) != 4 {
		t.Fatalf("model calls = %d, want 3 turns + 1 final answer", len(calls))
	}
	last := calls[3]
	if last.ToolChoice != "none" {
		t.Errorf("final call tool_choice = %q, want none", last.ToolChoice)
	}
	msgs := last.Request.Messages
	if txt := msgs[len(msgs)-1].Text; !strings.Contains(txt, "turn budget (3 turns) is used up") {
		t.Errorf("final call's last message = %q", txt)
	}
}

func TestMaxCost(t *testing.T) {
	t.Parallel()
	price := model.WithPrices(model.PriceTable{"claude-sonnet-4-5": {Input: 1, Output: 1}}) // $0.11 per acting turn here
	cases := []struct {
		name       string
		max        float64
		wantTurns  int
		wantCalls  int
		wantFinal  string
		finalLimit int
	}{
		{"two turns then a final answer", 0.40, 2, 3, "final summary", 4096},
		{"one turn then a final answer", 0.30, 1, 2, "final summary", 4096},
		{"no money left for a final answer", 0.20, 1, 1, "[talkops: the agent stopped (max_cost)", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, loopResponder("true"), setup{modelOpts: []model.Option{price}, configure: func(o *agent.Options) { o.MaxCostUSD = tc.max }})
			out, err := h.agent.Run(t.Context(), "spend")
			if err != nil {
				t.Fatal(err)
			}
			if !out.Partial || out.StopReason != agent.StopMaxCost || !strings.Contains(out.Final, tc.wantFinal) {
				t.Errorf("outcome = partial %v stop %q final %q", out.Partial, out.StopReason, out.Final)
			}
			if out.Record.Turns != tc.wantTurns || len(h.srv.Calls()) != tc.wantCalls {
				t.Errorf("turns = %d, calls = %d; want %d and %d", out.Record.Turns, len(h.srv.Calls()), tc.wantTurns, tc.wantCalls)
			}
			if c := out.Record.Usage.CostUSD; c > tc.max {
				t.Errorf("spent $%.4f, over the $%.2f cap", c, tc.max)
			}
			if tc.finalLimit > 0 {
				if got := h.srv.Calls()[tc.wantCalls-1].MaxTokens; got != tc.finalLimit {
					t.Errorf("final call max_tokens = %d, want %d", got, tc.finalLimit)
				}
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, loopResponder("sleep 30"), setup{configure: func(o *agent.Options) { o.FinalReserve = time.Second }})
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	start := time.Now()
	out, err := h.agent.Run(ctx, "sleep")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("Run took %v, past the deadline", d)
	}
	if !out.Partial || out.StopReason != agent.StopTimeout || out.Final != "final summary" {
		t.Errorf("outcome = partial %v stop %q final %q", out.Partial, out.StopReason, out.Final)
	}
	if res := lastResults(t, h.srv, 2); !strings.Contains(res[0].Content, "the run stopped") {
		t.Errorf("the interrupted command's result = %q", res[0].Content)
	}
}

func TestStallWatchdog(t *testing.T) {
	t.Parallel()
	t.Run("model hangs", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, script(
			modeltest.Step{Text: "never", Delay: modeltest.Duration(time.Minute)},
			modeltest.Step{Text: "stalled summary"},
		), setup{configure: func(o *agent.Options) { o.StallTimeout = 300 * time.Millisecond }})
		out, err := h.agent.Run(t.Context(), "task")
		if err != nil {
			t.Fatal(err)
		}
		if !out.Partial || out.StopReason != agent.StopStalled || out.Final != "stalled summary" {
			t.Errorf("outcome = partial %v stop %q final %q", out.Partial, out.StopReason, out.Final)
		}
	})
	t.Run("streaming model is progress", func(t *testing.T) {
		t.Parallel()
		// About 2s of streaming, 50ms between events, under a 400ms watchdog.
		long := strings.Repeat("still writing; ", 10)
		h := newHarness(t, script(
			modeltest.Step{Text: long, ChunkSize: 4, EventDelay: modeltest.Duration(50 * time.Millisecond)},
		), setup{configure: func(o *agent.Options) { o.StallTimeout = 400 * time.Millisecond }})
		out, err := h.agent.Run(t.Context(), "task")
		if err != nil {
			t.Fatal(err)
		}
		if out.StopReason != agent.StopDone || strings.TrimSpace(out.Final) != strings.TrimSpace(long) {
			t.Errorf("a model streaming every 50ms was treated as stalled: stop %q final %q", out.StopReason, out.Final)
		}
	})
	t.Run("stream goes silent", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, script(
			modeltest.Step{Text: "never", Silence: modeltest.Duration(time.Minute)},
			modeltest.Step{Text: "stalled summary"},
		), setup{configure: func(o *agent.Options) { o.StallTimeout = 400 * time.Millisecond }})
		out, err := h.agent.Run(t.Context(), "task")
		if err != nil {
			t.Fatal(err)
		}
		if !out.Partial || out.StopReason != agent.StopStalled || out.Final != "stalled summary" {
			t.Errorf("outcome = partial %v stop %q final %q", out.Partial, out.StopReason, out.Final)
		}
	})
	t.Run("silent command", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, loopResponder("sleep 30"), setup{configure: func(o *agent.Options) { o.StallTimeout = 500 * time.Millisecond }})
		start := time.Now()
		out, err := h.agent.Run(t.Context(), "task")
		if err != nil {
			t.Fatal(err)
		}
		if out.StopReason != agent.StopStalled || time.Since(start) > 10*time.Second {
			t.Errorf("stop = %q after %v, want stalled quickly", out.StopReason, time.Since(start))
		}
	})
	t.Run("chatty command is progress", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, script(
			modeltest.Step{ToolCalls: []modeltest.ToolCall{call("execute", map[string]any{"command": "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 0.1; done"})}},
			modeltest.Step{Text: "counted"},
		), setup{configure: func(o *agent.Options) { o.StallTimeout = 400 * time.Millisecond }})
		out, err := h.agent.Run(t.Context(), "count")
		if err != nil {
			t.Fatal(err)
		}
		if out.StopReason != agent.StopDone || out.Final != "counted" {
			t.Errorf("a command printing every 100ms was treated as stalled: %+v", out)
		}
	})
}

func TestApprovalModesInRun(t *testing.T) {
	t.Parallel()
	steps := func() modeltest.Responder {
		return script(
			modeltest.Step{ToolCalls: []modeltest.ToolCall{
				call("execute", map[string]any{"command": "echo allowed > out.txt"}),
				call("execute", map[string]any{"command": "printenv"}),
				call("write_file", map[string]any{"path": "w.txt", "content": "w"}),
				call("read_file", map[string]any{"path": "in.txt"}),
			}},
			modeltest.Step{Text: "summary"},
		)
	}
	cases := []struct {
		mode        agent.Mode
		wantDenied  []string
		wantPartial bool
		wantStop    string
		wantFiles   []string
	}{
		{agent.ModeDefault, []string{"execute", "execute", "write_file"}, true, agent.StopApprovalRequired, nil},
		{agent.ModeSmart, []string{"execute"}, false, agent.StopDone, []string{"out.txt", "w.txt"}},
		{agent.ModeYes, nil, false, agent.StopDone, []string{"out.txt", "w.txt"}},
	}
	for _, tc := range cases {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, steps(), setup{configure: func(o *agent.Options) { o.Approval = agent.Approval{Mode: tc.mode} }})
			if err := os.WriteFile(filepath.Join(h.dir, "in.txt"), []byte("input\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := h.agent.Run(t.Context(), "task")
			if err != nil {
				t.Fatal(err)
			}
			var denied []string
			for _, d := range out.Record.Denials {
				denied = append(denied, d.Tool)
				if d.Reason == "" || d.Turn != 1 || d.Input == "" {
					t.Errorf("denial = %+v", d)
				}
			}
			if diff := cmp.Diff(tc.wantDenied, denied); diff != "" {
				t.Errorf("denials (-want +got):\n%s", diff)
			}
			if h.sink.count(events.ToolDenied) != len(tc.wantDenied) {
				t.Errorf("tool.denied events = %d, want %d", h.sink.count(events.ToolDenied), len(tc.wantDenied))
			}
			if out.Partial != tc.wantPartial || out.StopReason != tc.wantStop {
				t.Errorf("outcome partial %v stop %q; want %v %q", out.Partial, out.StopReason, tc.wantPartial, tc.wantStop)
			}
			for _, f := range tc.wantFiles {
				if _, err := os.Stat(filepath.Join(h.dir, f)); err != nil {
					t.Errorf("%s not written: %v", f, err)
				}
			}
			if tc.wantFiles == nil {
				if _, err := os.Stat(filepath.Join(h.dir, "out.txt")); err == nil {
					t.Errorf("a denied command ran")
				}
			}
			res := lastResults(t, h.srv, 2)
			if !strings.Contains(res[3].Content, "input") {
				t.Errorf("read_file was not allowed in %s mode: %q", tc.mode, res[3].Content)
			}
			if len(tc.wantDenied) > 0 && !strings.Contains(res[1].Content, "Denied by the approval policy") {
				t.Errorf("the model did not get the denial: %q", res[1].Content)
			}
		})
	}
}

func TestPathConfinementInRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, script(
		modeltest.Step{ToolCalls: []modeltest.ToolCall{
			call("read_file", map[string]any{"path": "../etc/passwd"}),
			call("read_file", map[string]any{"path": "root/etc/passwd"}),
			call("write_file", map[string]any{"path": "root/tmp/escaped.txt", "content": "x"}),
		}},
		modeltest.Step{Text: "could not"},
	), setup{})
	if err := os.Symlink("/", filepath.Join(h.dir, "root")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.agent.Run(t.Context(), "escape"); err != nil {
		t.Fatal(err)
	}
	for i, r := range lastResults(t, h.srv, 2) {
		if !r.IsError || !strings.Contains(r.Content, "outside the working directory") || strings.Contains(r.Content, "root:x:0") {
			t.Errorf("result %d = %+v, want a refusal", i, r)
		}
	}
	if _, err := os.Stat("/tmp/escaped.txt"); err == nil {
		t.Errorf("write_file escaped through a symlink to /")
	}
}

func TestOutputTruncation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, script(
		modeltest.Step{ToolCalls: []modeltest.ToolCall{call("execute", map[string]any{"command": "seq 1 100000"})}},
		modeltest.Step{Text: "long"},
	), setup{configure: func(o *agent.Options) { o.MaxToolOutput = 2000 }})
	out, err := h.agent.Run(t.Context(), "print a lot")
	if err != nil {
		t.Fatal(err)
	}
	res := lastResults(t, h.srv, 2)[0].Content
	if len(res) > 2000 {
		t.Errorf("the model saw %d bytes, want at most 2000", len(res))
	}
	for _, s := range []string{"1\n2\n3\n", "99999\n100000\n", "bytes omitted", "tool-outputs/1.txt"} {
		if !strings.Contains(res, s) {
			t.Errorf("cut output lacks %q:\n%s", s, res)
		}
	}
	full, err := os.ReadFile(filepath.Join(h.reportDir, "tool-outputs", "1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(full), "\n50000\n") || !strings.HasSuffix(string(full), "100000\n[exit code 0]") {
		t.Errorf("saved output is not whole (%d bytes)", len(full))
	}
	if c := out.Commands[0]; c.OutputFile != "tool-outputs/1.txt" || !c.Truncated || len(c.Stdout) > 65<<10 ||
		!strings.HasPrefix(c.Stdout, "1\n2\n") || !strings.HasSuffix(c.Stdout, "\n100000\n") {
		t.Errorf("command record = file %q, truncated %v, %d stdout bytes", c.OutputFile, c.Truncated, len(c.Stdout))
	}
}

func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const token = "ghp_runnerTokenCanary0123456789"
	h := newHarness(t, script(
		modeltest.Step{Text: "The key is " + canaryKey, ToolCalls: []modeltest.ToolCall{
			call("execute", map[string]any{"command": "echo " + canaryKey + "; echo $GH_TOKEN; echo " + token + " >&2"}),
			call("write_file", map[string]any{"path": "leak.txt", "content": canaryKey + "\n"}),
			call("report_finding", map[string]any{"severity": "error", "title": "key " + canaryKey, "message": "token " + token}),
		}},
		modeltest.Step{ToolCalls: []modeltest.ToolCall{
			call("read_file", map[string]any{"path": "leak.txt"}),
			call("execute", map[string]any{"command": "for i in $(seq 1 3000); do echo " + canaryKey + "; done"}),
		}},
		modeltest.Step{Text: "Final: " + canaryKey + " and " + token},
	), setup{configure: func(o *agent.Options) {
		o.Secrets = []string{token}
		o.ExecEnv = map[string]string{"GH_TOKEN": token}
		o.MaxToolOutput = 1000
	}})
	out, err := h.agent.Run(t.Context(), "leak it")
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := json.Marshal(out)
	evs, _ := json.Marshal(h.sink.all())
	places := map[string]string{"outcome": string(blob), "events": string(evs)}
	err = filepath.WalkDir(h.reportDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		places[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("read the report directory: %v", err)
	}
	if len(places) < 4 {
		t.Fatalf("expected a transcript and saved outputs, got %v", places)
	}
	for where, text := range places {
		for _, secret := range []string{canaryKey, token} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains a secret", where)
			}
		}
		if !strings.Contains(text, "***") {
			t.Errorf("%s shows no redaction marker", where)
		}
	}
	// The model, too, sees tool output redacted.
	for _, r := range lastResults(t, h.srv, 2) {
		if strings.Contains(r.Content, token) || strings.Contains(r.Content, canaryKey) {
			t.Errorf("tool output sent to the model contains a secret: %q", r.Content)
		}
	}
}

func TestRevise(t *testing.T) {
	t.Parallel()
	h := newHarness(t, script(
		modeltest.Step{ToolCalls: []modeltest.ToolCall{call("execute", map[string]any{"command": "echo v1 > app.txt"})}},
		modeltest.Step{Text: "v1 done"},
		modeltest.Step{ToolCalls: []modeltest.ToolCall{call("execute", map[string]any{"command": "echo v2 > app.txt"})}},
		modeltest.Step{Text: "v2 done"},
	), setup{configure: func(o *agent.Options) { o.MaxTurns = 5 }})
	out, err := h.agent.Run(t.Context(), "make v1")
	if err != nil || out.Final != "v1 done" {
		t.Fatalf("Run = %+v, %v", out, err)
	}
	out, err = h.agent.Revise(t.Context(), "Unmet: the file must say v2.")
	if err != nil || out.Final != "v2 done" || out.Partial {
		t.Fatalf("Revise = %+v, %v", out, err)
	}
	if data, _ := os.ReadFile(filepath.Join(h.dir, "app.txt")); string(data) != "v2\n" {
		t.Errorf("app.txt = %q: the revision did not run in the same sandbox", data)
	}
	if out.Record.Turns != 4 || len(out.Commands) != 2 {
		t.Fatalf("turns %d commands %d; want cumulative 4 and 2", out.Record.Turns, len(out.Commands))
	}
	for i, c := range out.Commands {
		if c.Pass != i+1 || c.Turn != 2*i+1 || c.Duration <= 0 {
			t.Errorf("command %d %q: pass %d turn %d duration %v; want pass %d, turn %d and the measured duration", i, c.Command, c.Pass, c.Turn, c.Duration, i+1, 2*i+1)
		}
	}
	third := h.srv.Calls()[2].Request.Messages
	if len(third) != 5 || !strings.Contains(third[4].Text, "must say v2") || third[3].Text != "v1 done" {
		t.Errorf("the revision did not continue the conversation: %+v", third)
	}

	// The turn budget spans Run and Revise: with 4 of 5 used, one more acting turn and
	// then the final answer.
	h2 := newHarness(t, loopResponder("true"), setup{configure: func(o *agent.Options) { o.MaxTurns = 2 }})
	out, err = h2.agent.Run(t.Context(), "loop")
	if err != nil || out.StopReason != agent.StopMaxTurns {
		t.Fatalf("Run = %+v, %v", out, err)
	}
	before := len(h2.srv.Calls())
	out, err = h2.agent.Revise(t.Context(), "try again")
	if err != nil || out.StopReason != agent.StopMaxTurns || !out.Partial || len(h2.srv.Calls()) != before {
		t.Errorf("Revise after exhaustion = %+v, %v, %d new calls; want the same partial outcome and no calls", out, err, len(h2.srv.Calls())-before)
	}
}

func TestInterruptAndBrokenSandbox(t *testing.T) {
	t.Parallel()
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, script(modeltest.Step{Text: "late", Delay: modeltest.Duration(time.Minute)}), setup{})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(200*time.Millisecond, cancel)
		out, err := h.agent.Run(ctx, "task")
		if !errors.Is(err, context.Canceled) || out.StopReason != agent.StopInterrupted || !out.Partial {
			t.Errorf("Run = %+v, %v; want interrupted with context.Canceled", out, err)
		}
	})
	t.Run("closed sandbox", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, script(modeltest.Step{ToolCalls: []modeltest.ToolCall{call("execute", map[string]any{"command": "true"})}}), setup{})
		h.sb.Close(t.Context())
		out, err := h.agent.Run(t.Context(), "task")
		if !errors.Is(err, providers.ErrClosed) || out.StopReason != agent.StopError {
			t.Errorf("Run = %+v, %v; want an error wrapping ErrClosed", out, err)
		}
	})
}

func TestDuplicateFindings(t *testing.T) {
	t.Parallel()
	f := map[string]any{"path": "a.tf", "start_line": 3, "severity": "warning", "title": "T", "message": "M", "rule": "r"}
	g := map[string]any{"path": "a.tf", "start_line": 9, "severity": "warning", "title": "T", "message": "M", "rule": "r"}
	h := newHarness(t, script(
		modeltest.Step{ToolCalls: []modeltest.ToolCall{call("report_finding", f), call("report_finding", g)}},
		modeltest.Step{Text: "ok"},
	), setup{configure: func(o *agent.Options) { o.Approval = agent.Approval{} }})
	out, err := h.agent.Run(t.Context(), "review")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Findings) != 1 || out.Partial {
		t.Errorf("findings = %+v partial %v; want one, and report_finding needs no approval", out.Findings, out.Partial)
	}
	res := lastResults(t, h.srv, 2)
	if n := strings.Count(res[0].Content+res[1].Content, "Already recorded"); n != 1 {
		t.Errorf("results = %q / %q; want exactly one duplicate notice", res[0].Content, res[1].Content)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewServer(modeltest.Script{})
	defer srv.Close()
	m, _ := model.New("openai:my-finetune", srv.OpenAIURL(), func(string) string { return "k" })
	sb, err := local.New(local.Options{}).Create(t.Context(), providers.Spec{RunID: "x", ProjectDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(t.Context())
	for name, o := range map[string]agent.Options{
		"no model":             {Sandbox: sb},
		"no sandbox":           {Model: m},
		"negative turns":       {Model: m, Sandbox: sb, MaxTurns: -1},
		"negative cost":        {Model: m, Sandbox: sb, MaxCostUSD: -2},
		"cost cap unpriceable": {Model: m, Sandbox: sb, MaxCostUSD: 5},
		"empty pattern":        {Model: m, Sandbox: sb, Approval: agent.Approval{Mode: agent.ModeSmart, Deny: []string{" "}}},
	} {
		if _, err := agent.New(o); !errors.Is(err, agent.ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	a, err := agent.New(agent.Options{Model: m, Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	// Validate needs no sandbox: the CLI checks the options before provisioning one.
	for name, o := range map[string]agent.Options{
		"no model":             {},
		"negative turns":       {Model: m, MaxTurns: -1},
		"cost cap unpriceable": {Model: m, MaxCostUSD: 5},
		"empty pattern":        {Model: m, Approval: agent.Approval{Mode: agent.ModeSmart, Deny: []string{" "}}},
	} {
		if err := o.Validate(); !errors.Is(err, agent.ErrConfig) {
			t.Errorf("Validate %s: err = %v, want ErrConfig", name, err)
		}
	}
	if err := (agent.Options{Model: m, MaxTurns: 3, Approval: agent.Approval{Mode: agent.ModeSmart, Deny: []string{"rm *"}}}).Validate(); err != nil {
		t.Errorf("Validate of valid options without a sandbox: %v", err)
	}
	if _, err := a.Revise(t.Context(), "x"); err == nil {
		t.Errorf("Revise before Run succeeded")
	}
	if _, err := a.Run(t.Context(), "  "); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("empty prompt: %v", err)
	}
}

// panicSandbox panics in Exec, as a broken provider might.
type panicSandbox struct{ providers.Sandbox }

func (panicSandbox) Exec(context.Context, providers.Cmd) (providers.ExecResult, error) {
	panic("provider bug")
}

// Parallel tool calls run on their own goroutines, where a panic would kill talkops before
// teardown: it must come back as an error from Run instead.
func TestPanicInParallelToolCallIsAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, script(
		modeltest.Step{ToolCalls: []modeltest.ToolCall{
			call("read_file", map[string]any{"path": "a.txt"}),
			call("read_file", map[string]any{"path": "b.txt"}),
		}},
		modeltest.Step{Text: "done"},
	), setup{configure: func(o *agent.Options) { o.Sandbox = panicSandbox{o.Sandbox} }})
	_, err := h.agent.Run(t.Context(), "read two files")
	if err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("Run() error = %v, want the recovered panic", err)
	}
}

// TestGrepWithholdsWhatReadRefuses: a grep over a directory leaves out the files
// read_file is refused (.env, ~/.aws/…) in the modes that refuse them, and shows them
// under -y, where read_file shows them too.
func TestGrepWithholdsWhatReadRefuses(t *testing.T) {
	t.Parallel()
	for _, mode := range []agent.Mode{agent.ModeDefault, agent.ModeSmart, agent.ModeYes} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, script(
				modeltest.Step{ToolCalls: []modeltest.ToolCall{
					call("grep", map[string]any{"pattern": "TOKEN"}),
					call("grep", map[string]any{"pattern": "TOKEN", "files_only": true}),
					call("grep", map[string]any{"pattern": "TOKEN", "path": "deploy"}),
					call("read_file", map[string]any{"path": "deploy/.env.production"}),
				}},
				modeltest.Step{Text: "done"},
			), setup{configure: func(o *agent.Options) { o.Approval = agent.Approval{Mode: mode} }})
			for rel, content := range map[string]string{
				".env":                   "TOKEN=dotenv-canary\n",
				"deploy/.env.production": "TOKEN=prod-canary\n",
				"home/.aws/credentials":  "TOKEN=aws-canary\n",
				"my dir/.env":            "TOKEN=spaced-canary\n",
				"app.go":                 "var TOKEN = os.Getenv(\"TOKEN\")\n",
				".env.example":           "TOKEN=example-value\n",
				"odd:1:name.txt":         "TOKEN in an odd file name\n",
			} {
				p := filepath.Join(h.dir, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.agent.Run(t.Context(), "search"); err != nil {
				t.Fatal(err)
			}
			res := lastResults(t, h.srv, 2)
			all, names, sub, read := res[0].Content, res[1].Content, res[2].Content, res[3]
			for _, want := range []string{"app.go:1:", ".env.example:1:", "odd:1:name.txt:1:"} {
				if !strings.Contains(all, want) {
					t.Errorf("grep lost %s: %q", want, all)
				}
			}
			if mode == agent.ModeYes {
				if !strings.Contains(all, "dotenv-canary") || !strings.Contains(sub, "prod-canary") || !strings.Contains(read.Content, "prod-canary") {
					t.Errorf("-y withheld a file: grep %q, sub %q, read %q", all, sub, read.Content)
				}
				return
			}
			if !read.IsError || strings.Contains(read.Content, "prod-canary") {
				t.Errorf("read_file of .env.production = %+v, want refused", read)
			}
			for _, canary := range []string{"dotenv-canary", "prod-canary", "aws-canary", "spaced-canary"} {
				if strings.Contains(all, canary) || strings.Contains(sub, canary) {
					t.Errorf("grep showed %s in %s mode: %q %q", canary, mode, all, sub)
				}
			}
			for _, name := range []string{".env\n", ".env.production", ".aws/credentials"} {
				if strings.Contains(names, name) {
					t.Errorf("grep files_only listed %s in %s mode: %q", name, mode, names)
				}
			}
			if !strings.Contains(sub, "No matches") {
				t.Errorf("grep of a directory holding only a withheld file = %q, want no matches", sub)
			}
		})
	}
}
