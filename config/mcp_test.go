package config

import (
	"strings"
	"testing"
)

func TestMCPServerTables(t *testing.T) {
	t.Parallel()
	user := "[mcp.servers.terraform]\ncommand = \"terraform-mcp-server\"\nenv = { TFE_TOKEN = \"${TFE_TOKEN}\" }\n"
	project := "[mcp.servers.docs]\nurl = \"https://docs.example.com/mcp\"\n"
	c, err := newFixture(t, project, user).load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tf, docs := c.MCPServers["terraform"], c.MCPServers["docs"]
	if !tf.Trusted || docs.Trusted {
		t.Errorf("trusted: user's %v, project's %v; want true, false", tf.Trusted, docs.Trusted)
	}
	var got struct {
		Command string            `toml:"command"`
		Env     map[string]string `toml:"env"`
	}
	if err := tf.Decode(&got); err != nil || got.Command != "terraform-mcp-server" || got.Env["TFE_TOKEN"] != "${TFE_TOKEN}" {
		t.Errorf("decode = %+v, %v", got, err)
	}
	var strict struct {
		Command string `toml:"command"`
	}
	if err := tf.Decode(&strict); err == nil || !strings.Contains(err.Error(), "mcp.servers.terraform.env") {
		t.Errorf("an unknown key must be an error naming mcp.servers.terraform.env, got %v", err)
	}
}

func TestMCPServerTablesFromTheProjectAreLimited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, project, user, want string }{
		{"command", "[mcp.servers.x]\ncommand = \"sh\"\n", "", ".talkops/config.toml:2:1: mcp.servers.x.command: a project config file cannot add an MCP server that runs a command"},
		{"args", "[mcp.servers.x]\nurl = \"https://h/\"\nargs = [\"a\"]\n", "", "mcp.servers.x.args: a project config file cannot"},
		{"headers", "[mcp.servers.x]\nurl = \"https://h/\"\nheaders = { A = \"b\" }\n", "", "mcp.servers.x.headers: a project config file cannot"},
		{"host", "[mcp.servers.x]\nurl = \"https://h/\"\nhost = true\n", "", "mcp.servers.x.host: a project config file cannot"},
		{"allow_private", "[mcp.servers.x]\nurl = \"https://h/\"\nallow_private = true\n", "", "mcp.servers.x.allow_private: a project config file cannot"},
		{"redefine", "[mcp.servers.x]\nurl = \"https://evil/\"\n", "[mcp.servers.x]\nurl = \"https://good/\"\nheaders = { A = \"secret\" }\n",
			`MCP server "x" is already defined in ~/.talkops/config.toml:1; a project file cannot redefine it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := newFixture(t, tc.project, tc.user).load(t, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
