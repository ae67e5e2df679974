package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/talkops/talkops/agent"
	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

// Example runs the agent against a scripted model, with its tools in a local sandbox.
func Example() {
	ctx := context.Background()
	srv := modeltest.NewServer(modeltest.Script{Steps: []modeltest.Step{
		{ToolCalls: []modeltest.ToolCall{{Name: "execute", Input: json.RawMessage(
			`{"command":"printf 'cidr = \"0.0.0.0/0\"\\n' > sg.tf && grep -n 0.0.0.0 sg.tf"}`)}}},
		{ToolCalls: []modeltest.ToolCall{{Name: "report_finding", Input: json.RawMessage(
			`{"path":"sg.tf","start_line":1,"severity":"error","title":"Open ingress","message":"0.0.0.0/0 allows the world.","rule":"open-ingress"}`)}}},
		{Text: "sg.tf opens ingress to 0.0.0.0/0 (reported)."},
	}})
	defer srv.Close()

	getenv := func(k string) string {
		if k == "ANTHROPIC_API_KEY" {
			return "sk-example"
		}
		return ""
	}
	m, err := model.New("anthropic:claude-sonnet-4-5", srv.URL, getenv)
	if err != nil {
		fmt.Println(err)
		return
	}
	project, err := os.MkdirTemp("", "project")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(project)
	sb, err := local.New(local.Options{}).Create(ctx, providers.Spec{RunID: "example", ProjectDir: project})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close(context.WithoutCancel(ctx))

	a, err := agent.New(agent.Options{Model: m, Sandbox: sb, Approval: agent.Approval{Mode: agent.ModeSmart}, MaxTurns: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := a.Run(ctx, "Check sg.tf for open ingress.")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.StopReason, out.Record.Turns, "turns")
	fmt.Printf("%s -> exit %d: %s", out.Commands[0].Command, out.Commands[0].ExitCode, out.Commands[0].Stdout)
	fmt.Println(out.Findings[0].Severity, out.Findings[0].Path, out.Findings[0].Title)
	fmt.Println(out.Final)
	// Output:
	// done 3 turns
	// printf 'cidr = "0.0.0.0/0"\n' > sg.tf && grep -n 0.0.0.0 sg.tf -> exit 0: 1:cidr = "0.0.0.0/0"
	// error sg.tf Open ingress
	// sg.tf opens ingress to 0.0.0.0/0 (reported).
}
