package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/langsmith"
	"github.com/talkops/talkops/providers/runloop"
	"github.com/talkops/talkops/providers/vercel"
	"github.com/talkops/talkops/report"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// The owning packages fuzz their parsers (config, rubric, findings, sync, archives, the
// shell parser). These targets cover untrusted input they did not: model replies on both
// wire formats, tool calls reaching the agent loop, cloud provider API answers, and a
// result.json handed to `talkops report --from` (a fork's artifact). Seeds are in
// testdata/fuzz/<target>; `.ci/fuzz.sh` runs every target briefly.

// cannedServer answers every request with the current status and body; one per fuzz
// worker process (fuzz inputs run one at a time in a worker).
type cannedServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	status int
	body   []byte
}

var (
	cannedOnce sync.Once
	canned     *cannedServer
)

func cannedHTTP() *cannedServer {
	cannedOnce.Do(func() {
		canned = &cannedServer{}
		canned.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			canned.mu.Lock()
			status, body := canned.status, canned.body
			canned.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(body)
		}))
	})
	return canned
}

func (c *cannedServer) set(status int, body []byte) {
	c.mu.Lock()
	c.status, c.body = status, body
	c.mu.Unlock()
}

// loopbackClient sends every request, whatever URL a fuzzed answer points at, to the
// canned server: nothing leaves the machine.
func (c *cannedServer) loopbackClient() *http.Client {
	addr := c.srv.Listener.Addr().String()
	return &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// bounded runs fn and fails the test if it does not return within d: a fuzzed answer
// must never make a client hang.
func bounded(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// FuzzModelReply feeds arbitrary bodies to the Anthropic and OpenAI clients as a 200
// answer: they must return a Response or an error, never panic or hang, and a Response
// must be usable (every tool call has an id and a JSON input).
func FuzzModelReply(f *testing.F) {
	f.Add(false, []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"toolu_1","name":"execute","input":{"command":"ls"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}`))
	f.Add(false, []byte(`{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"","name":"","input":"{\"command\": \"ec"}],"stop_reason":"end_turn"}`))
	f.Add(false, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add(true, []byte(`{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"execute","arguments":"{\"command\":\"ls\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":3}}`))
	f.Add(true, []byte(`{"choices":[]}`))
	f.Add(true, []byte(`{"choices":[{"message":{"tool_calls":[{"type":"function","function":{"name":"x","arguments":"not json"}}],"refusal":"no"},"finish_reason":"content_filter"}]}`))
	f.Add(true, []byte(`not json at all`))
	c := cannedHTTP()
	f.Fuzz(func(t *testing.T, openAI bool, body []byte) {
		c.set(http.StatusOK, body)
		spec, base := "anthropic:claude-test", c.srv.URL
		if openAI {
			spec, base = "openai:gpt-test", c.srv.URL+"/v1"
		}
		m, err := model.New(spec, base, func(string) string { return "sk-fuzz" },
			model.WithHTTPClient(c.loopbackClient()), model.WithRetry(model.RetryPolicy{MaxAttempts: 1}),
			model.WithRequestTimeout(2*time.Second))
		if err != nil {
			t.Fatalf("model.New: %v", err)
		}
		var resp model.Response
		var cerr error
		bounded(t, 5*time.Second, "Complete", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			resp, cerr = m.Complete(ctx, model.Request{
				Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}},
				Tools:    []model.Tool{{Name: "execute", Description: "run", Schema: json.RawMessage(`{"type":"object"}`)}},
			})
		})
		if cerr != nil {
			return
		}
		for _, tc := range resp.Message.ToolCalls {
			if !json.Valid(tc.Input) {
				t.Errorf("tool call %q input is not JSON: %q", tc.Name, tc.Input)
			}
		}
		if _, err := json.Marshal(resp); err != nil {
			t.Errorf("the response does not marshal: %v", err)
		}
	})
}

// nullSandbox is a sandbox where nothing runs: every command succeeds with no output and
// no file exists, so fuzzed tool calls are dispatched without touching the host.
type nullSandbox struct{}

func (nullSandbox) ID() string      { return "null" }
func (nullSandbox) WorkDir() string { return "/workspace" }
func (nullSandbox) Exec(ctx context.Context, c providers.Cmd) (providers.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return providers.ExecResult{}, err
	}
	return providers.ExecResult{}, nil
}
func (nullSandbox) Upload(context.Context, string, io.Reader) error { return nil }
func (nullSandbox) Download(context.Context, string) (io.ReadCloser, error) {
	return nil, fs.ErrNotExist
}
func (nullSandbox) Close(context.Context) error { return nil }

// replayModel answers the first call with the fuzzed tool calls and every later one with
// a final text.
type replayModel struct {
	mu    sync.Mutex
	calls int
	first model.Response
}

func (m *replayModel) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.calls == 1 && req.ToolChoice != model.ToolChoiceNone {
		return m.first, nil
	}
	return model.Response{Message: model.Message{Role: model.RoleAssistant, Text: "done"}, StopReason: model.StopEndTurn}, nil
}

// FuzzAgentToolCall hands the agent loop a tool call with an arbitrary name, id and
// input (the model's JSON, possibly malformed) and checks that the loop answers it and
// ends: no panic, no hang, a record of the turn.
func FuzzAgentToolCall(f *testing.F) {
	f.Add("execute", "toolu_1", []byte(`{"command":"ls -la"}`))
	f.Add("read_file", "toolu_2", []byte(`{"path":"../../etc/passwd"}`))
	f.Add("write_file", "", []byte(`{"path":"a/b.txt","content":"x"}`))
	f.Add("edit_file", "toolu_3", []byte(`{"path":"a","old_string":"","new_string":"y"}`))
	f.Add("grep", "toolu_4", []byte(`{"pattern":"(","path":"."}`))
	f.Add("glob", "toolu_5", []byte(`{"pattern":"**/*[","path":"/"}`))
	f.Add("web_fetch", "toolu_6", []byte(`{"url":"file:///etc/passwd"}`))
	f.Add("report_finding", "toolu_7", []byte(`{"path":"x.tf","line":-3,"severity":"catastrophic","message":""}`))
	f.Add("no_such_tool", "toolu_8", []byte(`"just a string"`))
	f.Add("execute", "toolu_9", []byte(`{"command": "echo unterminated`))
	refuse := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("network disabled in the fuzz test")
	})}
	f.Fuzz(func(t *testing.T, name, id string, input []byte) {
		raw := json.RawMessage(input)
		if !json.Valid(input) {
			b, _ := json.Marshal(string(input)) // what the model clients pass on for malformed JSON
			raw = b
		}
		m := &replayModel{first: model.Response{
			Message:    model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: id, Name: name, Input: raw}}},
			StopReason: model.StopToolUse,
		}}
		a, err := agent.New(agent.Options{
			Model: m, ModelName: "fuzz", Sandbox: nullSandbox{}, Approval: agent.Approval{Mode: agent.ModeYes},
			MaxTurns: 3, StallTimeout: -1, ToolTimeout: time.Second, FinalReserve: 100 * time.Millisecond, FetchClient: refuse,
		})
		if err != nil {
			t.Fatalf("agent.New: %v", err)
		}
		bounded(t, 10*time.Second, "agent.Run", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out, err := a.Run(ctx, "fuzz")
			if err != nil {
				return
			}
			if out == nil {
				t.Fatal("agent.Run returned neither an outcome nor an error")
			}
			if out.Record.Turns < 1 {
				t.Errorf("the record has %d turns after a tool call (stop %q, final %q, model calls %d)", out.Record.Turns, out.StopReason, out.Final, m.calls)
			}
		})
	})
}

// wellFormedXML reads every token of data.
func wellFormedXML(data []byte) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzProviderAPI answers every call of a cloud provider's client (create, readiness
// polls, exec, list, attach, delete) with the same arbitrary body and status: the client
// must fail or succeed within its bounds, never panic or hang, and a sandbox it returns
// has an id.
func FuzzProviderAPI(f *testing.F) {
	for i, seed := range []string{
		`{"id":"sb-1","name":"talkops-x","state":"started","toolboxProxyUrl":"http://127.0.0.1:1/toolbox","labels":{"talkops.run-id":"r1"}}`,
		`{"items":[{"id":"sb-1","labels":{"talkops.created-by":"talkops"}}],"total":1}`,
		`{"sandbox":{"id":"sbx_1","status":"running"},"session":{"id":"sess_1","status":"running"},"sandboxes":[]}`,
		`{"id":"dbx_1","status":"running","devboxes":[{"id":"dbx_1","metadata":{}}],"has_more":false}`,
		`{"name":"box-1","status":"ready","dataplane_url":"http://127.0.0.1:1/dp/box-1","boxes":[]}`,
		`{"exitCode":0,"result":"ok","stdout":"","exit_code":0,"execution_id":"e1","status":"completed"}`,
		`[]`, `null`, `{"statusCode":500,"message":["a","b"],"code":"X"}`, ``,
	} {
		f.Add(uint8(i%4), uint16(200), []byte(seed))
	}
	f.Add(uint8(0), uint16(404), []byte(`{"message":"not found"}`))
	f.Add(uint8(2), uint16(409), []byte(`{"error":{"code":"conflict","message":"exists"}}`))
	f.Add(uint8(1), uint16(201), []byte(`{"id":"x","status":"pending"}`))
	c := cannedHTTP()
	getenv := func(k string) string {
		return map[string]string{
			"DAYTONA_API_KEY": "k", "VERCEL_TOKEN": "t", "VERCEL_TEAM_ID": "team", "VERCEL_PROJECT_ID": "prj",
			"RUNLOOP_API_KEY": "k", "LANGSMITH_API_KEY": "k",
		}[k]
	}
	f.Fuzz(func(t *testing.T, which uint8, status uint16, body []byte) {
		if status < 200 || status > 599 {
			status = 200 + status%400
		}
		c.set(int(status), body)
		hc := c.loopbackClient()
		once := httpapi.Retry{Attempts: 1}
		const ready = 150 * time.Millisecond
		var p providers.Provider
		var err error
		switch which % 4 {
		case 0:
			p, err = daytona.New(daytona.Options{APIURL: c.srv.URL + "/api", ReadyTimeout: ready, PollInterval: 10 * time.Millisecond, RemoteOptions: httpapi.RemoteOptions{HTTPClient: hc, Retry: once}}, getenv)
		case 1:
			p, err = vercel.New(vercel.Options{APIURL: c.srv.URL, ReadyTimeout: ready, PollInterval: 10 * time.Millisecond, RemoteOptions: httpapi.RemoteOptions{HTTPClient: hc, Retry: once}}, getenv)
		case 2:
			p, err = runloop.New(runloop.Options{APIURL: c.srv.URL, ReadyTimeout: ready, RemoteOptions: httpapi.RemoteOptions{HTTPClient: hc, Retry: once}}, getenv)
		case 3:
			p, err = langsmith.New(langsmith.Options{APIURL: c.srv.URL, ReadyTimeout: ready, PollInterval: 10 * time.Millisecond, RemoteOptions: httpapi.RemoteOptions{HTTPClient: hc, Retry: once}}, getenv)
		}
		if err != nil {
			t.Fatalf("provider %d: %v", which%4, err)
		}
		// Each call gets its own short deadline; the bound is generous because a cancelled
		// remote command is killed on a context of its own (up to 5 s, see remote.killWait).
		op := func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}
		bounded(t, 30*time.Second, p.Name()+" client", func() {
			spec := providers.Spec{RunID: "r1", TTL: time.Hour, Labels: map[string]string{providers.LabelRunID: "r1", providers.LabelCreatedBy: "talkops"}}
			ctx, cancel := op()
			sb, err := p.Create(ctx, spec)
			cancel()
			if err == nil {
				if sb.ID() == "" {
					t.Errorf("%s: Create returned a sandbox without an id", p.Name())
				}
				ctx, cancel = op()
				_, _ = sb.Exec(ctx, providers.Shell("echo hi"))
				cancel()
				ctx, cancel = op()
				_ = sb.Close(ctx)
				cancel()
			}
			if l, ok := p.(providers.Lister); ok {
				ctx, cancel = op()
				if infos, err := l.List(ctx); err == nil {
					for _, in := range infos {
						if in.ID == "" {
							t.Errorf("%s: List returned a sandbox without an id", p.Name())
						}
					}
				}
				cancel()
				ctx, cancel = op()
				_ = l.Delete(ctx, "sb-1")
				cancel()
			}
			ctx, cancel = op()
			if sb, err := p.Attach(ctx, "sb-1", providers.AttachOptions{}); err == nil {
				_ = sb.Close(ctx)
			}
			cancel()
		})
	})
}

// FuzzResultReports reads an arbitrary result.json as `talkops report --from` does (a
// fork's artifact is untrusted) and renders every derived report from what validates:
// no panic, and each machine-readable file parses.
func FuzzResultReports(f *testing.F) {
	f.Add([]byte(sampleResult))
	f.Add([]byte(`{"schema":"talkops.result/v1","run":{"id":"r","version":"v","started_at":"2026-01-01T00:00:00Z","duration_ms":0},"verdict":"error","score":null,"exit_code":3,"stages":[]}`))
	f.Add([]byte(`{"schema":"talkops.result/v2"}`))
	f.Add([]byte(`[]`))
	red := hygiene.NewRedactor("sk-fuzz-secret")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := result.Decode(data)
		if err != nil {
			if !errors.Is(err, result.ErrInvalid) && r != nil {
				t.Errorf("Decode returned a result with an error: %v", err)
			}
			return
		}
		md := render.Markdown(r, render.Options{Redactor: red, MaxBytes: 65536, MaxFindings: 50, Marker: render.Marker(r)})
		if len(md) > 65536 {
			t.Errorf("summary is %d bytes, over its 65536 cap", len(md))
		}
		_ = render.Headline(r, red)
		if out, err := report.JUnit(r, red); err == nil {
			if err := wellFormedXML(out); err != nil {
				t.Errorf("junit.xml is not well-formed XML: %v\n%s", err, out)
			}
		}
		for name, fn := range map[string]func(*result.Result, *hygiene.Redactor) ([]byte, error){
			"sarif": report.SARIF, "codequality": report.CodeQuality,
		} {
			if out, err := fn(r, red); err == nil && !json.Valid(out) {
				t.Errorf("%s output is not JSON:\n%s", name, out)
			}
		}
		if out, err := report.RDJSONL(r, red); err == nil {
			for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
				if len(line) > 0 && !json.Valid(line) {
					t.Errorf("rdjsonl line is not JSON: %s", line)
				}
			}
		}
	})
}

// sampleResult is a complete result.json (a failed check with findings).
const sampleResult = `{
  "schema": "talkops.result/v1",
  "run": {"id": "20261130T000000Z-abcd1234", "version": "v0.1.0", "started_at": "2026-11-30T00:00:00Z", "duration_ms": 1200,
    "project_dir": "/repo", "report_dir": "/repo/.talkops/runs/x", "prompt": "check ssh ingress",
    "ci": {"provider": "github", "repo": "acme/infra", "event": "pull_request", "pr": 7, "head_sha": "0123456789abcdef0123456789abcdef01234567"}},
  "verdict": "fail", "score": 0.5, "reason": "rubric not satisfied", "exit_code": 1,
  "sandbox": {"provider": "docker", "id": "c0ffee", "work_dir": "/workspace"},
  "stages": [{"name": "provision", "status": "ok", "started_at": "2026-11-30T00:00:00Z", "duration_ms": 300}],
  "rubric": {"name": "infra-gate", "source": "r.toml", "sha256": "00", "pass_threshold": 1, "status": "failed",
    "iterations": [], "counts": {"pass": 1, "fail": 1, "error": 0, "skipped": 0},
    "items": [{"id": "validate", "kind": "check", "required": true, "weight": 1, "status": "fail", "score": 0, "duration_ms": 20,
      "check": {"argv": ["tofu", "validate"], "exit_code": 1, "expect_exit": 0, "stderr_tail": "::error::x @here <!-- --> ` + "`" + `"},
      "findings": [{"path": "main.tf", "start_line": 3, "severity": "error", "rule": "ssh", "message": "0.0.0.0/0 on port 22", "source": "check:validate", "fingerprint": "f1"}]}]},
  "findings": [{"path": "main.tf", "start_line": 3, "severity": "error", "rule": "ssh", "message": "0.0.0.0/0 on port 22", "source": "check:validate", "fingerprint": "f1"}],
  "teardown": {"status": "deleted", "duration_ms": 40}
}`
