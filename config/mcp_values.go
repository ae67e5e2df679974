package config

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/talkops/talkops/result"
)

// mcpSecretMaps are the [mcp.servers.NAME] keys whose every value is a secret: the
// server's environment and its HTTP headers. Their names are shown, their values not.
var mcpSecretMaps = []string{"env", "headers"}

// values lists an MCP server's keys for Config.Values. Beyond what a provider table
// redacts, env and header values, credentials in the URL, and command-line arguments
// that carry a secret-looking flag are hidden.
func (t MCPServerTable) values() []result.ConfigValue {
	out := t.ProviderTable.values()
	prefix := t.tableName() + "." + t.Name + "."
	for i := range out {
		key := strings.TrimPrefix(out[i].Key, prefix)
		if out[i].Value == redacted {
			continue
		}
		switch v := t.Values[key].(type) {
		case map[string]any:
			if slices.Contains(mcpSecretMaps, key) {
				out[i].Value = redactedMap(v)
			}
		case []any:
			if key == "args" {
				out[i].Value = inline(redactArgs(v))
			}
		case string:
			if key == "url" {
				out[i].Value = redactURL(v)
			}
		}
	}
	return out
}

// redactedMap shows a table's keys with every value redacted.
func redactedMap(m map[string]any) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, tomlKey(k)+" = "+redacted)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// redactArgs hides "--token=x" values and the argument after a "--token" flag.
func redactArgs(args []any) []any {
	out := slices.Clone(args)
	for i, a := range args {
		s, ok := a.(string)
		if !ok || !strings.HasPrefix(s, "-") {
			continue
		}
		if name, _, hasValue := strings.Cut(s, "="); hasValue {
			if secretName().MatchString(name) {
				out[i] = name + "=" + redacted
			}
			continue
		}
		if secretName().MatchString(s) && i+1 < len(args) {
			out[i+1] = redacted
		}
	}
	return out
}

// redactURL hides a password in the URL's user info and the values of its query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return redacted
	}
	if u.User == nil && u.RawQuery == "" {
		return raw
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		u.RawQuery = q.Encode()
	}
	// Show <redacted> as typed rather than percent-encoded.
	if s, err := url.PathUnescape(u.String()); err == nil {
		return s
	}
	return u.String()
}
