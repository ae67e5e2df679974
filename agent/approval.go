package agent

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/talkops/talkops/agent/tools"
)

// Mode is how tool calls are approved in a headless run, where nobody can be asked.
type Mode int

// Approval modes.
const (
	// ModeDefault (neither -y nor --smart) allows read-only tools and report_finding and
	// denies execute, write_file, edit_file and web_fetch.
	ModeDefault Mode = iota
	// ModeSmart (--smart) allows read-only and file-editing tools and web_fetch, and checks
	// every shell command against the deny patterns, the built-in deny list and, when
	// any are configured, the allow patterns. A command it cannot read is denied.
	ModeSmart
	// ModeYes (-y/--yes) approves every tool call; only the deny patterns still apply.
	ModeYes
)

func (m Mode) String() string {
	switch m {
	case ModeDefault:
		return "default"
	case ModeSmart:
		return "smart"
	case ModeYes:
		return "yes"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Approval is the approval policy.
//
// Patterns match a shell command, or any one of the simple commands it is made of (split
// at ; && || | and newlines, and inside $( ) substitutions), from its program on:
// "terraform plan*" matches `cd infra && terraform plan -out x`. * matches any text
// (spaces included), ? one character; the match is whole and case-sensitive.
type Approval struct {
	Mode Mode
	// Allow lists the commands --smart may run. Empty means every command that is not
	// denied; non-empty means only commands whose every part matches a pattern. It also
	// names, by tool name, the MCP tools --smart may call (mcp__terraform__*); an MCP tool
	// no pattern names is denied.
	Allow []string
	// Deny lists commands, and MCP tool names, that are never run, in every mode (-y
	// included).
	Deny []string
	// WorkDir is the absolute directory shell commands start in, so --smart resolves
	// relative paths against it: in a home directory, .docker is ~/.docker. The agent
	// sets it from its sandbox; "" means unknown, and then a relative path to a
	// credential directory is denied as if the start were a home directory.
	WorkDir string
	// Home is the sandbox's home directory, so a WorkDir in it counts as in a home
	// directory wherever the home is (/Users/me, /var/lib/ci). In --smart the agent asks
	// the sandbox for it before the first turn; "" means unknown.
	Home string
}

// Decision is the policy's answer for one tool call.
type Decision struct {
	Allow  bool
	Reason string // why it was denied
}

func allow() Decision { return Decision{Allow: true} }

func deny(format string, args ...any) Decision {
	return Decision{Reason: fmt.Sprintf(format, args...)}
}

// compiled is an Approval with its patterns compiled.
type compiled struct {
	Approval
	allow, deny []*regexp.Regexp
}

// compile checks and compiles the patterns.
func (a Approval) compile() (*compiled, error) {
	c := &compiled{Approval: a}
	if a.Mode < ModeDefault || a.Mode > ModeYes {
		return nil, fmt.Errorf("approval mode %d: want default, smart or yes", int(a.Mode))
	}
	for _, list := range []struct {
		name string
		in   []string
		out  *[]*regexp.Regexp
	}{{"allow", a.Allow, &c.allow}, {"deny", a.Deny, &c.deny}} {
		for i, p := range list.in {
			if strings.TrimSpace(p) == "" {
				return nil, fmt.Errorf("approval %s pattern %d is empty", list.name, i+1)
			}
			*list.out = append(*list.out, patternRegexp(strings.TrimSpace(p)))
		}
	}
	return c, nil
}

// Validate reports a malformed policy (an empty pattern, an unknown mode), so the CLI can
// reject a bad configuration before anything is provisioned.
func (a Approval) Validate() error {
	_, err := a.compile()
	return err
}

// CheckCommand returns the policy's decision on running command with execute, for
// diagnostics and documentation ("would --smart run this?").
func (a Approval) CheckCommand(command string) (Decision, error) {
	c, err := a.compile()
	if err != nil {
		return Decision{}, err
	}
	in, err := json.Marshal(map[string]string{"command": command})
	if err != nil {
		return Decision{}, err
	}
	return c.decide("execute", tools.Shell, in), nil
}

func patternRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^`)
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

const approveHint = "run talkops with -y/--yes to approve every tool call, or --smart to apply the approval policy"

// decide applies the policy to one call of a tool of kind kind.
func (c *compiled) decide(name string, kind tools.Kind, input json.RawMessage) Decision {
	if kind == tools.Shell {
		var in struct {
			Command string `json:"command"`
		}
		_ = json.Unmarshal(input, &in) // a malformed call is reported by the tool itself
		if d := c.checkDenyPatterns(in.Command); !d.Allow {
			return d
		}
		switch c.Mode {
		case ModeYes:
			return allow()
		case ModeSmart:
			return c.checkCommand(in.Command)
		}
		return deny("%s runs shell commands, which need approval: %s", name, approveHint)
	}
	if kind == tools.External {
		return c.decideExternal(name)
	}
	if c.Mode == ModeYes {
		return allow()
	}
	if p := secretPathArg(name, input); p != "" {
		return deny("%s of %s denied: it looks like a credentials file", name, p)
	}
	switch kind {
	case tools.ReadOnly:
		return allow()
	case tools.Mutating, tools.Network:
		if c.Mode == ModeSmart {
			return allow()
		}
		return deny("%s changes files or reaches the network, which needs approval: %s", name, approveHint)
	}
	return deny("%s: unknown tool kind %v", name, kind)
}

// decideExternal applies the policy to an MCP tool, by its name (mcp__SERVER__TOOL): the
// deny patterns in every mode, -y allows the rest, --smart only what an allow pattern
// names (mcp__terraform__*), and the default mode nothing.
func (c *compiled) decideExternal(name string) Decision {
	for i, re := range c.deny {
		if re.MatchString(name) {
			return deny("%s matches the deny pattern %q", name, c.Deny[i])
		}
	}
	switch c.Mode {
	case ModeYes:
		return allow()
	case ModeSmart:
		for _, re := range c.allow {
			if re.MatchString(name) {
				return allow()
			}
		}
		return deny("%s is an MCP tool that no [approval] allow pattern names (for example %q)", name, mcpPattern(name))
	}
	return deny("%s is an MCP tool, which needs approval: %s", name, approveHint)
}

// mcpPattern suggests the allow pattern for every tool of name's server.
func mcpPattern(name string) string {
	if i := strings.LastIndex(name, "__"); i > 0 {
		return name[:i+2] + "*"
	}
	return name
}

// secretPathArg returns the path argument of a tool that reads file content (read_file,
// grep) when it names a credentials file.
func secretPathArg(name string, input json.RawMessage) string {
	if name != "read_file" && name != "grep" {
		return ""
	}
	var in struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(input, &in) != nil || in.Path == "" {
		return ""
	}
	if secretPath(in.Path) {
		return in.Path
	}
	return ""
}

// withholds is the file tools' rule for what the model must not read: the credentials
// files read_file is refused, unless -y lifted the check.
func (c *compiled) withholds(p string) bool { return c.Mode != ModeYes && secretPath(p) }

// checkPatterns applies the deny patterns (every mode) or, with allowList, the allow
// patterns to every simple command the line would run.
func (c *compiled) checkDenyPatterns(command string) Decision {
	if len(c.deny) == 0 {
		return allow()
	}
	texts := [][]string{{strings.TrimSpace(command)}}
	if s, err := readShell(command); err == nil {
		for _, sc := range s.cmds {
			texts = append(texts, commandTexts(sc))
		}
	}
	for i, re := range c.deny {
		for _, ts := range texts {
			if slices.ContainsFunc(ts, re.MatchString) {
				return deny("the command matches the deny pattern %q", c.Deny[i])
			}
		}
	}
	return allow()
}

// commandTexts returns the ways a pattern may see a simple command: as written, expanded,
// and expanded from its program on (without sudo, env, assignments and the like). The
// last is the one messages show.
func commandTexts(sc *simpleCmd) []string {
	all := joinFields(sc.args).text
	if len(sc.assigns) > 0 {
		all = strings.TrimSpace(strings.Join(sc.assigns, " ") + " " + all)
	}
	texts := []string{strings.TrimSpace(sc.source), all}
	if name, args, _ := program(sc.args); name != "" {
		texts = append(texts, strings.TrimSpace(name+" "+joinFields(args).text))
	}
	return texts
}

// checkCommand is --smart's verdict on a shell command that no deny pattern matched.
func (c *compiled) checkCommand(command string) Decision {
	if strings.TrimSpace(command) == "" {
		return allow() // the tool reports the missing command
	}
	s, err := readShell(command)
	if err != nil {
		return deny("smart mode could not read the command (%v) and denies what it cannot check; simplify it", strings.TrimPrefix(err.Error(), errUnreadable.Error()+": "))
	}
	if d := checkScript(s, startDir(c.WorkDir, c.Home)); !d.Allow {
		return d
	}
	if len(c.allow) == 0 {
		return allow()
	}
	for _, sc := range s.cmds {
		if name, _, _ := program(sc.args); name == "" {
			continue
		}
		texts := commandTexts(sc)
		if !slices.ContainsFunc(c.allow, func(re *regexp.Regexp) bool {
			return slices.ContainsFunc(texts, re.MatchString)
		}) {
			return deny("%q is not in the approval allow list", texts[len(texts)-1])
		}
	}
	return allow()
}

var (
	secretBase = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(\.env(\..+)?|id_(rsa|dsa|ecdsa|ed25519)(_sk)?|credentials\.json)$`)
	})
	safeEnv = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^\.env(\..+)?\.(example|sample|template|dist|defaults)$`)
	})
)

// credentialPaths are the credential files and directories of common tools, as they sit
// in a home directory. A path names one when its last segments are the entry's (so
// ~/.kube/config, /root/.kube/config and .kube/config all do); an entry ending in / is a
// directory that is credentials as a whole, so everything under it counts too.
var credentialPaths = []string{
	".ssh/", ".gnupg/", ".aws/", ".azure/", ".config/gcloud/",
	".docker/config.json", ".kube/config", ".config/gh/hosts.yml",
	".cargo/credentials", ".cargo/credentials.toml", ".gradle/gradle.properties",
	".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass", ".vault-token",
}

// credentialEntry is an entry of credentialPaths split into its segments.
type credentialEntry struct {
	segs []string
	dir  bool
}

var credentialEntries = func() []credentialEntry {
	out := make([]credentialEntry, len(credentialPaths))
	for i, p := range credentialPaths {
		out[i] = credentialEntry{segs: strings.Split(strings.TrimSuffix(p, "/"), "/"), dir: strings.HasSuffix(p, "/")}
	}
	return out
}()

// secretPath reports whether p names a file that usually holds credentials: a file the
// file tools withhold, and that shell commands must not read or copy.
func secretPath(p string) bool {
	p = strings.Trim(p, `"'`)
	if p == "" {
		return false
	}
	for _, part := range strings.Split(p, "=") { // --file=.env
		base := path.Base(part)
		if secretBase().MatchString(base) && !safeEnv().MatchString(base) {
			return true
		}
		segs := pathSegments(part)
		for _, e := range credentialEntries {
			for i := 0; i+len(e.segs) <= len(segs); i++ {
				if (e.dir || i+len(e.segs) == len(segs)) && slices.Equal(segs[i:i+len(e.segs)], e.segs) {
					return true
				}
			}
		}
	}
	return false
}

// isHomeDir reports whether p is a home directory (~, $HOME, /root, /home/NAME).
func isHomeDir(p string) bool {
	p = strings.TrimRight(strings.Trim(p, `"'`), "/")
	switch {
	case p == "~" || p == "$HOME" || p == "${HOME}" || p == "/root":
		return true
	case strings.HasPrefix(p, "/home/") && !strings.Contains(p[len("/home/"):], "/"):
		return true
	}
	return false
}

// holdsCredentialFile reports whether p is a directory on the way to one of
// credentialPaths (.docker for .docker/config.json, .config for .config/gh/hosts.yml).
func holdsCredentialFile(p string) bool {
	segs := pathSegments(strings.Trim(p, `"'`))
	for _, e := range credentialEntries {
		for k := 1; k < len(e.segs) && k <= len(segs); k++ {
			if slices.Equal(segs[len(segs)-k:], e.segs[:k]) {
				return true
			}
		}
	}
	return false
}

// pathSegments splits a path into its segments, without empty and "." ones.
func pathSegments(p string) []string {
	out := strings.Split(p, "/")
	return slices.DeleteFunc(out, func(s string) bool { return s == "" || s == "." })
}
