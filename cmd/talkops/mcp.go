package main

import (
	"time"

	"github.com/talkops/talkops/agent/mcp"
	"github.com/talkops/talkops/config"
	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/internal/version"
	"github.com/talkops/talkops/result"
)

// mcpServers reads the MCP servers of [mcp.servers.NAME] and --mcp-config. Mistakes are
// usage errors: nothing is provisioned yet.
func (c *runCmd) mcpServers(cfg *config.Config, getenv func(string) string) (mcp.Config, error) {
	servers, err := mcp.FromTables(cfg.MCPServers, getenv)
	if err != nil {
		return mcp.Config{}, usageErr(err)
	}
	if c.MCPConfig != "" {
		file, err := mcp.ParseFile(c.MCPConfig, getenv)
		if err == nil {
			err = servers.Merge(file)
		}
		if err != nil {
			return mcp.Config{}, usageErr(err)
		}
	}
	return servers, nil
}

// mcpOptions are the servers' options: a call is bounded like a shell command.
func mcpOptions(cfg *config.Config, redact func(string) string, sink events.Sink) mcp.Options {
	return mcp.Options{
		CallTimeout: cfg.Agent.ToolTimeout,
		Version:     version.Get().Version,
		Warn: func(msg string) {
			sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageAgent, Message: redact(msg)})
		},
	}
}
