package agent

import (
	"slices"
	"strings"
)

// Some programs run a command, or code of their own, that an option value carries:
// rsync -e 'sh -c …', tar --to-command=…, git -c core.pager=…, ssh -o ProxyCommand=….
// commandOptions lists those options per program (and per git subcommand, as "git rebase");
// commandEnv the environment variables that carry a command (GIT_SSH_COMMAND=… git fetch).
// A value that is a shell command line is read like sh -c's and judged with the rest of
// the command line; a value smart mode cannot read (an editor's commands, a program file)
// is denied.

// carried is what an option value holds.
type carried int

const (
	carriesShell     carried = iota // a command line, run by a shell or split into words: judged as sh -c of it
	carriesCode                     // commands in the program's own language, which can run anything: denied
	carriesFile                     // a file holding the program's code, which cannot be checked: denied
	carriesGitConfig                // a git setting, KEY=VALUE, judged by gitCommandSettings
	carriesSSHOption                // an ssh_config setting, Key=Value or "Key Value", judged by sshCommandSettings
	carriesPagerCmd                 // a pager's initial command: ! and | run shell commands, so those are denied
)

// commandOption names an option that carries a command: -X VALUE, -XVALUE, --long VALUE,
// --long=VALUE, or, with plus, +VALUE.
type commandOption struct {
	short byte
	long  string
	plus  bool
	as    carried
	// prefix, when set, is what the value starts with when it carries a command; it is
	// cut off (tar --checkpoint-action=exec=CMD).
	prefix string
}

var (
	// vim -e/-E (ex mode) reads commands from stdin.
	editorOptions = []commandOption{{short: 'c', as: carriesCode}, {long: "cmd", as: carriesCode}, {plus: true, as: carriesCode},
		{short: 'e', as: carriesCode}, {short: 'E', as: carriesCode},
		{short: 'S', as: carriesFile}, {short: 's', as: carriesFile}}
	awkOptions   = []commandOption{{short: 'f', long: "file", as: carriesFile}, {short: 'E', long: "exec", as: carriesFile}}
	sshOptions   = []commandOption{{short: 'o', as: carriesSSHOption}}
	pagerOptions = []commandOption{{plus: true, as: carriesPagerCmd}}
)

var commandOptions = map[string][]commandOption{
	"rsync": {{short: 'e', long: "rsh", as: carriesShell}, {long: "rsync-path", as: carriesShell}},
	"tar": {{long: "to-command", as: carriesShell}, {short: 'I', long: "use-compress-program", as: carriesShell},
		{short: 'F', long: "info-script", as: carriesShell}, {long: "new-volume-script", as: carriesShell},
		{long: "rsh-command", as: carriesShell}, {long: "checkpoint-action", as: carriesShell, prefix: "exec="}},
	"ssh":  sshOptions,
	"scp":  append([]commandOption{{short: 'S', as: carriesShell}}, sshOptions...),
	"sftp": append([]commandOption{{short: 'S', as: carriesShell}}, sshOptions...),
	"git":  {{short: 'c', as: carriesGitConfig}, {long: "config-env", as: carriesCode}},
	// git's subcommands that run a command given as an option.
	"git rebase":    {{short: 'x', long: "exec", as: carriesShell}},
	"git clone":     {{short: 'u', long: "upload-pack", as: carriesShell}, {short: 'c', long: "config", as: carriesGitConfig}},
	"git fetch":     {{long: "upload-pack", as: carriesShell}},
	"git pull":      {{long: "upload-pack", as: carriesShell}},
	"git ls-remote": {{long: "upload-pack", as: carriesShell}},
	"git push":      {{long: "receive-pack", as: carriesShell}, {long: "exec", as: carriesShell}},
	"git archive":   {{long: "exec", as: carriesShell}},
	"git difftool":  {{short: 'x', long: "extcmd", as: carriesShell}},
	"npx":           {{short: 'c', long: "call", as: carriesShell}},
	"npm exec":      {{short: 'c', long: "call", as: carriesShell}},
	"vim":           editorOptions, "vi": editorOptions, "nvim": editorOptions, "ex": editorOptions, "view": editorOptions,
	"vimdiff": editorOptions, "gvim": editorOptions,
	"less": pagerOptions, "more": pagerOptions,
	"make": {{short: 'E', long: "eval", as: carriesCode}}, "gmake": {{short: 'E', long: "eval", as: carriesCode}},
	// Programs whose inline code smart mode reads (for ENVIRON, env, system, sed's e) but
	// whose code in a file it cannot.
	"awk": awkOptions, "gawk": awkOptions, "mawk": awkOptions, "nawk": awkOptions,
	"sed":  {{short: 'f', long: "file", as: carriesFile}},
	"jq":   {{short: 'f', long: "from-file", as: carriesFile}},
	"gojq": {{short: 'f', long: "from-file", as: carriesFile}},
	"yq":   {{long: "from-file", as: carriesFile}},
}

// commandEnv are environment variables whose value is a command line a program runs.
var commandEnv = map[string]bool{
	"GIT_SSH_COMMAND": true, "GIT_SSH": true, "GIT_PAGER": true, "GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true,
	"GIT_EXTERNAL_DIFF": true, "GIT_ASKPASS": true, "SSH_ASKPASS": true, "GIT_PROXY_COMMAND": true,
	"PAGER": true, "MANPAGER": true, "EDITOR": true, "VISUAL": true, "LESSOPEN": true, "LESSCLOSE": true,
	"RSYNC_RSH": true, "PROMPT_COMMAND": true,
}

// optionEnv are environment variables that hold a program's options (TAR_OPTIONS=
// --to-command=…), read like options given to that program.
var optionEnv = map[string]string{"TAR_OPTIONS": "tar", "LESS": "less", "MORE": "more", "RSYNC_OPTIONS": "rsync"}

// hiddenEnv are environment variables that carry settings smart mode cannot read reliably
// (git configuration given through the environment, which may hold a command).
var hiddenEnv = map[string]bool{"GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true}

// gitCommandSettings are git settings whose value is a command line (lowercase; * is one
// dotted part such as a driver or tool name).
var gitCommandSettings = []string{
	"core.sshcommand", "core.pager", "core.editor", "core.askpass", "core.fsmonitor", "core.gitproxy",
	"sequence.editor", "pager.*", "diff.external", "diff.*.command", "diff.*.textconv",
	"filter.*.clean", "filter.*.smudge", "filter.*.process", "merge.*.driver",
	"credential.helper", "credential.*.helper", "gpg.program", "gpg.*.program",
	"uploadpack.packobjectshook", "remote.*.uploadpack", "remote.*.receivepack",
	"difftool.*.cmd", "mergetool.*.cmd", "man.*.cmd", "browser.*.cmd", "web.browser",
}

// settingMatch matches a git setting against a gitCommandSettings entry, whose * stands
// for any text (subsection names may hold dots and slashes).
func settingMatch(pattern, key string) bool {
	before, after, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == key
	}
	return len(key) > len(before)+len(after) && strings.HasPrefix(key, before) && strings.HasSuffix(key, after)
}

// carriedValue is one option value that carries a command.
type carriedValue struct {
	option string // as written, for messages
	value  word
	as     carried
	prefix string
}

// optionValues returns the values of name's command-carrying options in args. An option
// letter inside a cluster takes the rest of the cluster or, last, the next word; tar's
// old-style first word (tar xIf …) is read as a cluster too.
func optionValues(name string, args []word) []carriedValue {
	switch {
	case name == "git":
		sub, rest := gitSubcommand(args)
		out := scanOptions("git", args[:len(args)-len(rest)])
		if sub != "" {
			out = append(out, scanOptions("git "+sub, rest)...)
		}
		return out
	case name == "npm" && len(args) > 0 && args[0].text == "exec":
		return scanOptions("npm exec", args[1:])
	}
	return scanOptions(name, args)
}

// scanOptions returns the values of the options commandOptions[key] lists.
func scanOptions(key string, args []word) []carriedValue {
	table := commandOptions[key]
	if len(table) == 0 {
		return nil
	}
	var out []carriedValue
	next := func(i int) word {
		if i+1 < len(args) {
			return args[i+1]
		}
		return word{}
	}
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "--":
			return out
		case strings.HasPrefix(t, "--"):
			long, value, hasValue := strings.Cut(t[2:], "=")
			for _, o := range table {
				if o.long != "" && o.long == long {
					v := newWordFrom(args[i], value)
					if !hasValue {
						v = next(i)
						i++
					}
					out = append(out, carriedValue{option: "--" + long, value: v, as: o.as, prefix: o.prefix})
					break
				}
			}
		case strings.HasPrefix(t, "+") && len(t) > 1:
			for _, o := range table {
				if o.plus {
					out = append(out, carriedValue{option: "+", value: newWordFrom(args[i], t[1:]), as: o.as})
				}
			}
		case strings.HasPrefix(t, "-") && len(t) > 1, i == 0 && key == "tar" && t != "":
			cluster := strings.TrimPrefix(t, "-")
			for k := 0; k < len(cluster); k++ {
				o, ok := shortOption(table, cluster[k])
				if !ok {
					continue
				}
				v := newWordFrom(args[i], cluster[k+1:])
				if k+1 == len(cluster) {
					v = next(i)
					i++
				}
				out = append(out, carriedValue{option: "-" + string(cluster[k]), value: v, as: o.as})
				break
			}
		}
	}
	return out
}

func shortOption(table []commandOption, c byte) (commandOption, bool) {
	for _, o := range table {
		if o.short != 0 && o.short == c {
			return o, true
		}
	}
	return commandOption{}, false
}

// gitGlobalValue are git's options before the subcommand that take the next word.
var gitGlobalValue = []string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--exec-path", "--list-cmds"}

// gitSubcommand returns git's subcommand and the words after it.
func gitSubcommand(args []word) (string, []word) {
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "--":
			return "", nil
		case strings.HasPrefix(t, "-"):
			for _, v := range gitGlobalValue {
				if t == v {
					i++
				}
			}
		default:
			return t, args[i+1:]
		}
	}
	return "", nil
}

// gitConfigCommand returns the command line a git setting KEY=VALUE carries, or ok=false
// when the setting carries none. An alias whose value starts with ! is a shell command; any
// other alias is git's own arguments, read as a git command line.
func gitConfigCommand(key, value string) (code string, ok bool) {
	key = strings.ToLower(key)
	if strings.HasPrefix(key, "alias.") {
		if strings.HasPrefix(value, "!") {
			return value[1:], true
		}
		return "git " + value, true
	}
	if strings.HasPrefix(key, "protocol.") && strings.HasSuffix(key, ".allow") || key == "protocol.allow" {
		// protocol.ext.allow=always lets ext:: URLs run commands.
		return "", value != "never" && value != "user"
	}
	for _, p := range gitCommandSettings {
		if settingMatch(p, key) {
			return strings.TrimPrefix(value, "!"), true
		}
	}
	return "", false
}

// sshCommandSettings are ssh_config keywords whose value is a command line run locally.
var sshCommandSettings = map[string]bool{"proxycommand": true, "localcommand": true, "knownhostscommand": true}

// sshConfigCommand returns the command an ssh -o setting carries; hidden is set for a
// command that runs on the remote side (RemoteCommand), which cannot be judged.
func sshConfigCommand(setting string) (code string, ok, hidden bool) {
	key, value, found := strings.Cut(setting, "=")
	if !found {
		key, value, _ = strings.Cut(setting, " ")
	}
	key = strings.ToLower(strings.TrimSpace(key))
	switch {
	case sshCommandSettings[key]:
		return strings.TrimSpace(value), true, false
	case key == "remotecommand":
		return "", false, true
	}
	return "", false, false
}

// carriedCommands returns the command lines an option value or assignment carries, to be
// read like sh -c's, and the reason to deny when one cannot be read ("" when all can).
func carriedCommands(name string, args, assigns []word) (codes []word, denyReason string) {
	for _, cv := range optionValues(name, args) {
		code, ok, reason := cv.command(name)
		if reason != "" {
			return nil, reason
		}
		if ok {
			codes = append(codes, code)
		}
	}
	if name == "git" {
		more, reason := gitCarried(args)
		if reason != "" {
			return nil, reason
		}
		codes = append(codes, more...)
	}
	more, reason := envCarried(assigns)
	if reason != "" {
		return nil, reason
	}
	return append(codes, more...), ""
}

// command returns the command line an option value of the program name carries, or why
// it is denied.
func (cv carriedValue) command(name string) (code word, ok bool, denyReason string) {
	v := cv.value
	switch cv.as {
	case carriesShell:
		if cv.prefix == "" {
			return v, true, ""
		}
		after, ok := strings.CutPrefix(v.text, cv.prefix)
		return newWordFrom(v, after), ok, ""
	case carriesCode:
		return word{}, false, name + " " + cv.option + " runs " + name + " commands, which smart mode cannot check"
	case carriesFile:
		return word{}, false, name + " " + cv.option + " takes its program from a file, which smart mode cannot check (pass the program inline)"
	case carriesPagerCmd:
		if strings.ContainsAny(v.text, "!|") || v.dynamic {
			return word{}, false, name + " +" + v.text + " runs a shell command, which smart mode cannot check"
		}
	case carriesGitConfig:
		key, value, _ := strings.Cut(v.text, "=")
		return gitSetting(v, key, value, "git -c ")
	case carriesSSHOption:
		code, ok, hidden := sshConfigCommand(v.text)
		if hidden {
			return word{}, false, name + " -o " + v.text + " runs a command smart mode cannot find reliably"
		}
		return newWordFrom(v, code), ok, ""
	}
	return word{}, false, ""
}

// gitSetting is carriedValue.command for a git setting given as how (git -c, git config).
func gitSetting(v word, key, value, how string) (code word, ok bool, denyReason string) {
	c, ok := gitConfigCommand(key, value)
	if ok && c == "" {
		return word{}, false, how + key + " lets git run commands smart mode cannot check"
	}
	return newWordFrom(v, c), ok, ""
}

// gitCarried returns what git config KEY VALUE stores (every later git command uses it)
// and the commands ext:: URLs run.
func gitCarried(args []word) (codes []word, denyReason string) {
	if sub, rest := gitSubcommand(args); sub == "config" {
		ops := gitConfigOperands(rest)
		if len(ops) > 0 && (ops[0].text == "set" || ops[0].text == "--add") {
			ops = ops[1:]
		}
		if len(ops) >= 2 {
			code, ok, reason := gitSetting(ops[1], ops[0].text, ops[1].text, "git config ")
			if reason != "" {
				return nil, reason
			}
			if ok {
				codes = append(codes, code)
			}
		}
	}
	for _, a := range args {
		if after, ok := strings.CutPrefix(a.text, "ext::"); ok {
			codes = append(codes, newWordFrom(a, after))
		}
	}
	return codes, ""
}

// gitConfigValue are git config's options that take the next word as their value.
var gitConfigValue = []string{"-f", "--file", "--blob", "--type", "--default", "--comment", "--value"}

// gitConfigOperands returns git config's operands: its words without the options and
// their values, so the file of git config -f FILE KEY VALUE is not taken for the key.
func gitConfigOperands(args []word) []word {
	var out []word
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "--":
			return append(out, args[i+1:]...)
		case slices.Contains(gitConfigValue, t),
			!strings.HasPrefix(t, "--") && strings.HasPrefix(t, "-") && strings.HasSuffix(t, "f"): // -zf FILE
			i++
		case strings.HasPrefix(t, "-"):
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// envCarried returns the command lines NAME=value words carry (commandEnv, optionEnv).
func envCarried(assigns []word) (codes []word, denyReason string) {
	for _, a := range assigns {
		envName, value, ok := strings.Cut(a.text, "=")
		if !ok || !assignment().MatchString(a.text) {
			continue
		}
		if hiddenEnv[envName] || strings.HasPrefix(envName, "GIT_CONFIG_KEY_") {
			return nil, envName + " sets git configuration smart mode cannot check"
		}
		if commandEnv[envName] {
			codes = append(codes, newWordFrom(a, strings.TrimLeft(value, "|")))
		}
		if prog, ok := optionEnv[envName]; ok {
			more, reason := carriedCommands(prog, wordsOf(newWordFrom(a, value)), nil)
			if reason != "" {
				return nil, envName + ": " + reason
			}
			codes = append(codes, more...)
		}
	}
	return codes, ""
}

// wordsOf splits a value into words at blanks, as a program splits an option variable.
func wordsOf(w word) []word {
	var out []word
	for _, f := range strings.Fields(w.text) {
		out = append(out, newWordFrom(w, f))
	}
	return out
}
