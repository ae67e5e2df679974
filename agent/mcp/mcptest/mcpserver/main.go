// Command mcpserver is the mcptest server over stdio, for tests that run it inside a
// sandbox. Arguments are ignored (tests pass a tag to find the process); with
// MCPTEST_FAIL_START set it writes that to stderr and exits 1 before answering anything.
package main

import (
	"context"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/talkops/talkops/agent/mcp/mcptest"
)

func main() {
	if msg := os.Getenv("MCPTEST_FAIL_START"); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
	s := mcptest.NewServer(func(context.Context, *sdk.CallToolRequest) string { return "" })
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
