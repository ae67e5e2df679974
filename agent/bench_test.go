package agent_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

// instantSandbox answers every command at once with a fixed stdout: what is left of a turn
// is the runner's own overhead (HTTP to the model on loopback, JSON, events, transcript).
type instantSandbox struct {
	stdout []byte
}

func (s *instantSandbox) ID() string      { return "instant" }
func (s *instantSandbox) WorkDir() string { return "/workspace" }
func (s *instantSandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	if len(cmd.Argv) == 3 && cmd.Argv[2] == "command -v bash" {
		return providers.ExecResult{}, nil
	}
	return providers.ExecResult{Stdout: s.stdout}, nil
}
func (s *instantSandbox) Upload(context.Context, string, io.Reader) error {
	return providers.ErrNotSupported
}
func (s *instantSandbox) Download(context.Context, string) (io.ReadCloser, error) {
	return nil, providers.ErrNotSupported
}
func (s *instantSandbox) Close(context.Context) error { return nil }

// turnsResponder calls execute "true" until turn n, then answers.
func turnsResponder(n int) modeltest.Responder {
	return func(c modeltest.Call) modeltest.Step {
		if c.ToolChoice == "none" || len(c.Request.Messages) >= 2*n-1 {
			return modeltest.Step{Text: "done"}
		}
		return modeltest.Step{ToolCalls: []modeltest.ToolCall{call("execute", map[string]any{"command": "true"})}}
	}
}

func benchAgent(b *testing.B, srv *modeltest.Server, sb providers.Sandbox, configure func(*agent.Options)) *agent.Agent {
	b.Helper()
	m, err := model.New("anthropic:claude-sonnet-4-5", srv.URL, func(string) string { return "bench-key" })
	if err != nil {
		b.Fatal(err)
	}
	o := agent.Options{Model: m, Sandbox: sb, Approval: agent.Approval{Mode: agent.ModeYes}, ReportDir: b.TempDir(), Sink: events.Discard, MaxTurns: 1000}
	if configure != nil {
		configure(&o)
	}
	a, err := agent.New(o)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkTurn measures the wall time of one agent turn (model call on loopback + one
// execute of `true`), reported as ns/turn over 10-turn runs.
func BenchmarkTurn(b *testing.B) {
	const turns = 10
	sandboxes := map[string]func(b *testing.B) providers.Sandbox{
		"instant-sandbox": func(*testing.B) providers.Sandbox { return &instantSandbox{} },
		"local-true": func(b *testing.B) providers.Sandbox {
			sb, err := local.New(local.Options{}).Create(b.Context(), providers.Spec{RunID: "bench", ProjectDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { sb.Close(context.Background()) })
			return sb
		},
	}
	for _, name := range []string{"instant-sandbox", "local-true"} {
		b.Run(name, func(b *testing.B) {
			srv := modeltest.NewServerFunc(turnsResponder(turns))
			defer srv.Close()
			sb := sandboxes[name](b)
			b.ReportAllocs()
			var total time.Duration
			for b.Loop() {
				a := benchAgent(b, srv, sb, nil)
				start := time.Now()
				out, err := a.Run(b.Context(), "bench")
				total += time.Since(start)
				if err != nil || out.Record.Turns != turns {
					b.Fatalf("Run = %d turns, %v", out.Record.Turns, err)
				}
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*turns), "ns/turn")
		})
	}
}

// BenchmarkRequestBytes sums the request bytes a scripted 20-turn run sends to the model
// when every command prints 100 KB, with the tool output limit off and at its default.
func BenchmarkRequestBytes(b *testing.B) {
	const turns = 20
	big := []byte(strings.Repeat("resource \"aws_instance\" \"web\" { ami = \"ami-123\" }\n", 2000)) // ~100 KB
	for _, tc := range []struct {
		name  string
		limit int
	}{{"untruncated", 1 << 30}, {"truncated-default", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			var sent atomic.Int64
			srv := modeltest.NewServerFunc(func(c modeltest.Call) modeltest.Step {
				sent.Add(int64(len(c.Body)))
				return turnsResponder(turns)(c)
			})
			defer srv.Close()
			var runs int64
			for b.Loop() {
				a := benchAgent(b, srv, &instantSandbox{stdout: bytes.Clone(big)}, func(o *agent.Options) { o.MaxToolOutput = tc.limit })
				out, err := a.Run(b.Context(), "bench")
				if err != nil || out.Record.Turns != turns {
					b.Fatalf("Run = %d turns, %v", out.Record.Turns, err)
				}
				runs++
			}
			b.ReportMetric(float64(sent.Load())/float64(runs), "req-bytes/run")
		})
	}
}
