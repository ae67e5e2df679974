package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

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

func (c *compiled) checkDenyPatterns(command string) Decision {
	if len(c.deny) == 0 {
		return allow()
	}
	texts := []string{strings.TrimSpace(command)}
	if cmds, err := parseShell(command); err == nil {
		for _, sc := range flatten(cmds) {
			texts = append(texts, commandTexts(sc)...)
		}
	}
	for i, re := range c.deny {
		for _, t := range texts {
			if re.MatchString(t) {
				return deny("the command matches the deny pattern %q", c.Deny[i])
			}
		}
	}
	return allow()
}

// commandTexts returns the ways a pattern may see a simple command: as written, and from
// its program on (without sudo, env, assignments and the like).
func commandTexts(sc shCmd) []string {
	all := joinWords(sc.words)
	name, args, _ := program(sc)
	if name == "" {
		return []string{all}
	}
	from := strings.TrimSpace(name + " " + joinWords(args))
	return []string{all, from}
}

func joinWords(ws []shWord) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.text
	}
	return strings.Join(parts, " ")
}

// checkCommand is --smart's verdict on a shell command that no deny pattern matched.
func (c *compiled) checkCommand(command string) Decision {
	if strings.TrimSpace(command) == "" {
		return allow() // the tool reports the missing command
	}
	if isForkBomb(command) {
		return deny("the command looks like a fork bomb")
	}
	cmds, err := parseShell(command)
	if err != nil {
		return deny("smart mode could not read the command (%v) and denies what it cannot check; simplify it", errors.Unwrap(err))
	}
	all := flatten(cmds)
	for _, sc := range all {
		if d := checkSimple(sc); !d.Allow {
			return d
		}
	}
	if d := checkPipelines(cmds); !d.Allow {
		return d
	}
	if len(c.allow) > 0 {
		for _, sc := range all {
			texts := commandTexts(sc)
			if name, _, _ := program(sc); name == "" {
				continue
			}
			if !slices.ContainsFunc(c.allow, func(re *regexp.Regexp) bool {
				return slices.ContainsFunc(texts, re.MatchString)
			}) {
				return deny("%q is not in the approval allow list", texts[len(texts)-1])
			}
		}
	}
	return allow()
}

var funcDef = regexp.MustCompile(`([A-Za-z_:.][A-Za-z0-9_:.]*)\s*\(\s*\)\s*\{([^}]*)\}`)

// isForkBomb spots a function that pipes into itself in the background: :(){ :|:& };:
func isForkBomb(command string) bool {
	for _, m := range funcDef.FindAllStringSubmatch(command, -1) {
		name, body := m[1], m[2]
		if strings.Contains(body, name+"|") || strings.Contains(body, name+" |") {
			if strings.Contains(body, "&") {
				return true
			}
		}
	}
	return false
}

// interpreters run code given on stdin or with -c.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "fish": true, "csh": true, "tcsh": true,
	"python": true, "python2": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true, "lua": true,
	"pwsh": true, "deno": true, "bun": true,
}

func isInterpreter(name string) bool {
	if interpreters[name] {
		return true
	}
	// python3.12, perl5.36, ...
	for p := range interpreters {
		if strings.HasPrefix(name, p) && strings.Trim(name[len(p):], "0123456789.") == "" {
			return true
		}
	}
	return false
}

// fetchers download content.
var fetchers = map[string]bool{"curl": true, "wget": true, "fetch": true, "http": true, "https": true, "aria2c": true, "lwp-request": true, "nc": true, "ncat": true}

var (
	diskDevice  = regexp.MustCompile(`^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|mapper/|dm-|md|loop|sr)`)
	systemRoots = map[string]bool{
		"/": true, "/*": true, "~": true, "~/": true, "~/*": true, "$HOME": true, "${HOME}": true, "$HOME/": true, "$HOME/*": true,
		"/etc": true, "/usr": true, "/bin": true, "/sbin": true, "/lib": true, "/lib64": true, "/var": true, "/home": true,
		"/root": true, "/boot": true, "/opt": true, "/srv": true, "/sys": true, "/proc": true, "/dev": true, "/*/*": true,
	}
)

// checkSimple applies the built-in deny list to one simple command.
func checkSimple(sc shCmd) Decision {
	for _, w := range append(slices.Clone(sc.words), sc.redirs...) {
		if strings.Contains(w.text, "/environ") && strings.Contains(w.text, "/proc/") {
			return deny("reading a process environment (%s) is denied: it holds secrets", w.text)
		}
		if secretPath(w.text) {
			return deny("%s looks like a credentials file; reading or copying credentials is denied", w.text)
		}
	}
	for _, r := range sc.redirs {
		if diskDevice.MatchString(r.text) {
			return deny("writing to the disk device %s is denied", r.text)
		}
	}
	name, args, dynamic := program(sc)
	if dynamic {
		return deny("the program name comes from a variable (%s); smart mode denies what it cannot check", sc.words[0].text)
	}
	argText := func() []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = a.text
		}
		return out
	}()
	nonOpts := func() []string {
		var out []string
		for _, a := range argText {
			if !strings.HasPrefix(a, "-") {
				out = append(out, a)
			}
		}
		return out
	}
	switch name {
	case "":
		return allow()
	case "env", "printenv":
		return deny("%s prints the environment, which holds secrets; print the one non-secret variable you need with echo", name)
	case "set":
		if len(args) == 0 {
			return deny("set without arguments prints every variable, which holds secrets")
		}
	case "export", "declare", "typeset", "readonly":
		if len(nonOpts()) == 0 && (len(args) == 0 || slices.ContainsFunc(argText, func(a string) bool { return strings.ContainsAny(a, "px") })) {
			return deny("%s %s prints the environment, which holds secrets", name, strings.Join(argText, " "))
		}
	case "compgen":
		if slices.Contains(argText, "-v") || slices.Contains(argText, "-e") {
			return deny("compgen -v/-e lists the environment")
		}
	case "rm":
		recursive := slices.ContainsFunc(argText, func(a string) bool {
			return a == "--recursive" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a, "rR"))
		})
		if slices.Contains(argText, "--no-preserve-root") {
			return deny("rm --no-preserve-root is denied")
		}
		if recursive {
			for _, a := range nonOpts() {
				if systemRoots[strings.TrimRight(a, "/")] || systemRoots[a] {
					return deny("rm -r %s would destroy the system or home directory", a)
				}
			}
		}
	case "chmod", "chown", "chgrp":
		for _, a := range nonOpts() {
			if a == "/" || a == "/*" {
				return deny("%s on / is denied", name)
			}
		}
	case "dd":
		for _, a := range argText {
			if strings.HasPrefix(a, "of=/dev/") && !strings.HasPrefix(a, "of=/dev/null") {
				return deny("dd onto a device (%s) is denied", a)
			}
		}
	case "shred", "wipefs", "fdisk", "sfdisk", "cfdisk", "parted", "mkswap", "blkdiscard":
		for _, a := range nonOpts() {
			if strings.HasPrefix(a, "/dev/") {
				return deny("%s on a device is denied", name)
			}
		}
		if name != "shred" {
			return deny("%s partitions or wipes disks and is denied", name)
		}
	case "shutdown", "reboot", "halt", "poweroff":
		return deny("%s is denied", name)
	case "init", "telinit":
		if slices.Contains(argText, "0") || slices.Contains(argText, "6") {
			return deny("%s %s is denied", name, strings.Join(argText, " "))
		}
	case "kill", "pkill", "killall":
		if name == "kill" && slices.Contains(argText, "-1") && len(argText) > 0 && argText[len(argText)-1] == "-1" {
			return deny("kill -1 signals every process and is denied")
		}
	case "eval", "source", ".":
		if slices.ContainsFunc(args, func(a shWord) bool { return a.dynamic }) {
			return deny("%s of generated code cannot be checked and is denied", name)
		}
	}
	if strings.HasPrefix(name, "mkfs") || name == "mke2fs" {
		return deny("%s formats a file system and is denied", name)
	}
	if isInterpreter(name) {
		// sh -c "$(curl ...)" and sh -c "$CODE" run code nobody can read first.
		for i, a := range args {
			if a.text == "-c" && i+1 < len(args) {
				code := args[i+1]
				if code.dynamic && hasFetcher(sc.subs) {
					return deny("%s -c runs downloaded code; download to a file and inspect it first", name)
				}
				if code.dynamic {
					return deny("%s -c with generated code cannot be checked and is denied", name)
				}
			}
		}
		for _, ps := range sc.procSubs {
			if hasFetcher([][]shCmd{ps}) {
				return deny("%s runs a downloaded script (<(curl ...)); download to a file and inspect it first", name)
			}
		}
	}
	if name == "source" || name == "." {
		for _, ps := range sc.procSubs {
			if hasFetcher([][]shCmd{ps}) {
				return deny("sourcing downloaded code is denied")
			}
		}
	}
	return allow()
}

func hasFetcher(groups [][]shCmd) bool {
	for _, g := range groups {
		for _, sc := range flatten(g) {
			if name, _, _ := program(sc); fetchers[name] {
				return true
			}
		}
	}
	return false
}

// checkPipelines denies piping into an interpreter that reads its program from stdin:
// curl … | sh, base64 -d | bash, cat x | python3 -.
func checkPipelines(cmds []shCmd) Decision {
	var pipeline []shCmd
	check := func() Decision {
		fetched := false
		for i, sc := range pipeline {
			name, args, _ := program(sc)
			if fetchers[name] {
				fetched = true
			}
			if i == 0 || !sc.pipedIn || !isInterpreter(name) || readsScriptFile(args) {
				continue
			}
			if fetched {
				return deny("piping a download into %s runs code nobody has read; download to a file and inspect it first", name)
			}
			return deny("piping into %s runs code smart mode cannot check; write a script file and run it instead", name)
		}
		return allow()
	}
	for _, sc := range cmds {
		for _, groups := range [][][]shCmd{sc.subs, sc.procSubs} {
			for _, g := range groups {
				if d := checkPipelines(g); !d.Allow {
					return d
				}
			}
		}
		pipeline = append(pipeline, sc)
		if !sc.pipedOut {
			if d := check(); !d.Allow {
				return d
			}
			pipeline = nil
		}
	}
	return check()
}

// readsScriptFile reports whether an interpreter's arguments name a script or a -c
// program (so stdin is data, not code).
func readsScriptFile(args []shWord) bool {
	for i, a := range args {
		switch {
		case a.text == "-" || a.text == "-s":
			return false
		case a.text == "-c" || a.text == "-e" || a.text == "-m" || a.text == "-E":
			return i+1 < len(args)
		case !strings.HasPrefix(a.text, "-"):
			return true
		}
	}
	return false
}

var (
	secretBase = regexp.MustCompile(`^(\.env(\..+)?|\.netrc|_netrc|\.git-credentials|\.pgpass|\.npmrc|\.pypirc|id_(rsa|dsa|ecdsa|ed25519)(_sk)?|credentials\.json|\.vault-token)$`)
	secretDirs = regexp.MustCompile(`(^|/)(\.ssh|\.gnupg)(/|$)|(^|/)\.aws/credentials$|(^|/)\.docker/config\.json$|(^|/)\.kube/config$|(^|/)\.config/gcloud(/|$)|(^|/)\.azure(/|$)`)
	safeEnv    = regexp.MustCompile(`^\.env(\..+)?\.(example|sample|template|dist|defaults)$`)
)

// secretPath reports whether p names a file that usually holds credentials.
func secretPath(p string) bool {
	p = strings.Trim(p, `"'`)
	if p == "" || strings.ContainsAny(p, " \n") {
		return false
	}
	for _, part := range strings.Split(p, "=") { // --file=.env
		base := path.Base(part)
		if secretBase.MatchString(base) && !safeEnv.MatchString(base) {
			return true
		}
		if secretDirs.MatchString(part) {
			return true
		}
	}
	return false
}
