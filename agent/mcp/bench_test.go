package mcp

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/talkops/talkops/agent/mcp/mcptest"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

func benchTool(b *testing.B, set *Set, name string) func(input string) {
	for _, tl := range set.Tools() {
		if tl.Def().Name == name {
			return func(input string) {
				res, err := tl.Run(context.Background(), json.RawMessage(input))
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %+v", name, err, res)
				}
			}
		}
	}
	b.Fatalf("no tool %s", name)
	return nil
}

func benchSandbox(b *testing.B) providers.Sandbox {
	sb, err := local.New(local.Options{}).Create(b.Context(), providers.Spec{RunID: "mcp-bench", ProjectDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

// BenchmarkExecBaseline is one execute-style command in a local sandbox: the cost an MCP
// call is compared with.
func BenchmarkExecBaseline(b *testing.B) {
	sb := benchSandbox(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sb.Exec(b.Context(), providers.Cmd{Argv: []string{"/bin/echo", "hi"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallStdio is one call to a stdio server running in a local sandbox.
func BenchmarkCallStdio(b *testing.B) {
	set, err := Start(b.Context(), []Server{{Name: "b", Command: serverBin}}, Options{Sandbox: benchSandbox(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close(context.Background())
	run := benchTool(b, set, "mcp__b__echo")
	b.ReportAllocs()
	for b.Loop() {
		run(`{"text":"hi"}`)
	}
}

// BenchmarkCallStdio1MiB is a call whose result is 1 MiB.
func BenchmarkCallStdio1MiB(b *testing.B) {
	set, err := Start(b.Context(), []Server{{Name: "b", Command: serverBin}}, Options{Sandbox: benchSandbox(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close(context.Background())
	run := benchTool(b, set, "mcp__b__big")
	b.ReportAllocs()
	for b.Loop() {
		run(`{"bytes":1048576}`)
	}
}

// BenchmarkCallHTTP is one call to a streamable-HTTP server on loopback.
func BenchmarkCallHTTP(b *testing.B) {
	web := httptest.NewServer(mcptest.Handler(""))
	defer web.Close()
	set, err := Start(b.Context(), []Server{{Name: "b", URL: web.URL, Trusted: true}}, Options{Sandbox: benchSandbox(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close(context.Background())
	run := benchTool(b, set, "mcp__b__echo")
	b.ReportAllocs()
	for b.Loop() {
		run(`{"text":"hi"}`)
	}
}

// BenchmarkStartStdio is starting a stdio server in a local sandbox, listing its tools
// and stopping it: what MCP adds before the agent's first turn.
func BenchmarkStartStdio(b *testing.B) {
	sb := benchSandbox(b)
	b.ReportAllocs()
	for b.Loop() {
		set, err := Start(b.Context(), []Server{{Name: "b", Command: serverBin}}, Options{Sandbox: sb})
		if err != nil {
			b.Fatal(err)
		}
		set.Close(context.Background())
	}
}
