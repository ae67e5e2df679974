package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/tools"
	"github.com/talkops/talkops/result"
)

// Prefix starts the name of every MCP tool: mcp__SERVER__TOOL.
const Prefix = "mcp__"

// maxToolName is the longest tool name every model API accepts.
const maxToolName = 64

var invalidToolChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// ToolName is the agent's name for tool of server.
func ToolName(server, tool string) string {
	return Prefix + server + "__" + invalidToolChars.ReplaceAllString(tool, "_")
}

// addTools lists a started server's tools and adapts them.
func (set *Set) addTools(ctx context.Context, s *server) error {
	lctx, cancel := context.WithTimeout(ctx, set.opts.StartTimeout)
	defer cancel()
	have := map[string]bool{}
	for _, t := range set.tools {
		have[t.Def().Name] = true
	}
	for t, err := range s.session.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("%s: listing its tools failed: %w%s", s.describe(), err, s.stderrNote())
		}
		name := ToolName(s.cfg.Name, t.Name)
		switch {
		case len(name) > maxToolName:
			set.opts.Warn(fmt.Sprintf("MCP server %q: tool %q is skipped: %s is longer than %d characters", s.cfg.Name, t.Name, name, maxToolName))
			continue
		case have[name]:
			set.opts.Warn(fmt.Sprintf("MCP server %q: tool %q is skipped: another tool is already named %s", s.cfg.Name, t.Name, name))
			continue
		}
		schema := json.RawMessage(`{"type":"object"}`)
		if t.InputSchema != nil {
			b, err := json.Marshal(t.InputSchema)
			if err != nil {
				return fmt.Errorf("MCP server %q: tool %q has an input schema that is not JSON: %w", s.cfg.Name, t.Name, err)
			}
			schema = b
		}
		have[name] = true
		desc := strings.TrimSpace(t.Description)
		set.tools = append(set.tools, &tool{
			set: set, srv: s, remote: t.Name,
			def: model.Tool{Name: name, Description: fmt.Sprintf("[MCP server %s] %s", s.cfg.Name, desc), Schema: schema},
		})
	}
	return nil
}

// tool is one server tool as an agent tool.
type tool struct {
	set    *Set
	srv    *server
	remote string
	def    model.Tool
}

func (t *tool) Def() model.Tool  { return t.def }
func (t *tool) Kind() tools.Kind { return tools.External }

// Run calls the tool. A server that fails, dies or does not answer in time is an error
// result naming the server: the model can go on without it, and the run goes on.
func (t *tool) Run(ctx context.Context, input json.RawMessage) (tools.Result, error) {
	start := time.Now()
	args := map[string]any{}
	if trimmed := strings.TrimSpace(string(input)); trimmed != "" && trimmed != "null" {
		if err := json.Unmarshal(input, &args); err != nil {
			return tools.Result{Output: "Error: the arguments must be a JSON object: " + err.Error(), IsError: true}, nil
		}
	}
	compact, _ := json.Marshal(args)
	rec := &result.Command{Command: t.def.Name + " " + string(compact), Argv: []string{t.def.Name, string(compact)}}
	finish := func(out string, isErr, timedOut bool) (tools.Result, error) {
		rec.Duration = time.Since(start)
		rec.Stdout, rec.TimedOut = out, timedOut
		switch {
		case timedOut:
			rec.ExitCode = 124
		case isErr:
			rec.ExitCode = 1
		}
		return tools.Result{Output: out, IsError: isErr || timedOut, Exec: rec}, nil
	}
	cctx, cancel := context.WithTimeout(ctx, t.set.opts.CallTimeout)
	defer cancel()
	res, err := t.srv.session.CallTool(cctx, &sdk.CallToolParams{Name: t.remote, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return tools.Result{}, ctx.Err() // the run stopped; the agent says so
		}
		name := t.srv.cfg.Name
		switch {
		case t.srv.died():
			return finish(fmt.Sprintf("Error: MCP server %q stopped while running %s: %v%s", name, t.remote, err, t.srv.stderrNote()), true, false)
		case errors.Is(cctx.Err(), context.DeadlineExceeded):
			return finish(fmt.Sprintf("Error: MCP server %q did not answer %s within %s; the call was abandoned", name, t.remote, t.set.opts.CallTimeout), true, true)
		}
		return finish(fmt.Sprintf("Error: MCP server %q failed to run %s: %v", name, t.remote, err), true, false)
	}
	return finish(render(res), res.IsError, false)
}

// render turns a call's result into text for the model.
func render(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			fmt.Fprintf(&b, "[image, %s, %d bytes, not shown]", c.MIMEType, len(c.Data))
		case *sdk.AudioContent:
			fmt.Fprintf(&b, "[audio, %s, %d bytes, not shown]", c.MIMEType, len(c.Data))
		case *sdk.ResourceLink:
			fmt.Fprintf(&b, "[resource %s: %s]", c.Name, c.URI)
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				fmt.Fprintf(&b, "[resource %s]\n%s", r.URI, r.Text)
			default:
				fmt.Fprintf(&b, "[resource %s, %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob))
			}
		default:
			raw, _ := json.Marshal(c)
			b.Write(raw)
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			b.Write(raw)
		}
	}
	if b.Len() == 0 {
		b.WriteString("[the tool returned no content]")
	}
	return b.String()
}
