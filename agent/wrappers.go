package agent

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Wrappers are programs that run another command: sudo printenv, timeout 5 printenv,
// su -c 'printenv'. The rules judge the command a wrapper runs, so program looks through
// every wrapper in this table; a wrapper that takes a shell command line is judged as
// sh -c of it, and one whose command cannot be found reliably is denied (runsHidden).

// wrapperRuns says what a wrapper does with the words after its options and operands.
type wrapperRuns int

const (
	runsCommand   wrapperRuns = iota // they are a command and its arguments (sudo cmd …)
	runsShellArgs                    // they are a shell's arguments (su user -- -c cmd)
	runsJoined                       // they are joined into one shell command line (watch cmd …)
	runsNothing                      // they are not a command (script's log file)
	runsHidden                       // they hold a command that cannot be found reliably (ssh, parallel)
)

type wrapper struct {
	// valueOpts are the short options that take a value (-n 5 or -n5); longValue the
	// long ones that take it as the next word (--signal KILL; --signal=KILL is one word).
	valueOpts string
	longValue []string
	// operands is how many words come between the options and the command (timeout's
	// duration, chroot's new root, flock's lock file, ssh's host). Options may follow them.
	operands int
	// shellOpt / shellLong name the option whose value is a shell command line
	// (su -c, script --command).
	shellOpt  byte
	shellLong string
	// splitOpt / splitLong name the option whose value, with the words after it, is a
	// command line the wrapper splits and runs (env -S 'sh -c' CMD).
	splitOpt  byte
	splitLong string
	// queryOpts are short options that make the wrapper run nothing (command -v).
	queryOpts string
	// execOpt switches a runsJoined wrapper to running its words as a command (watch -x).
	execOpt   byte
	execLong  string
	rest      wrapperRuns
	assigns   bool   // NAME=value words may come before the command (env)
	fromInput bool   // the command's arguments come from stdin, -I marks where (xargs)
	bare      string // what runs when no command is given ("": nothing; "sh": a shell reading stdin)
}

var wrappers = map[string]wrapper{
	// sudo -s and doas -s without a command run a shell that reads stdin.
	"sudo":             {valueOpts: "ugCDhprtUTR", longValue: []string{"user", "group", "chdir", "close-from", "host", "prompt", "role", "type", "other-user", "command-timeout", "chroot"}, bare: "sh"},
	"doas":             {valueOpts: "uC", bare: "sh"},
	"env":              {valueOpts: "uC", longValue: []string{"unset", "chdir"}, splitOpt: 'S', splitLong: "split-string", assigns: true, bare: "env"},
	"command":          {queryOpts: "vV"},
	"builtin":          {},
	"exec":             {valueOpts: "a"},
	"nohup":            {},
	"time":             {valueOpts: "fo", longValue: []string{"format", "output"}},
	"nice":             {valueOpts: "n", longValue: []string{"adjustment"}},
	"ionice":           {valueOpts: "cnpPu", longValue: []string{"class", "classdata", "pid", "pgid", "uid"}},
	"stdbuf":           {valueOpts: "ioe", longValue: []string{"input", "output", "error"}},
	"setsid":           {},
	"chronic":          {},
	"unbuffer":         {},
	"busybox":          {},
	"timeout":          {valueOpts: "sk", longValue: []string{"signal", "kill-after"}, operands: 1},
	"taskset":          {operands: 1},
	"chrt":             {valueOpts: "TPD", longValue: []string{"sched-runtime", "sched-period", "sched-deadline"}, operands: 1},
	"flock":            {valueOpts: "wE", longValue: []string{"timeout", "conflict-exit-code"}, operands: 1, shellOpt: 'c', shellLong: "command"},
	"chroot":           {longValue: []string{"userspec", "groups"}, operands: 1, bare: "sh"},
	"unshare":          {valueOpts: "SGRw", longValue: []string{"setuid", "setgid", "root", "wd", "map-user", "map-group", "propagation"}, bare: "sh"},
	"nsenter":          {valueOpts: "tSGw", longValue: []string{"target", "setuid", "setgid", "wd"}, bare: "sh"},
	"su":               {valueOpts: "gGsw", longValue: []string{"group", "supp-group", "shell", "whitelist-environment"}, operands: 1, shellOpt: 'c', shellLong: "command", rest: runsShellArgs, bare: "sh"},
	"script":           {valueOpts: "EIOBT", longValue: []string{"echo", "log-in", "log-out", "log-io", "log-timing", "logging-format"}, shellOpt: 'c', shellLong: "command", rest: runsNothing, bare: "sh"},
	"watch":            {valueOpts: "nq", longValue: []string{"interval", "equexit"}, execOpt: 'x', execLong: "exec", rest: runsJoined},
	"xargs":            {valueOpts: "InPdLsaE", fromInput: true, bare: "echo"},
	"runuser":          {rest: runsHidden},                             // su-style or, with -u, a command: too ambiguous to read
	"sg":               {operands: 1, shellOpt: 'c', rest: runsJoined}, // sg GROUP CMD runs CMD with sh -c
	"entr":             {rest: runsJoined},
	"strace":           {valueOpts: "eoOpsuEPSXbIa", longValue: []string{"output", "attach", "user", "env", "trace"}},
	"ltrace":           {valueOpts: "eoOpsunaADFlxL", longValue: []string{"output", "align", "indent"}},
	"fakeroot":         {valueOpts: "lsi", longValue: []string{"lib", "faked"}},
	"faketime":         {valueOpts: "m", operands: 1},
	"firejail":         {},
	"tini":             {valueOpts: "ep"},
	"dumb-init":        {valueOpts: "r", longValue: []string{"rewrite"}},
	"gosu":             {operands: 1},
	"su-exec":          {operands: 1},
	"setpriv":          {},
	"prlimit":          {valueOpts: "p", longValue: []string{"pid"}},
	"numactl":          {valueOpts: "CNmpPiw"},
	"cgexec":           {valueOpts: "g"},
	"sshpass":          {valueOpts: "pfdP"},
	"pkexec":           {longValue: []string{"user"}},
	"dbus-run-session": {longValue: []string{"config-file", "dbus-daemon"}},
	"xvfb-run":         {valueOpts: "nsfep", longValue: []string{"server-num", "server-args", "auth-file", "error-file", "xauth-protocol"}},
	"bwrap":            {rest: runsHidden},
	"systemd-run":      {rest: runsHidden},
	"tmux":             {rest: runsHidden},
	"screen":           {rest: runsHidden},
	"parallel":         {rest: runsHidden},
	"sem":              {rest: runsHidden},
	"ssh":              {valueOpts: "BbcDEeFIiJLlmOopQRSWw", operands: 1, rest: runsHidden},
}

var assignment = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`) })

// program finds the program a simple command runs, behind the wrappers in the table. It
// returns "" for a command that runs nothing. A wrapper that hides its command is returned
// as the program, with the words that hold the command as its arguments.
func program(w []word) (name string, args []word, nameDynamic bool) {
	for len(w) > 0 { // each wrapper's command is shorter than it, so this ends
		if w[0].dynamic {
			return path.Base(w[0].text), w[1:], true
		}
		base := path.Base(w[0].text)
		wr, ok := wrappers[base]
		if !ok {
			return base, w[1:], false
		}
		next, done := wr.unwrap(base, w[1:])
		if done != nil {
			return done.name, done.args, false
		}
		w = next
	}
	return "", nil, false
}

// ran is what a wrapper runs when it is not a command to look through further.
type ran struct {
	name string
	args []word
	// assigns are NAME=value words a wrapper sets for its command (env NAME=value cmd).
	assigns []word
}

// programChain returns every program on the way to the one a simple command runs: each
// wrapper with its own arguments, then the program, so that a wrapper's options are seen
// too (sudo ssh -o ProxyCommand=…).
func programChain(w []word) []ran {
	var steps []ran
	for len(w) > 0 {
		base := path.Base(w[0].text)
		wr, ok := wrappers[base]
		if w[0].dynamic || !ok {
			return append(steps, ran{name: base, args: w[1:]})
		}
		next, done := wr.unwrap(base, w[1:])
		step := ran{name: base, args: w[1:]}
		if wr.assigns {
			step.assigns = slices.DeleteFunc(slices.Clone(w[1:len(w)-len(next)]), func(a word) bool { return !assignment().MatchString(a.text) })
		}
		steps = append(steps, step)
		if done != nil {
			return append(steps, *done)
		}
		w = next
	}
	return steps
}

// unwrap returns the command a wrapper runs (next), or what to judge in its place.
func (wr wrapper) unwrap(name string, w []word) (next []word, done *ran) {
	execMode := false
	operands := wr.operands
	i := 0
	for {
		// Options, which may also follow the operands (flock FILE -c CMD, su USER -c CMD).
		// A lone - is an option too (env -, su -).
		for i < len(w) && strings.HasPrefix(w[i].text, "-") {
			if w[i].text == "--" {
				i++
				break
			}
			var exec bool
			if i, exec, done = wr.option(name, w, i); done != nil {
				return nil, done
			}
			execMode = execMode || exec
		}
		if wr.assigns {
			for i < len(w) && assignment().MatchString(w[i].text) {
				i++
			}
		}
		if operands == 0 || i >= len(w) {
			break
		}
		operands--
		i++
	}
	return wr.command(name, w[:i], w[i:], execMode)
}

// option reads the option w[i] and its value. It returns where the next word starts,
// whether the option makes a runsJoined wrapper run a command (watch -x), and what the
// wrapper runs when the option settles it (su -c CMD, env -S CMD, command -v).
func (wr wrapper) option(name string, w []word, i int) (next int, exec bool, done *ran) {
	opt := w[i].text
	i++
	if strings.HasPrefix(opt, "--") {
		long, value, hasValue := strings.Cut(opt[2:], "=")
		switch {
		case wr.shellLong != "" && long == wr.shellLong:
			return i, false, wr.code(name, w, i, value, hasValue, false)
		case wr.splitLong != "" && long == wr.splitLong:
			return i, false, wr.code(name, w, i, value, hasValue, true)
		case wr.execLong != "" && long == wr.execLong:
			return i, true, nil
		case !hasValue && slices.Contains(wr.longValue, long) && i < len(w):
			return i + 1, false, nil
		}
		return i, false, nil
	}
	for k := 1; k < len(opt); k++ {
		c, attached := opt[k], opt[k+1:]
		switch {
		case strings.IndexByte(wr.queryOpts, c) >= 0:
			return i, false, &ran{name: name, args: w[i-1:]}
		case c == wr.shellOpt && wr.shellOpt != 0:
			return i, false, wr.code(name, w, i, attached, attached != "", false)
		case c == wr.splitOpt && wr.splitOpt != 0:
			return i, false, wr.code(name, w, i, attached, attached != "", true)
		case c == wr.execOpt && wr.execOpt != 0:
			exec = true
		case strings.IndexByte(wr.valueOpts, c) >= 0:
			if attached == "" && i < len(w) {
				i++ // the value is the next word
			}
			return i, exec, nil // the rest of the word is the value
		}
	}
	return i, exec, nil
}

// code is what a wrapper runs given the command line of its shell or split option: the
// option's attached value (--command=CMD, -cCMD) or else the next word, followed, for a
// split option, by the words after it.
func (wr wrapper) code(name string, w []word, i int, attached string, hasAttached, split bool) *ran {
	var words []word
	switch {
	case hasAttached:
		words = append(words, newWordFrom(w[i-1], attached))
	case i < len(w):
		words, i = append(words, w[i]), i+1
	case !split:
		return &ran{name: name}
	}
	if split {
		words = append(words, w[i:]...)
	}
	return shellRun(joinFields(words))
}

// command returns what a wrapper runs given its options and operands (opts) and the
// words after them (rest).
func (wr wrapper) command(name string, opts, rest []word, execMode bool) (next []word, done *ran) {
	if wr.fromInput {
		if repl := xargsReplace(opts); repl != "" {
			// -I puts each input line where repl stands, so those words are generated:
			// `curl … | xargs -I{} sh -c {}` runs downloaded code.
			rest = fromInput(rest, repl)
		}
	}
	switch {
	case wr.rest == runsHidden:
		return nil, &ran{name: name, args: rest}
	case wr.rest == runsNothing || len(rest) == 0:
		return nil, &ran{name: wr.bare}
	case wr.rest == runsShellArgs:
		return nil, &ran{name: "sh", args: rest}
	case wr.rest == runsJoined && !execMode:
		return nil, shellRun(joinFields(rest))
	}
	return rest, nil
}

// shellRun is a shell command line a wrapper runs, judged as sh -c of it.
func shellRun(code word) *ran {
	return &ran{name: "sh", args: []word{{text: "-c", pattern: "-c"}, code}}
}

// newWordFrom is the part s of the word w (the value of -cCMD or --command=CMD).
func newWordFrom(w word, s string) word {
	if !w.dynamic {
		return word{text: s, pattern: s}
	}
	return word{text: s, pattern: "*", dynamic: true}
}
