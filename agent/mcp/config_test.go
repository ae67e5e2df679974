package mcp

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseJSON(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TF_TOKEN": "tf-secret-123", "GH": "ghp_abcdef"}
	getenv := func(k string) string { return env[k] }
	cfg, err := parseJSON([]byte(`{"mcpServers": {
		"terraform": {"command": "terraform-mcp-server", "args": ["stdio"], "env": {"TFE_TOKEN": "${TF_TOKEN}", "MODE": "ro"}},
		"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${GH}"}},
		"local": {"command": "srv", "host": true}
	}}`), "servers.json", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 3 {
		t.Fatalf("servers = %+v", cfg.Servers)
	}
	byName := map[string]Server{}
	for _, s := range cfg.Servers {
		byName[s.Name] = s
		if !s.Trusted || !strings.HasPrefix(s.Source, "servers.json: mcpServers.") {
			t.Errorf("%s: trusted %v, source %q", s.Name, s.Trusted, s.Source)
		}
	}
	if got := byName["terraform"].Env["TFE_TOKEN"]; got != "tf-secret-123" {
		t.Errorf("env not expanded: %q", got)
	}
	if got := byName["github"].Headers["Authorization"]; got != "Bearer ghp_abcdef" {
		t.Errorf("header not expanded: %q", got)
	}
	if !byName["local"].Host {
		t.Error("host = true was lost")
	}
	for _, want := range []string{"tf-secret-123", "Bearer ghp_abcdef", "ghp_abcdef", "ro"} {
		if !slices.Contains(cfg.Secrets, want) {
			t.Errorf("secrets %q lack %q", cfg.Secrets, want)
		}
	}
}

func TestParseJSONLeavesArgsAlone(t *testing.T) {
	t.Parallel()
	// ${VAR} is expanded only in env and headers: a command line is not a place for it.
	cfg, err := parseJSON([]byte(`{"mcpServers": {"x": {"command": "srv", "args": ["${HOME}"]}}}`), "f", func(string) string { return "/root" })
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers[0].Args[0]; got != "${HOME}" {
		t.Errorf("args[0] = %q, want it unexpanded", got)
	}
}

func TestParseJSONErrors(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`[]`:                        "mcpServers",
		`{}`:                        `no "mcpServers"`,
		`{"mcpServers": {"x": {}}}`: "either command",
		`{"mcpServers": {"x": {"url": "ftp://h/"}}}`:                       "http:// or https://",
		`{"mcpServers": {"x": {"url": "https://u:p@h/"}}}`:                 "without credentials",
		`{"mcpServers": {"x": {"url": "https://h/", "env": {"A": "b"}}}}`:  "for command servers",
		`{"mcpServers": {"x": {"command": "c", "headers": {"A": "b"}}}}`:   "for url servers",
		`{"mcpServers": {"x": {"command": "c", "type": "http"}}}`:          "a command is a stdio server",
		`{"mcpServers": {"x": {"command": "c", "type": "websocket"}}}`:     "want stdio or http",
		`{"mcpServers": {"x y": {"command": "c"}}}`:                        "server name",
		`{"mcpServers": {"x": {"command": "c", "env": {"A": "${NOPE}"}}}}`: "${NOPE} is not set",
	} {
		_, err := parseJSON([]byte(doc), "f.json", func(string) string { return "" })
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want ErrConfig mentioning %q", doc, err, want)
		}
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	a := Config{Servers: []Server{{Name: "x", Source: "a"}}}
	if err := a.Merge(Config{Servers: []Server{{Name: "x", Source: "b"}}}); err == nil || !strings.Contains(err.Error(), "defined in a and in b") {
		t.Errorf("err = %v", err)
	}
}

func TestExplicitAddrs(t *testing.T) {
	t.Parallel()
	private, loop, public := netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("93.184.215.14")
	for _, tc := range []struct {
		srv  Server
		addr netip.Addr
		want bool
	}{
		{Server{URL: "http://10.0.0.5/mcp", Trusted: true}, private, true},
		{Server{URL: "http://10.0.0.5/mcp", Trusted: true}, netip.MustParseAddr("10.0.0.6"), false},
		{Server{URL: "http://10.0.0.5/mcp"}, private, false},
		{Server{URL: "http://localhost:8080/mcp", Trusted: true}, loop, true},
		{Server{URL: "http://localhost:8080/mcp", Trusted: true}, private, false},
		{Server{URL: "https://mcp.internal.example/", Trusted: true}, private, false},
		{Server{URL: "https://mcp.internal.example/", Trusted: true, AllowPrivate: true}, private, true},
		{Server{URL: "https://mcp.internal.example/", AllowPrivate: true}, private, false},
		{Server{URL: "https://mcp.example.com/", Trusted: true}, public, false}, // public needs no exemption
	} {
		if got := explicitAddrs(tc.srv)(tc.addr); got != tc.want {
			t.Errorf("%+v may reach %s = %v, want %v", tc.srv, tc.addr, got, tc.want)
		}
	}
}
