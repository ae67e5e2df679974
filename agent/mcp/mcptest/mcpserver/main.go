// Command mcpserver is the mcptest server over stdio, for tests that run it inside a
// sandbox. Arguments are ignored (tests pass a tag to find the process); with
// MCPTEST_FAIL_START set it writes a complaint naming SERVER_TOKEN to stderr and exits 1
// before answering anything.
package main

import (
	"context"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/talkops/talkops/agent/mcp/mcptest"
)

func main() {
	if os.Getenv("MCPTEST_FAIL_START") != "" {
		fmt.Fprintf(os.Stderr, "boom: no credentials for %s\n", os.Getenv("SERVER_TOKEN"))
		os.Exit(1)
	}
	s := mcptest.NewServer(func(context.Context, *sdk.CallToolRequest) string { return "" })
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
