// Package mcp gives the agent the tools of MCP (Model Context Protocol) servers: it reads
// their configuration, starts them after the sandbox is ready, adapts each server tool to
// an agent tool named mcp__SERVER__TOOL, and stops them before the sandbox is torn down.
//
// A stdio server runs inside the sandbox when the sandbox can stream a command's stdin
// and stdout (providers.StreamExecer), so it sees the workspace and not the host; with
// host = true, or on a provider without that ability, it runs on the host with an
// environment holding only PATH and what its configuration names. A streamable-HTTP
// server is called from the host, through a dialer that refuses private and
// special-purpose addresses (the web_fetch rule) unless the trusted configuration names
// that address itself.
package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/talkops/talkops/config"
)

// ErrConfig is wrapped by configuration errors (a usage error).
var ErrConfig = errors.New("invalid MCP server configuration")

// Server is one configured MCP server: Command (stdio) or URL (streamable HTTP).
type Server struct {
	Name    string
	Command string
	Args    []string
	// Env is the stdio server's environment, ${VAR} already expanded.
	Env map[string]string
	URL string
	// Headers are sent with every HTTP request, ${VAR} already expanded.
	Headers map[string]string
	// Host runs a stdio server on the host rather than in the sandbox.
	Host bool
	// AllowPrivate lets a URL server reach a private or special-purpose address (an
	// internal host name); only a trusted configuration may set it.
	AllowPrivate bool
	// Trusted is false for a server from the project's config file: it never reaches a
	// private address, even one its URL names.
	Trusted bool
	// Source is where the server was configured, for error messages.
	Source string
}

// Config is the servers of a run and the values to redact everywhere.
type Config struct {
	Servers []Server
	// Secrets are every env and header value (after expansion) and every value taken
	// from talkops's environment.
	Secrets []string
}

// serverEntry is one entry of the JSON file and one [mcp.servers.NAME] table.
//
// Only type and url are safe in a project's own config file: such a server runs nothing,
// receives no credential, and is always held to web_fetch's refusal of private and
// special-purpose addresses. Every other key is trusted-only.
type serverEntry struct {
	Type    string            `json:"type" toml:"type" trust:"safe"`
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
	URL     string            `json:"url" toml:"url" trust:"safe"`
	Headers map[string]string `json:"headers" toml:"headers"`
	Host    bool              `json:"host" toml:"host"`
	// AllowPrivate is allow_private in both formats.
	AllowPrivate bool `json:"allow_private" toml:"allow_private"`
}

var validName = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)

// ParseFile reads the common {"mcpServers": {NAME: {command, args, env} | {url, headers}}}
// JSON file. Its servers are trusted: the user named the file on the command line.
func ParseFile(path string, getenv func(string) string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: --mcp-config %s: %w", ErrConfig, path, err)
	}
	return parseJSON(data, path, getenv)
}

func parseJSON(data []byte, file string, getenv func(string) string) (Config, error) {
	var doc struct {
		Servers map[string]json.RawMessage `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w (want {\"mcpServers\": {\"NAME\": {\"command\": ..., \"args\": [...], \"env\": {...}} or {\"url\": ..., \"headers\": {...}}}})",
			ErrConfig, file, err)
	}
	if doc.Servers == nil {
		return Config{}, fmt.Errorf("%w: %s: no \"mcpServers\" object", ErrConfig, file)
	}
	var cfg Config
	for _, name := range slices.Sorted(maps.Keys(doc.Servers)) {
		var e serverEntry
		d := json.NewDecoder(bytes.NewReader(doc.Servers[name]))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return Config{}, fmt.Errorf("%w: %s: mcpServers.%s: %w (valid keys: type, command, args, env, host, url, headers, allow_private)", ErrConfig, file, name, err)
		}
		if err := cfg.add(name, e, file+": mcpServers."+name, true, getenv); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// FromTables reads the [mcp.servers.NAME] tables of config.toml.
func FromTables(tables map[string]config.MCPServerTable, getenv func(string) string) (Config, error) {
	var cfg Config
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		t := tables[name]
		var e serverEntry
		if err := t.Decode(&e); err != nil {
			return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		src := t.Source("")
		if src == "" {
			src = "[mcp.servers." + name + "]"
		}
		if err := cfg.add(name, e, src, t.Trusted, getenv); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// Merge adds other's servers; a name defined twice is an error.
func (c *Config) Merge(other Config) error {
	for _, s := range other.Servers {
		for _, have := range c.Servers {
			if have.Name == s.Name {
				return fmt.Errorf("%w: MCP server %q is defined in %s and in %s", ErrConfig, s.Name, have.Source, s.Source)
			}
		}
		c.Servers = append(c.Servers, s)
	}
	c.Secrets = append(c.Secrets, other.Secrets...)
	return nil
}

func (c *Config) add(name string, e serverEntry, src string, trusted bool, getenv func(string) string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, src, fmt.Sprintf(format, args...))
	}
	if !validName.MatchString(name) {
		return bad("server name %q: use letters, digits, - and single _ (the tools are named mcp__NAME__TOOL)", name)
	}
	s := Server{Name: name, Command: e.Command, Args: e.Args, URL: e.URL, Host: e.Host, AllowPrivate: e.AllowPrivate, Trusted: trusted, Source: src}
	switch e.Type {
	case "", "stdio", "http", "streamable-http", "streamableHttp":
	case "sse":
		return bad("type \"sse\": the deprecated HTTP+SSE transport is not supported; use the server's streamable HTTP endpoint")
	default:
		return bad("type %q: want stdio or http", e.Type)
	}
	switch {
	case (e.Command == "") == (e.URL == ""):
		return bad("give either command (a stdio server) or url (a streamable HTTP server)")
	case e.Command != "" && e.Type != "" && e.Type != "stdio":
		return bad("type %q with a command: a command is a stdio server", e.Type)
	case e.URL != "" && (e.Type == "stdio" || len(e.Args) > 0 || len(e.Env) > 0 || e.Host):
		return bad("args, env, host and type stdio are for command servers, not url servers")
	case e.Command != "" && (len(e.Headers) > 0 || e.AllowPrivate):
		return bad("headers and allow_private are for url servers, not command servers")
	case e.AllowPrivate && !trusted:
		return bad("allow_private: a project config file cannot let a server reach private addresses")
	}
	if e.URL != "" {
		u, err := url.Parse(e.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return bad("url %q: want an absolute http:// or https:// URL without credentials (send them in headers)", e.URL)
		}
	}
	var err error
	if s.Env, err = c.expand(e.Env, "env", bad, getenv); err != nil {
		return err
	}
	if s.Headers, err = c.expand(e.Headers, "headers", bad, getenv); err != nil {
		return err
	}
	c.Servers = append(c.Servers, s)
	return nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces ${VAR} in the values with talkops's environment and records every value
// as a secret.
func (c *Config) expand(m map[string]string, what string, bad func(string, ...any) error, getenv func(string) string) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var missing string
		v := varRef.ReplaceAllStringFunc(m[k], func(ref string) string {
			name := ref[2 : len(ref)-1]
			val := getenv(name)
			if val == "" && missing == "" {
				missing = name
			}
			c.Secrets = append(c.Secrets, val)
			return val
		})
		if missing != "" {
			return nil, bad("%s.%s: ${%s} is not set in talkops's environment", what, k, missing)
		}
		out[k] = v
		c.Secrets = append(c.Secrets, v)
		if _, after, ok := strings.Cut(v, " "); ok && what == "headers" {
			c.Secrets = append(c.Secrets, after) // the token of "Bearer <token>"
		}
	}
	return out, nil
}
