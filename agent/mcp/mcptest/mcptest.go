// Package mcptest is an MCP server built with the official SDK for tests: the same tools
// over stdio (the mcpserver command in this directory, run inside sandboxes) and over
// streamable HTTP (Handler, for httptest). Only tests import it.
//
// Tools:
//   - echo {text}: "echo: TEXT", then what the server sees: its working directory, the
//     content of marker.txt there, the value of SERVER_TOKEN and of MCP_HOST_SECRET (a
//     variable tests set only in talkops's own environment).
//   - whoami: the Authorization header the HTTP server received ("" over stdio).
//   - hang: never answers (until the process is killed or the call cancelled).
//   - crash: writes "crashing now" to stderr and exits 3.
//   - big {bytes}: a text result of that many bytes.
package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type bigIn struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes to return"`
}

type empty struct{}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// NewServer builds the server; auth returns the Authorization header of the current
// request ("" over stdio).
func NewServer(auth func(context.Context, *sdk.CallToolRequest) string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "talkops-mcptest", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo text and describe the server's surroundings."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			wd, _ := os.Getwd()
			marker, err := os.ReadFile("marker.txt")
			if err != nil {
				marker = []byte("(no marker.txt: " + err.Error() + ")")
			}
			return text(fmt.Sprintf("echo: %s\ncwd=%s\nmarker=%s\nserver_token=%s\nhost_secret=%s\n",
				in.Text, wd, strings.TrimSpace(string(marker)), os.Getenv("SERVER_TOKEN"), os.Getenv("MCP_HOST_SECRET"))), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "whoami", Description: "Show the Authorization header received."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			return text("authorization=" + auth(ctx, req)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answer."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			select {} // ignore the cancellation too, like a stuck server
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exit mid-call."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing now")
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "big", Description: "Return a long text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in bigIn) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	return s
}

// Handler serves the server over streamable HTTP. Requests without want as their
// Authorization header are refused with 401, when want is not "".
func Handler(want string) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		return NewServer(func(_ context.Context, req *sdk.CallToolRequest) string {
			if req.Extra != nil && req.Extra.Header != nil {
				return req.Extra.Header.Get("Authorization")
			}
			return ""
		})
	}, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if want != "" && r.Header.Get("Authorization") != want {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
