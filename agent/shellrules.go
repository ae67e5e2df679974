package agent

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// The --smart policy's built-in checks, as tables of rules over what readShell found: rules
// for the whole command line, for every word and redirection target, for every simple
// command, and by program name. The first rule that denies decides. Deny and allow
// patterns (checkPatterns) are matched against the same simple commands.

// A wordRule sees every word of a command (c) and every redirection target (c nil).
type (
	scriptRule  func(*script) Decision
	wordRule    func(c *simpleCmd, w word) Decision
	commandRule func(*simpleCmd) Decision
	// programRule sees a command's program (behind sudo, env, timeout, …) and arguments.
	programRule func(name string, args []word) Decision
)

var scriptRules = []scriptRule{
	func(s *script) Decision {
		if s.forkBomb {
			return deny("the command looks like a fork bomb")
		}
		return allow()
	},
	func(s *script) Decision {
		if s.hdocSubst {
			return deny("smart mode could not read the command: a here-document runs $(…) or `…`, and its output would become file content nobody reviewed; write the file with write_file instead")
		}
		return allow()
	},
	relativeEnviron,
}

var wordRules = []wordRule{
	func(_ *simpleCmd, w word) Decision {
		if readsEnviron(w) {
			return deny("reading a process environment (%s) is denied: it holds secrets", w.text)
		}
		return allow()
	},
	func(c *simpleCmd, w word) Decision {
		if c != nil && namesOnly(c) {
			return allow()
		}
		if maybeCredentialFile(w) {
			return deny("%s may be a credentials file; reading or copying credentials is denied", w.where())
		}
		if w = w.resolved(); credentialWord(w) {
			return deny("%s looks like a credentials file; reading or copying credentials is denied", w.text)
		}
		return allow()
	},
}

var commandRules = []commandRule{
	func(c *simpleCmd) Decision {
		if c.unreadable != nil {
			return deny("smart mode could not read the code handed to %s (%v) and denies what it cannot check; simplify it", c.args[0].text, strings.TrimPrefix(c.unreadable.Error(), errUnreadable.Error()+": "))
		}
		return allow()
	},
	func(c *simpleCmd) Decision {
		if c.hiddenCode != "" {
			return deny("%s, so it is denied", c.hiddenCode)
		}
		return allow()
	},
	func(c *simpleCmd) Decision {
		if name, _, dynamic := program(c.args); dynamic {
			return deny("the program name comes from a variable (%s); smart mode denies what it cannot check", name)
		}
		return allow()
	},
	func(c *simpleCmd) Decision {
		name, args, _ := program(c.args)
		if r, ok := programRules[name]; ok && !namesOnly(c) {
			return r(name, args)
		}
		if strings.HasPrefix(name, "mkfs") {
			return deny("%s formats a file system and is denied", name)
		}
		return allow()
	},
	func(c *simpleCmd) Decision {
		if name, args, _ := program(c.args); wrappers[name].rest == runsHidden && len(args) > 0 {
			return deny("%s runs a command smart mode cannot find reliably (%s); run the command directly instead", name, joinFields(args).text)
		}
		return allow()
	},
	interpreterCode,
	pipedIntoInterpreter,
}

var programRules = map[string]programRule{
	"env":      printsEnvironment,
	"printenv": printsEnvironment,
	"set": func(_ string, args []word) Decision {
		if len(args) == 0 {
			return deny("set without arguments prints every variable, which holds secrets")
		}
		return allow()
	},
	"local":    declaresPrint,
	"export":   declaresPrint,
	"declare":  declaresPrint,
	"typeset":  declaresPrint,
	"readonly": declaresPrint,
	"compgen": func(_ string, args []word) Decision {
		if hasArg(args, "-v") || hasArg(args, "-e") || hasArg(args, "variable") || hasArg(args, "export") {
			return deny("compgen -v/-e lists the environment")
		}
		return allow()
	},
	"rm": func(_ string, args []word) Decision {
		if hasArg(args, "--no-preserve-root") {
			return deny("rm --no-preserve-root is denied")
		}
		recursive := slices.ContainsFunc(args, func(a word) bool {
			return a.text == "--recursive" || (strings.HasPrefix(a.text, "-") && !strings.HasPrefix(a.text, "--") && strings.ContainsAny(a.text, "rR"))
		})
		if recursive {
			for _, a := range operands(args) {
				if systemRoot(a) {
					return deny("rm -r %s would destroy the system or home directory", a.text)
				}
			}
		}
		return allow()
	},
	"chmod": onRoot, "chown": onRoot, "chgrp": onRoot,
	"dd": func(_ string, args []word) Decision {
		for _, a := range args {
			if strings.HasPrefix(a.text, "of=/dev/") && a.text != "of=/dev/null" {
				return deny("dd onto a device (%s) is denied", a.text)
			}
		}
		return allow()
	},
	"shred": func(name string, args []word) Decision {
		for _, a := range operands(args) {
			if strings.HasPrefix(a.text, "/dev/") {
				return deny("%s on a device is denied", name)
			}
		}
		return allow()
	},
	"wipefs": wipesDisks, "fdisk": wipesDisks, "sfdisk": wipesDisks, "cfdisk": wipesDisks,
	"parted": wipesDisks, "mkswap": wipesDisks, "blkdiscard": wipesDisks, "mke2fs": wipesDisks,
	"shutdown": denied, "reboot": denied, "halt": denied, "poweroff": denied,
	"init": runlevel, "telinit": runlevel,
	"kill": func(_ string, args []word) Decision {
		if len(args) > 0 && args[len(args)-1].text == "-1" && slices.ContainsFunc(args[:len(args)-1], func(a word) bool { return strings.HasPrefix(a.text, "-") }) {
			return deny("kill -1 signals every process and is denied")
		}
		return allow()
	},
	"awk": awkCode, "gawk": awkCode, "mawk": awkCode, "nawk": awkCode,
	"sed": sedCode, "gsed": sedCode,
	"eval":   generatedCode,
	"alias":  generatedCode,
	"trap":   generatedCode,
	"source": sourced,
	".":      sourced,
	"ps":     psEnvironment,
	"jq":     jqEnvironment,
	"gojq":   jqEnvironment,
	"yq":     jqEnvironment,
	"cd":     entersCredentials, "pushd": entersCredentials,
	"cp": copiesCredentials, "mv": copiesCredentials, "ln": copiesCredentials, "rsync": copiesCredentials,
	"scp": copiesCredentials, "rclone": copiesCredentials, "tar": tarCredentials, "zip": copiesCredentials,
	"7z": copiesCredentials, "7za": copiesCredentials, "cpio": copiesCredentials, "pax": copiesCredentials,
	"grep": copiesCredentials, "egrep": copiesCredentials, "rg": copiesCredentials, "ag": copiesCredentials, "find": copiesCredentials,
}

// psEnvironment denies ps with BSD's e flag (ps e, ps axe, ps eww), which prints each
// process's environment after its command. ps -e (every process) is fine; ps -E is
// the environment on BSD and macOS.
func psEnvironment(_ string, args []word) Decision {
	valueNext := false
	for _, a := range args {
		t := a.text
		if valueNext {
			valueNext = false
			continue
		}
		switch {
		case t == "-E":
			return deny("ps -E prints every process's environment, which holds secrets")
		case strings.HasPrefix(t, "--"):
			valueNext = !strings.Contains(t, "=") && slices.Contains(psLongValue, t[2:])
		case strings.HasPrefix(t, "-"):
			valueNext = len(t) >= 2 && strings.ContainsRune("oOpqsuUgGtCN", rune(t[len(t)-1]))
		case strings.Trim(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "":
			// BSD options: letters without a dash; o, O, p, q, t, U take a value.
			if strings.ContainsRune(t, 'e') {
				return deny("ps %s prints each process's environment (the e flag), which holds secrets", t)
			}
			valueNext = strings.ContainsAny(t[len(t)-1:], "oOpqtU")
		}
	}
	return allow()
}

var psLongValue = []string{"format", "sort", "pid", "ppid", "user", "User", "group", "Group", "tty", "sid", "cols", "columns", "rows", "lines", "width", "quick-pid"}

// jqEnv is jq's access to the environment: the env builtin and $ENV (yq adds strenv).
var jqEnv = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|[^A-Za-z0-9_.$])(str)?env([^A-Za-z0-9_]|$)|\$ENV\b`)
})

// jqEnvironment denies a jq program that reads the environment (jq -n env, jq -n '$ENV').
func jqEnvironment(name string, args []word) Decision {
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "--arg" || t == "--argjson" || t == "--slurpfile" || t == "--rawfile":
			i += 2
		case t == "--indent" || t == "-L" || t == "--library-path":
			i++
		case strings.HasPrefix(t, "-"):
		default:
			// The first operand is the program; the rest are files.
			if jqEnv().MatchString(t) {
				return deny("%s code that reads the environment (env, $ENV) is denied: it holds secrets", name)
			}
			return allow()
		}
	}
	return allow()
}

// entersCredentials denies cd into a directory that holds credential files (cd ~/.docker
// && cat config.json), whose names would then be relative.
func entersCredentials(name string, args []word) Decision {
	for _, a := range operands(args) {
		if credentialDirAt(a) {
			return deny("%s %s enters a directory that holds credential files; reading or copying credentials is denied", name, a.where())
		}
	}
	return allow()
}

// copiesCredentials denies copying, archiving or searching a directory that holds
// credential files (cp -r ~/.docker x, tar czf x.tgz ~, grep -r token ~/.config), also
// when a cd made the path relative (cd ~ && grep -r token .).
func copiesCredentials(name string, args []word) Decision {
	for _, a := range operands(args) {
		if holdsCredentialsAt(a) {
			return deny("%s %s would read the credential files in it; reading or copying credentials is denied", name, a.where())
		}
	}
	return allow()
}

// tarCredentials is copiesCredentials for tar, which reads its operands from the
// directory -C names (tar -C ~ -czf x.tgz .). Extracting and listing read only the
// archive (tar -C ~ -xzf go.tgz).
func tarCredentials(name string, args []word) Decision {
	if tarExtracts(args) {
		return allow()
	}
	dir, fromDir := "", false
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch t := w.text; {
		case t == "-C" || t == "--directory" || strings.HasPrefix(t, "--directory="):
			d := newWordFrom(w, strings.TrimPrefix(t, "--directory="))
			if !strings.HasPrefix(t, "--directory=") {
				if i+1 >= len(args) {
					return allow()
				}
				i++
				d = args[i]
			}
			d.dir = w.dir
			if holdsCredentialsAt(d) && i+1 < len(args) && slices.ContainsFunc(operands(args[i+1:]), func(o word) bool { return o.text == "." }) {
				return deny("%s -C %s . would read the credential files in it; reading or copying credentials is denied", name, d.text)
			}
			p, known := resolvePath(w.dir, d)
			dir, fromDir = p, true
			if !known {
				dir = unknownDir
			}
			continue
		case strings.HasPrefix(t, "-"):
			continue
		}
		if fromDir {
			w.dir = dir
		}
		if holdsCredentialsAt(w) {
			return deny("%s %s would read the credential files in it; reading or copying credentials is denied", name, w.where())
		}
	}
	return allow()
}

// tarValueLetters are tar's short options that take a value; in a dash cluster the rest
// of the cluster is that value (-cf/tmp/x.tar names the file /tmp/x.tar).
const tarValueLetters = "bCfFgHIKLNTVX"

// tarExtracts reports whether tar extracts or lists (-x, -t, xzf, --extract, --list).
func tarExtracts(args []word) bool {
	for i, a := range args {
		t := a.text
		switch {
		case t == "--extract" || t == "--get" || t == "--list":
			return true
		case strings.HasPrefix(t, "--"):
		case strings.HasPrefix(t, "-"):
			letters := t[1:]
			if k := strings.IndexAny(letters, tarValueLetters); k >= 0 {
				letters = letters[:k]
			}
			if strings.ContainsAny(letters, "xt") {
				return true
			}
		case i == 0 && strings.ContainsAny(t, "xt"): // old style: xzf takes its values from the next words
			return true
		}
	}
	return false
}

// namesOnly reports whether a command prints names rather than content (ls ~/.config/*,
// find ~ -name '*.log'), so naming a credentials directory is fine. Its output must not
// go on to another command, which could read the files it names.
func namesOnly(c *simpleCmd) bool {
	if c.pipedOut {
		return false
	}
	switch name, args, _ := program(c.args); name {
	case "ls", "du", "stat", "tree", "test", "[":
		return true
	case "find":
		return !slices.ContainsFunc(args, func(a word) bool { return slices.Contains(execActions["find"], a.text) })
	}
	return false
}

func printsEnvironment(name string, _ []word) Decision {
	return deny("%s prints the environment, which holds secrets; print the one non-secret variable you need with echo", name)
}

func declaresPrint(name string, args []word) Decision {
	if len(operands(args)) == 0 && (len(args) == 0 || slices.ContainsFunc(args, func(a word) bool { return strings.ContainsAny(a.text, "px") })) {
		return deny("%s prints the environment, which holds secrets", strings.TrimSpace(name+" "+joinFields(args).text))
	}
	return allow()
}

func onRoot(name string, args []word) Decision {
	for _, a := range operands(args) {
		if a.text == "/" || a.text == "/*" {
			return deny("%s on / is denied", name)
		}
	}
	return allow()
}

func wipesDisks(name string, _ []word) Decision {
	if name == "mke2fs" {
		return deny("%s formats a file system and is denied", name)
	}
	return deny("%s partitions or wipes disks and is denied", name)
}

func denied(name string, _ []word) Decision { return deny("%s is denied", name) }

func runlevel(name string, args []word) Decision {
	if hasArg(args, "0") || hasArg(args, "6") {
		return deny("%s %s is denied", name, joinFields(args).text)
	}
	return allow()
}

func generatedCode(name string, args []word) Decision {
	if slices.ContainsFunc(args, func(a word) bool { return a.dynamic }) {
		return deny("%s of generated code cannot be checked and is denied", name)
	}
	return allow() // literal code is read and checked as commands of its own
}

func sourced(name string, args []word) Decision {
	if len(args) > 0 && args[0].dynamic {
		if strings.Contains(args[0].text, "<(") {
			return deny("sourcing downloaded or generated code is denied")
		}
		return deny("%s of a generated path cannot be checked and is denied", name)
	}
	return allow()
}

func hasArg(args []word, s string) bool {
	return slices.ContainsFunc(args, func(a word) bool { return a.text == s })
}

func operands(args []word) []word {
	var out []word
	for _, a := range args {
		if !strings.HasPrefix(a.text, "-") {
			out = append(out, a)
		}
	}
	return out
}

// interpreterCode checks the code an interpreter is given with -c/-e or on stdin.
// Shell code is read as commands of its own (see addNested); other languages cannot be
// read, so code that names the environment or a credentials file is denied.
func interpreterCode(c *simpleCmd) Decision {
	name, args, _ := program(c.args)
	if !isInterpreter(name) && name != "source" && name != "." {
		return allow()
	}
	if c.procSubFetch {
		if name == "source" || name == "." {
			return deny("sourcing downloaded code is denied")
		}
		return deny("%s runs a downloaded script (<(curl ...)); download to a file and inspect it first", name)
	}
	code, ok := inlineCode(name, args)
	if !ok && c.stdinDoc != nil && !readsScriptFile(args) {
		code, ok = *c.stdinDoc, true
	}
	if !ok {
		return allow()
	}
	if code.dynamic {
		if c.subFetch {
			return deny("%s -c runs downloaded code; download to a file and inspect it first", name)
		}
		return deny("%s -c with generated code cannot be checked and is denied", name)
	}
	if !isShell(name) && name != "source" && name != "." {
		if envAccess().MatchString(code.text) {
			return deny("%s code that reads the environment is denied: it holds secrets", name)
		}
		if re := commandRunners()[language(name)]; re != nil {
			if m := re.FindString(code.text); m != "" {
				return deny("%s code that runs commands or generated code (%q) cannot be checked and is denied; run the command in the shell instead", name, strings.TrimSpace(m))
			}
		}
		if f := codeReadsSecret(code.text); f != "" {
			return deny("%s code that reads %s is denied: it holds secrets", name, f)
		}
	}
	return allow()
}

// codeReadsSecret returns a credentials file or process environment that code in another
// language names, or "".
func codeReadsSecret(code string) string {
	for _, f := range strings.FieldsFunc(code, func(r rune) bool { return strings.ContainsRune(" \t\n'\"(),;`<>{}", r) }) {
		if secretPath(f) || readsEnviron(newWord(f)) {
			return f
		}
	}
	return ""
}

// envAccess is how common interpreters read their environment.
var envAccess = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`environ|getenv|\bENV\b|_ENV\b|process\.env|Deno\.env|System\.getenv|\$env:`)
})

// commandRunners is how each interpreter's inline code runs a command, or code smart mode
// cannot see (eval of a built string, a module named at run time), which could read the
// environment of a child process. Compiled on first use, like the other policy patterns.
var commandRunners = sync.OnceValue(func() map[string]*regexp.Regexp {
	return map[string]*regexp.Regexp{
		"python": regexp.MustCompile(`subprocess|\bos\.(system|popen|exec\w*|spawn\w*|posix_spawn\w*|fork)\b|\bpty\.spawn|\bcommands\.|__import__|importlib|\bgetattr\s*\(|\b(exec|eval|compile)\s*\(`),
		"perl":   regexp.MustCompile("\\b(system|exec|qx|fork|eval)\\b|\\bopen\\b[^;]*\\||`"),
		"ruby":   regexp.MustCompile("\\b(system|exec|spawn|fork|eval|instance_eval|class_eval|send|__send__|public_send|syscall)\\b|IO\\.popen|Open3|%x|`"),
		"node":   regexp.MustCompile(`child_process|\b(execSync|execFile|execFileSync|spawn|spawnSync|fork|eval|Function)\s*\(|\b(require|import)\s*\(\s*[^'"\s)]|process\.binding|Deno\.(run|Command)|Bun\.(spawn|\$)|\$` + "`"),
		"php":    regexp.MustCompile("\\b(system|exec|shell_exec|passthru|popen|proc_open|pcntl_exec|eval|assert|create_function|call_user_func\\w*)\\s*\\(|`"),
		"lua":    regexp.MustCompile(`\bos\.execute|\bio\.popen|\bload(string)?\s*\(|\bdofile|\brequire\b`),
		"pwsh":   regexp.MustCompile(`(?i)start-process|invoke-expression|\biex\b|invoke-command|invoke-item|\[system\.diagnostics|(^|[;\s(])&\s*\S`),
	}
})

// language is the interpreter family commandRunners knows name by (python3.12 is python,
// nodejs, deno and bun are node).
func language(name string) string {
	for _, l := range []string{"python", "perl", "ruby", "php", "lua", "pwsh"} {
		if strings.HasPrefix(name, l) {
			return l
		}
	}
	if strings.HasPrefix(name, "node") || name == "deno" || name == "bun" {
		return "node"
	}
	return ""
}

// inlineCode returns the code an interpreter's arguments carry: the argument after every
// code option, clusters included (perl -le, python3 -Ic), or the code attached to it
// (python3 -c'…', perl -le'…', node --eval=…). An option's value is not skipped, so one
// flag cannot hide the next (python3 -E -c …).
func inlineCode(name string, args []word) (word, bool) {
	if isShell(name) {
		return dashC(args)
	}
	letters, longs := "ceEr", []string{"--eval"}
	if strings.HasPrefix(name, "node") || name == "bun" {
		letters, longs = letters+"p", append(longs, "--print") // node -p/--print evaluates and prints
	}
	var code []word
	for i, a := range args {
		t := a.text
		takesNext := false
		switch {
		case strings.HasPrefix(t, "--"):
			long, value, hasValue := strings.Cut(t, "=")
			if !slices.Contains(longs, long) {
				continue
			}
			if hasValue {
				code = append(code, newWordFrom(a, value))
			}
			takesNext = !hasValue
		case len(t) >= 2 && t[0] == '-':
			flags := optionLetters(t[1:])
			k := strings.IndexAny(flags, letters)
			if k < 0 {
				continue
			}
			// The rest of the cluster may be the code (python3 -c'…'); a cluster of flags
			// ending in a code option takes the next word (perl -ce CODE). Both are read
			// when both could be.
			if rest := t[2+k:]; rest != "" {
				code = append(code, newWordFrom(a, rest))
			}
			takesNext = len(flags) == len(t)-1 && strings.ContainsRune(letters, rune(t[len(t)-1]))
		}
		if takesNext && i+1 < len(args) {
			code = append(code, args[i+1])
		}
	}
	if len(code) == 0 {
		return word{}, false
	}
	return joinFields(code), true
}

// optionLetters is the part of a short option cluster that can hold flags: its leading
// letters (perl -I$HOME/lib has only I).
func optionLetters(cluster string) string {
	end := strings.IndexFunc(cluster, func(c rune) bool { return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') })
	if end < 0 {
		return cluster
	}
	return cluster[:end]
}

// awkCode denies awk programs that read ENVIRON, awk's copy of the environment, that run
// commands (system(), "cmd" | getline, print | "cmd"), whose output smart mode cannot
// check, or that name a credentials file (getline < "~/.netrc").
func awkCode(name string, args []word) Decision {
	if prog, ok := awkProgram(args); ok && prog.dynamic {
		return deny("%s code with generated parts (%s) cannot be checked and is denied", name, prog.text)
	}
	for _, a := range args {
		if strings.Contains(a.text, "ENVIRON") {
			return deny("%s code that reads ENVIRON is denied: it holds secrets", name)
		}
		code := awkString().ReplaceAllString(a.text, `""`)
		if m := awkRunner().FindString(code); m != "" {
			return deny("%s code that runs commands (%q) cannot be checked and is denied; run the command in the shell instead", name, strings.TrimSpace(m))
		}
		if f := codeReadsSecret(a.text); f != "" && strings.ContainsAny(a.text, " \t\n") {
			return deny("%s code that reads %s is denied: it holds secrets", name, f)
		}
	}
	return allow()
}

// awkProgram returns awk's program: the first operand, unless -f names a file.
func awkProgram(args []word) (word, bool) {
	for i := 0; i < len(args); i++ {
		switch t := args[i].text; {
		case t == "--":
			if i+1 < len(args) {
				return args[i+1], true
			}
			return word{}, false
		case t == "-f" || t == "--file":
			return word{}, false
		case t == "-F" || t == "-v" || t == "--field-separator" || t == "--assign":
			i++
		case t == "-e" || t == "--source":
			if i+1 < len(args) {
				return args[i+1], true
			}
		case strings.HasPrefix(t, "-") && len(t) > 1:
		default:
			return args[i], true
		}
	}
	return word{}, false
}

var (
	// awkString is an awk string literal, removed before looking for pipes.
	awkString = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(\\.|[^"\\])*"`) })
	// awkRunner is how awk runs a command: system(), a pipe into getline or out of print
	// (|, but not ||), gawk's coprocess |&, and @load of an extension.
	awkRunner = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\bsystem\s*\(|\|\s*getline|\|&|\bprintf?\b[^;{}\n]*?([^|]|^)\|([^|]|$)|@load`)
	})
)

// sedCode denies GNU sed scripts that run commands: the e command and the s command's e
// flag run text as a shell command. A script it cannot read is denied too.
func sedCode(name string, args []word) Decision {
	for _, script := range sedScripts(args) {
		if script.dynamic {
			return deny("%s script with generated parts cannot be checked and is denied", name)
		}
		runs, readable := sedRunsCommand(script.text)
		switch {
		case !readable:
			return deny("smart mode could not read the %s script %q and denies what it cannot check; simplify it", name, script.text)
		case runs:
			return deny("%s script %q runs a shell command (the e command or s///e), which smart mode cannot check; run the command in the shell instead", name, script.text)
		}
		if f := codeReadsSecret(script.text); f != "" {
			return deny("%s script that reads %s is denied: it holds secrets", name, f)
		}
	}
	return allow()
}

// sedScripts returns sed's scripts: every -e/--expression value or, without one, the
// first operand.
func sedScripts(args []word) []word {
	var scripts []word
	var firstOperand *word
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "--":
			if firstOperand == nil && i+1 < len(args) {
				firstOperand = &args[i+1]
			}
			i = len(args)
		case strings.HasPrefix(t, "--expression="):
			scripts = append(scripts, newWordFrom(args[i], strings.TrimPrefix(t, "--expression=")))
		case t == "--expression" || t == "--file" || t == "--line-length":
			if t == "--expression" && i+1 < len(args) {
				scripts = append(scripts, args[i+1])
			}
			i++
		case strings.HasPrefix(t, "--"):
		case strings.HasPrefix(t, "-") && len(t) > 1:
			cluster := t[1:]
			if k := strings.IndexAny(cluster, "efl"); k >= 0 && cluster[0] != 'i' {
				switch value := cluster[k+1:]; {
				case value == "" && i+1 < len(args):
					i++
					if cluster[k] == 'e' {
						scripts = append(scripts, args[i])
					}
				case cluster[k] == 'e':
					scripts = append(scripts, newWordFrom(args[i], value))
				}
			}
		default:
			if firstOperand == nil {
				firstOperand = &args[i]
			}
		}
	}
	if len(scripts) == 0 && firstOperand != nil {
		scripts = append(scripts, *firstOperand)
	}
	return scripts
}

// sedRunsCommand reads a sed script command by command: whether one runs a shell
// command (e, or s with the e flag), and whether the script could be read at all.
func sedRunsCommand(script string) (runs, readable bool) {
	r := &sedReader{s: script}
	for {
		r.skip(" \t\n;")
		if r.i >= len(r.s) {
			return false, true
		}
		if !r.address() || r.i >= len(r.s) {
			return false, false
		}
		if runs, ok := r.command(); runs || !ok {
			return runs, ok
		}
	}
}

// sedReader is a position in a sed script.
type sedReader struct {
	s string
	i int
}

func (r *sedReader) skip(chars string) {
	for r.i < len(r.s) && strings.IndexByte(chars, r.s[r.i]) >= 0 {
		r.i++
	}
}

// delimited moves past text ending at an unescaped delim on the same line.
func (r *sedReader) delimited(delim byte) bool {
	for r.i < len(r.s) {
		c := r.s[r.i]
		r.i++
		switch c {
		case '\\':
			r.i++
		case delim:
			return true
		case '\n':
			return false
		}
	}
	return false
}

// toEnd moves to the end of the line, or to one of stops.
func (r *sedReader) toEnd(stops string) {
	for r.i < len(r.s) && r.s[r.i] != '\n' && strings.IndexByte(stops, r.s[r.i]) < 0 {
		if r.s[r.i] == '\\' {
			r.i++
		}
		r.i++
	}
}

// address moves past a command's addresses (3, $, /re/I, \,re,, first~step, a,+n, !).
func (r *sedReader) address() bool {
	for r.i < len(r.s) {
		c := r.s[r.i]
		switch {
		case c >= '0' && c <= '9', strings.IndexByte("$,~+! \t", c) >= 0:
			r.i++
			continue
		case c == '/':
			r.i++
		case c == '\\' && r.i+1 < len(r.s):
			c = r.s[r.i+1]
			r.i += 2
		default:
			return true
		}
		if !r.delimited(c) {
			return false
		}
		r.skip("IM")
	}
	return true
}

// command reads one command: whether it runs a shell command, and whether it was read.
func (r *sedReader) command() (runs, ok bool) {
	c := r.s[r.i]
	r.i++
	switch {
	case c == 'e':
		return true, true
	case c == 's' || c == 'y':
		if r.i >= len(r.s) || r.s[r.i] == '\n' || r.s[r.i] == '\\' {
			return false, false
		}
		delim := r.s[r.i]
		r.i++
		for range 2 { // pattern and replacement
			if !r.delimited(delim) {
				return false, false
			}
		}
		for r.i < len(r.s) && strings.IndexByte(";\n}", r.s[r.i]) < 0 {
			switch r.s[r.i] {
			case 'e':
				return true, true
			case 'w': // the rest of the line is a file name
				r.toEnd("")
				continue
			}
			r.i++
		}
	case c == 'l':
		r.toEnd(";}")
	case strings.IndexByte("{}=dDgGhHnNpPxzF", c) >= 0:
	case strings.IndexByte("aicrRwW#", c) >= 0:
		r.toEnd("")
	case strings.IndexByte("btTqQLv:", c) >= 0:
		r.toEnd(";}")
	default:
		return false, false
	}
	return false, true
}

// pipedIntoInterpreter denies piping into an interpreter that reads its program from stdin:
// curl … | sh, base64 -d | bash, cat x | python3 -.
func pipedIntoInterpreter(c *simpleCmd) Decision {
	name, args, _ := program(c.args)
	if !c.pipedIn || !isInterpreter(name) || readsScriptFile(args) {
		return allow()
	}
	if c.fetchedIn {
		return deny("piping a download into %s runs code nobody has read; download to a file and inspect it first", name)
	}
	return deny("piping into %s runs code smart mode cannot check; write a script file and run it instead", name)
}

// relativeEnviron catches cd /proc/self && cat environ.
func relativeEnviron(s *script) Decision {
	proc := false
	var env word
	for _, c := range s.cmds {
		for _, w := range c.args {
			if w.pattern == "/proc" || strings.HasPrefix(w.pattern, "/proc/") {
				proc = true
			}
			if globMatch(path.Base(w.pattern), "environ") {
				env = w
			}
		}
	}
	if proc && env.text != "" {
		return deny("reading a process environment (%s under /proc) is denied: it holds secrets", env.text)
	}
	return allow()
}

// environSamples are paths a /proc pattern is tried against.
var environSamples = []string{"/proc/self/environ", "/proc/1/environ", "/proc/thread-self/environ", "/proc/self/task/1/environ"}

func readsEnviron(w word) bool {
	if strings.Contains(w.text, "/proc/") && strings.Contains(w.text, "/environ") {
		return true
	}
	return slices.ContainsFunc(environSamples, func(p string) bool { return globMatch(w.pattern, p) })
}

// credentialNames are the names a glob in a path is tried against: every segment of
// credentialPaths and the names secretBase matches anywhere.
var credentialNames = func() []string {
	names := []string{".env", ".env.local", ".env.production", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credentials.json"}
	for _, e := range credentialEntries {
		for _, seg := range e.segs {
			if !slices.Contains(names, seg) {
				names = append(names, seg)
			}
		}
	}
	return names
}()

// credentialWord reports whether a word names a credentials file, literally or as a glob
// such as ~/.ss?/id_*. A glob segment counts when it has two literal leading characters
// (so that `cat *` stays allowed) or when it lists a directory that holds credentials
// (~/.docker/*, and ~/.* in a home directory); like the shell, it only matches a
// leading dot when it starts with one.
func credentialWord(w word) bool {
	if strings.ContainsAny(w.text, " \n") {
		return false // prose, such as a commit message that mentions .env
	}
	if secretPath(w.text) {
		return true
	}
	if !strings.ContainsAny(w.pattern, "*?[") {
		return false
	}
	textSegs, patSegs := strings.Split(w.text, "/"), strings.Split(w.pattern, "/")
	candidates := []string{""}
	for i, seg := range patSegs {
		var next []string
		options := []string{seg}
		if strings.ContainsAny(seg, "*?[") {
			options = nil
			inHome := len(textSegs) == len(patSegs) && i > 0 && isHomeDir(strings.Join(textSegs[:i], "/"))
			if strings.IndexAny(seg, "*?[") >= 2 || slices.ContainsFunc(candidates, holdsCredentialFile) || (inHome && strings.HasPrefix(seg, ".")) {
				for _, n := range credentialNames {
					if globMatch(seg, n) && (strings.HasPrefix(seg, ".") || !strings.HasPrefix(n, ".")) {
						options = append(options, n)
					}
				}
			}
			if len(options) == 0 {
				options = []string{"x"}
			}
		}
		for _, c := range candidates {
			for _, o := range options {
				if i > 0 {
					o = c + "/" + o
				}
				next = append(next, o)
			}
		}
		if len(next) > 64 {
			next = next[:64]
		}
		candidates = next
	}
	return slices.ContainsFunc(candidates, secretPath)
}

var systemRoots = map[string]bool{
	"/": true, "/*": true, "~": true, "~/": true, "~/*": true, "$HOME": true, "$HOME/": true, "$HOME/*": true,
	"/etc": true, "/usr": true, "/bin": true, "/sbin": true, "/lib": true, "/lib64": true, "/var": true, "/home": true,
	"/root": true, "/boot": true, "/opt": true, "/srv": true, "/sys": true, "/proc": true, "/dev": true, "/*/*": true,
}

func systemRoot(w word) bool {
	if systemRoots[w.text] || systemRoots[strings.TrimRight(w.text, "/")] {
		return true
	}
	if !strings.ContainsAny(w.pattern, "*?[") || w.pattern == "*" {
		return false
	}
	for root := range systemRoots {
		if strings.HasPrefix(root, "/") && !strings.ContainsAny(root, "*") && globMatch(strings.TrimRight(w.pattern, "/"), root) {
			return true
		}
	}
	return false
}

func globMatch(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// disk devices a redirection must not write to.
var diskDevice = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|mapper/|dm-|md|loop|sr)`)
})

// interpreters run code given on stdin or with -c.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "fish": true, "csh": true, "tcsh": true,
	"python": true, "python2": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true, "lua": true,
	"pwsh": true, "deno": true, "bun": true,
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true}

func isShell(name string) bool { return shells[name] }

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

// readsScriptFile reports whether an interpreter's arguments name a script or a -c
// program (so stdin is data, not code).
func readsScriptFile(args []word) bool {
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

// checkScript applies the built-in rules to a command line --smart is asked to run.
func checkScript(s *script, start string) Decision {
	placeCommands(s.cmds, start)
	for _, r := range scriptRules {
		if d := r(s); !d.Allow {
			return d
		}
	}
	for _, c := range s.cmds {
		for _, w := range c.args {
			for _, r := range wordRules {
				if d := r(c, w); !d.Allow {
					return d
				}
			}
		}
	}
	for _, w := range s.redirs {
		for _, r := range wordRules {
			if d := r(nil, w); !d.Allow {
				return d
			}
		}
		if diskDevice().MatchString(w.text) {
			return deny("writing to the disk device %s is denied", w.text)
		}
	}
	for _, c := range s.cmds {
		for _, r := range commandRules {
			if d := r(c); !d.Allow {
				return d
			}
		}
	}
	return allow()
}
