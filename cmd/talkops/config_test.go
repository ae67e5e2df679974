package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// `talkops config` lists the MCP servers of both config files with their file:line, and
// never shows a value that can carry a credential.
func TestConfigListsMCPServers(t *testing.T) {
	t.Parallel()
	const (
		envSecret    = "env-CANARY-77d1"
		headerSecret = "hdr-CANARY-2b9e"
		argSecret    = "arg-CANARY-51ac"
		urlSecret    = "url-CANARY-c03f"
	)
	dir := project(t, map[string]string{".talkops/config.toml": "[run]\ntimeout = \"10m\"\n\n[mcp.servers.docs]\nurl = \"https://docs.example.com/mcp\"\n"})
	env := testEnv(t, nil)
	writeFile(t, filepath.Join(env["HOME"], ".talkops", "config.toml"),
		"[mcp.servers.terraform]\n"+
			"command = \"terraform-mcp-server\"\n"+
			"args = [\"--token\", \""+argSecret+"\", \"--verbose\"]\n"+
			"env = { TFE_ADDRESS = \""+envSecret+"\" }\n"+
			"\n[mcp.servers.remote]\n"+
			"url = \"https://bot:"+urlSecret+"@mcp.example.com/x?api_key="+urlSecret+"\"\n"+
			"headers = { X-Org = \""+headerSecret+"\" }\n")
	got := runIn(t, dir, env, "config")
	if got.code != 0 {
		t.Fatalf("config: exit %d: %s", got.code, got.stderr)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(got.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			rows[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for key, want := range map[string]string{
		"mcp.servers.docs.url":          "https://docs.example.com/mcp " + filepath.Join(dir, ".talkops", "config.toml") + ":5",
		"mcp.servers.terraform.command": "terraform-mcp-server ~/.talkops/config.toml:2",
		"mcp.servers.terraform.args":    `["--token", "<redacted>", "--verbose"] ~/.talkops/config.toml:3`,
		"mcp.servers.terraform.env":     "{TFE_ADDRESS = <redacted>} ~/.talkops/config.toml:4",
		"mcp.servers.remote.url":        "https://<redacted>@mcp.example.com/x?api_key=<redacted> ~/.talkops/config.toml:7",
		"mcp.servers.remote.headers":    "{X-Org = <redacted>} ~/.talkops/config.toml:8",
	} {
		if rows[key] != want {
			t.Errorf("%s: got %q, want %q\n%s", key, rows[key], want, got.stdout)
		}
	}
	for _, secret := range []string{envSecret, headerSecret, argSecret, urlSecret} {
		if strings.Contains(got.stdout+got.stderr, secret) {
			t.Errorf("talkops config shows the secret %q:\n%s", secret, got.stdout)
		}
	}
}
