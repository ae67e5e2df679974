package judge_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/changeset"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/rubric"
	"github.com/talkops/talkops/rubric/evidence"
	"github.com/talkops/talkops/rubric/judge"
)

// format is one wire format of the fake model server, spoken by the real SDK client.
type format struct {
	name string
	spec string
	url  func(*modeltest.Server) string
}

var formats = []format{
	{name: "anthropic", spec: "anthropic:claude-judge-test", url: func(s *modeltest.Server) string { return s.URL }},
	{name: "openai", spec: "openai:gpt-judge-test", url: func(s *modeltest.Server) string { return s.OpenAIURL() }},
}

const apiKey = "sk-test-judge-key"

// newModel returns the real client for f talking to srv, without its own retries (the
// judge's retry is what the tests look at).
func newModel(t testing.TB, f format, srv *modeltest.Server) model.Model {
	t.Helper()
	getenv := func(k string) string {
		if k == "ANTHROPIC_API_KEY" || k == "OPENAI_API_KEY" {
			return apiKey
		}
		return ""
	}
	m, err := model.New(f.spec, f.url(srv), getenv, model.WithRetry(model.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatalf("model.New(%s): %v", f.spec, err)
	}
	return m
}

// newJudge starts a fake server answering with respond and returns a judge on it.
func newJudge(t *testing.T, f format, respond modeltest.Responder, opts judge.Options) (*judge.Judge, *modeltest.Server) {
	t.Helper()
	srv := modeltest.NewServerFunc(respond, modeltest.WithAPIKey(apiKey))
	t.Cleanup(srv.Close)
	opts.Model = newModel(t, f, srv)
	if opts.ModelName == "" {
		opts.ModelName = f.spec
	}
	j, err := judge.New(opts)
	if err != nil {
		t.Fatalf("judge.New: %v", err)
	}
	return j, srv
}

// block is one evidence block as the judge model received it.
type block struct {
	ID, Source, Kind string
	Truncated        bool
	Content          string
}

// prompt is one judge call as the fake server received it, with its evidence parsed
// back using the nonce the system prompt announces.
type prompt struct {
	Nonce  string
	System string
	User   string
	IDs    []string
	Blocks []block
}

var (
	nonceRe  = regexp.MustCompile(`<evidence-([0-9a-f]{16}) id="E1"`)
	headerRe = regexp.MustCompile(`^ id="(E\d+)" source=("(?:[^"\\]|\\.)*") kind="([^"]*)" bytes="(\d+)" truncated="(true|false)"`)
)

func parsePrompt(t *testing.T, c modeltest.Call) prompt {
	t.Helper()
	if c.Request == nil || len(c.Request.Messages) == 0 {
		t.Fatalf("call %d has no request", c.N)
	}
	p := prompt{System: c.Request.System, User: c.Request.Messages[0].Text}
	m := nonceRe.FindStringSubmatch(p.System)
	if m == nil {
		t.Fatalf("the system prompt announces no nonce:\n%s", p.System)
	}
	p.Nonce = m[1]
	open, closeLine := "<evidence-"+p.Nonce, "\n</evidence-"+p.Nonce+">\n"
	rest := p.User
	for {
		i := strings.Index(rest, open+" ")
		if i < 0 {
			break
		}
		rest = rest[i+len(open):]
		nl := strings.IndexByte(rest, '\n')
		h := headerRe.FindStringSubmatch(rest[:nl])
		if h == nil {
			t.Fatalf("malformed evidence header %q", rest[:nl])
		}
		end := strings.Index(rest, closeLine)
		if end < 0 {
			t.Fatalf("evidence block %s is not closed", h[1])
		}
		src, err := strconv.Unquote(h[2])
		if err != nil {
			t.Fatalf("source %s: %v", h[2], err)
		}
		p.Blocks = append(p.Blocks, block{ID: h[1], Source: src, Kind: h[3], Truncated: h[5] == "true", Content: rest[nl+1 : end+1]})
		rest = rest[end+len(closeLine):]
	}
	if len(c.Request.Tools) != 1 || c.Request.Tools[0].Name != judge.ToolName {
		t.Fatalf("call %d offers tools %+v, want only %s", c.N, c.Request.Tools, judge.ToolName)
	}
	var schema struct {
		Properties struct {
			Verdicts struct {
				Items struct {
					Properties struct {
						ID struct {
							Enum []string `json:"enum"`
						} `json:"id"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"verdicts"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(c.Request.Tools[0].Schema, &schema); err != nil {
		t.Fatalf("tool schema: %v", err)
	}
	p.IDs = schema.Properties.Verdicts.Items.Properties.ID.Enum
	return p
}

// find returns the first block whose source is src.
func (p prompt) find(src string) (block, bool) {
	for _, b := range p.Blocks {
		if b.Source == src {
			return b, true
		}
	}
	return block{}, false
}

// verdict is one entry of a scripted submit_verdicts call.
type verdict struct {
	ID           string   `json:"id"`
	Reasoning    string   `json:"reasoning"`
	EvidenceRefs []string `json:"evidence_refs"`
	Passed       bool     `json:"passed"`
	Insufficient bool     `json:"insufficient_evidence,omitempty"`
	Gap          string   `json:"gap"`
	Confidence   string   `json:"confidence"`
}

func pass(id string, refs ...string) verdict {
	return verdict{ID: id, Reasoning: "the evidence shows it", EvidenceRefs: append([]string{}, refs...), Passed: true, Confidence: "high"}
}

func fail(id, gap string, refs ...string) verdict {
	return verdict{ID: id, Reasoning: "the evidence shows it is not met", EvidenceRefs: append([]string{}, refs...), Gap: gap, Confidence: "high"}
}

// answer is a scripted reply calling submit_verdicts.
func answer(vs ...verdict) modeltest.Step {
	in, _ := json.Marshal(map[string]any{"verdicts": vs})
	return modeltest.Step{ToolCalls: []modeltest.ToolCall{{Name: judge.ToolName, Input: in}}}
}

// honest is a scripted judge that decides each criterion of a call from the evidence it
// was actually shown, the way a careful model would.
func honest(t *testing.T, decide func(p prompt, id string) verdict) modeltest.Responder {
	return func(c modeltest.Call) modeltest.Step {
		p := parsePrompt(t, c)
		var vs []verdict
		for _, id := range p.IDs {
			vs = append(vs, decide(p, id))
		}
		return answer(vs...)
	}
}

// steps answers the n-th call (1-based) with steps[n-1], and the last step after that.
func steps(ss ...modeltest.Step) modeltest.Responder {
	return func(c modeltest.Call) modeltest.Step {
		return ss[min(c.N, len(ss))-1]
	}
}

// recorder is an events.Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []events.Event
}

func (r *recorder) Emit(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) ofType(t events.Type) []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []events.Event
	for _, e := range r.events {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

// parseRubric parses a TOML rubric given inline.
func parseRubric(t testing.TB, src string) *rubric.Rubric {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rubric.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := rubric.Parse("rubric.toml", dir)
	if err != nil {
		t.Fatalf("rubric.Parse: %v", err)
	}
	return r
}

// parseText parses a free-text rubric.
func parseText(t testing.TB, text string) *rubric.Rubric {
	t.Helper()
	r, err := rubric.Parse(text, t.TempDir())
	if err != nil {
		t.Fatalf("rubric.Parse(%q): %v", text, err)
	}
	return r
}

// newLocal returns a local sandbox working in a new directory holding files.
func newLocal(t testing.TB, files map[string]string) providers.Sandbox {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	p := local.New(local.Options{Getenv: func(k string) string {
		if k == "TMPDIR" {
			return tmp
		}
		return os.Getenv(k)
	}})
	sb, err := p.Create(context.Background(), providers.Spec{RunID: "judge-test", ProjectDir: dir})
	if err != nil {
		t.Fatalf("local.Create: %v", err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// takeBaseline records the sandbox's workspace on the host, as the runner does after the
// setup script, and removes the record when the test ends.
func takeBaseline(t testing.TB, sb providers.Sandbox) evidence.Differ {
	t.Helper()
	rec := &changeset.Recorder{Dir: t.TempDir()}
	if _, err := rec.Baseline(t.Context(), sb); err != nil {
		t.Fatalf("record the baseline: %v", err)
	}
	t.Cleanup(func() {
		if err := rec.Close(); err != nil {
			t.Errorf("close the record: %v", err)
		}
	})
	return &hostRecord{rec: rec}
}

// hostRecord records the workspace again before each diff, as the runner does after each
// agent pass.
type hostRecord struct {
	rec  *changeset.Recorder
	pass int
}

func (h *hostRecord) Diff(ctx context.Context, sb providers.Sandbox) (*evidence.Diff, error) {
	h.pass++
	if _, err := h.rec.Changes(ctx, sb, h.pass); err != nil {
		return nil, err
	}
	return h.rec.Diff(ctx, sb)
}

// sh runs a shell script in the sandbox.
func sh(t testing.TB, sb providers.Sandbox, script string) {
	t.Helper()
	res, err := sb.Exec(context.Background(), providers.Shell(script))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sh %q: err %v, exit %d: %s", script, err, res.ExitCode, res.Stderr)
	}
}
