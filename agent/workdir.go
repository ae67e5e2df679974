package agent

import (
	"path"
	"slices"
	"strings"
)

// The policy judges each simple command on its own, but a relative path means something
// else after cd ~ (cd ~ && tar czf x .). So the commands of a command line are walked in
// order, following cd, pushd and popd with literal arguments, and each word remembers the
// directory its command runs in. The walk is linear: a cd inside a subshell, a branch or
// a child shell is taken to stay in effect, which can only make later paths look more
// like home than they are.

// unknownDir is the working directory after a cd whose target only the running shell
// knows (cd "$DIR"). mark never occurs in a command smart mode reads.
const unknownDir = string(mark) + "?"

// unknownStart is the directory a command line starts in when the policy does not know
// the sandbox's working directory. Paths are taken relative to the project, as in "",
// except that a relative path to a directory that holds credential files (.docker)
// counts, since the start may be a home directory.
const unknownStart = string(mark) + "."

// startDir is where the walk starts for commands that start in workDir (the sandbox's
// working directory, "" when unknown) with home the sandbox's home directory ("" when
// unknown). A start in home becomes ~ or ~/…; a start that is, or is in, a directory
// holding credential files by its path (/, /home, /root, /home/NAME: daytona's
// /home/daytona, langsmith's /root) is kept as it is. Relative paths from either are
// judged like ~/… ones. Any other start is the project directory, "".
func startDir(workDir, home string) string {
	if !strings.HasPrefix(workDir, "/") {
		return unknownStart
	}
	p := path.Clean(workDir)
	if h := path.Clean(home); strings.HasPrefix(h, "/") && h != "/" {
		if p == h {
			return "~"
		}
		if rest, ok := strings.CutPrefix(p, h+"/"); ok {
			return "~/" + rest
		}
	}
	if _, inAHome := inHome(p); inAHome || p == "/" || p == "/home" {
		return p
	}
	return ""
}

// placeCommands sets, on every word of every command, the directory the command runs in:
// start (see startDir), a path relative to the project directory, a rooted path (/…, ~…,
// $HOME…), or unknownDir.
func placeCommands(cmds []*simpleCmd, start string) {
	d := workDir{cwd: start, old: start, cdpath: slices.ContainsFunc(cmds, setsCDPATH)}
	for _, c := range cmds {
		for i := range c.args {
			c.args[i].dir = d.cwd
		}
		steps := programChain(c.args)
		for k, st := range steps {
			// env -C DIR, sudo -D DIR: the command behind runs in DIR.
			if v, ok := chdirValue(st.name, st.args); ok {
				dir, known := resolvePath(d.cwd, v)
				if !known {
					dir = unknownDir
				}
				for _, later := range steps[k+1:] {
					for i := range later.args {
						later.args[i].dir = dir
					}
				}
			}
		}
		if name, args, _ := program(c.args); name == "cd" || name == "pushd" || name == "popd" {
			d.change(name, args, c.home)
		}
	}
}

// chdirOptions are the wrappers' options that set their command's working directory
// (env -C DIR, env --chdir=DIR).
var chdirOptions = map[string]struct {
	short byte
	long  string
}{
	"env": {'C', "chdir"}, "sudo": {'D', "chdir"}, "nsenter": {'w', "wd"}, "unshare": {'w', "wd"},
}

// chdirValue returns the directory a wrapper's chdir option names. The options are read
// as the wrapper reads them, so the chdir option may sit in a cluster (env -iC DIR) or
// after another option's value (env -u NAME -C DIR).
func chdirValue(name string, args []word) (word, bool) {
	opt, ok := chdirOptions[name]
	if !ok {
		return word{}, false
	}
	wr := wrappers[name]
	for i := 0; i < len(args) && strings.HasPrefix(args[i].text, "-") && args[i].text != "--"; i++ {
		t := args[i].text
		if long, value, hasValue := strings.Cut(strings.TrimPrefix(t, "--"), "="); strings.HasPrefix(t, "--") {
			switch {
			case long == opt.long && hasValue:
				return newWordFrom(args[i], value), true
			case long == opt.long && i+1 < len(args):
				return args[i+1], true
			case !hasValue && slices.Contains(wr.longValue, long):
				i++
			}
			continue
		}
		k := strings.IndexFunc(t[1:], func(c rune) bool { return c == rune(opt.short) || strings.ContainsRune(wr.valueOpts, c) })
		if k < 0 {
			continue
		}
		c, attached := t[1+k], t[2+k:]
		switch {
		case c == opt.short && attached != "":
			return newWordFrom(args[i], attached), true
		case c == opt.short && i+1 < len(args):
			return args[i+1], true
		case attached == "":
			i++ // another option's value is the next word
		}
	}
	return word{}, false
}

// searchesCDPATH reports whether cd looks a target up in CDPATH: one that is neither
// rooted nor starts with . or ..
func searchesCDPATH(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !rooted(p) && first != "." && first != ".."
}

// setsCDPATH reports whether a command sets CDPATH, after which cd resolves a relative
// target against directories smart mode does not follow.
func setsCDPATH(c *simpleCmd) bool {
	for _, ws := range [][]word{c.assignWords, c.args} {
		if slices.ContainsFunc(ws, func(w word) bool { return strings.HasPrefix(w.text, "CDPATH=") }) {
			return true
		}
	}
	return false
}

// workDir is the shell's directory state: its working directory, cd -'s previous one and
// pushd's stack.
type workDir struct {
	cwd, old string
	stack    []string
	cdpath   bool // the command line sets CDPATH
}

func (d *workDir) change(name string, args []word, home word) {
	ops := slices.DeleteFunc(slices.Clone(args), func(a word) bool {
		return strings.HasPrefix(a.text, "-") && a.text != "-" || a.text == "--"
	})
	cwd := d.cwd
	switch {
	case name == "popd":
		if len(ops) > 0 {
			break // popd +N drops a stack entry and stays
		}
		if len(d.stack) == 0 {
			return // popd fails
		}
		cwd, d.stack = d.stack[len(d.stack)-1], d.stack[:len(d.stack)-1]
	case len(ops) == 0 && name == "pushd":
		if len(d.stack) == 0 {
			return
		}
		cwd, d.stack[len(d.stack)-1] = d.stack[len(d.stack)-1], cwd
	case len(ops) == 0:
		cwd = "~" // a command the reader built (find -exec) knows no HOME of its own
		if home.text != "" {
			p, known := resolvePath(d.cwd, home)
			cwd = p
			if !known {
				cwd = unknownDir
			}
		}
	case ops[0].text == "-" && name == "cd":
		cwd = d.old
	case strings.HasPrefix(ops[0].text, "+") || strings.HasPrefix(ops[0].text, "-"):
		cwd = unknownDir // pushd +N rotates the stack
	default:
		p, known := resolvePath(d.cwd, ops[0])
		cwd = p
		if !known || d.cdpath && searchesCDPATH(ops[0].text) {
			cwd = unknownDir
		}
		if name == "pushd" {
			d.stack = append(d.stack, d.cwd)
		}
	}
	d.old, d.cwd = d.cwd, cwd
}

// rooted reports whether p does not depend on the working directory.
func rooted(p string) bool {
	return strings.HasPrefix(p, "/") || p == "~" || strings.HasPrefix(p, "~/") ||
		strings.HasPrefix(p, "$HOME") || strings.HasPrefix(p, "${HOME}")
}

// resolvePath returns the path w names from the directory dir, and whether it is known.
// A path relative to an unknown directory, or one that climbs (..) out of the project
// directory, is unknown and returned as written.
func resolvePath(dir string, w word) (string, bool) {
	p := w.text
	switch {
	case rooted(p):
		return cleanRooted(p), true
	case w.dynamic || dir == unknownDir:
		return p, false
	case rooted(dir):
		return cleanRooted(dir + "/" + p), true
	case dir == unknownStart:
		dir = ""
	}
	j := path.Join(dir, p)
	if j == ".." || strings.HasPrefix(j, "../") {
		return p, false
	}
	return j, true
}

// cleanRooted cleans a rooted path. One that climbs above the home directory it starts
// from (~/..) becomes /, which holds every home directory.
func cleanRooted(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	home, rest, _ := strings.Cut(p, "/")
	switch rest = path.Clean(rest); {
	case rest == ".." || strings.HasPrefix(rest, "../"):
		return "/"
	case rest == ".":
		return home
	}
	return home + "/" + rest
}

// resolved is w as seen from its command's directory when that is rooted (cd ~ && cat .*
// reads ~/.*), and w itself otherwise.
func (w word) resolved() word {
	if w.dir == "" || w.dir == unknownDir || !rooted(w.dir) || rooted(w.text) || w.dynamic {
		return w
	}
	return word{text: path.Join(w.dir, w.text), pattern: path.Join(w.dir, w.pattern)}
}

// holdsCredentialsAt reports whether w, from its command's directory, names a directory
// that holds credential files: a home directory, / or /home, or a directory in a home
// directory on the way to one of credentialPaths (~/.docker, ~/.config). A relative path
// whose directory is unknown counts when its own segments lead to one (.docker).
func holdsCredentialsAt(w word) bool {
	p, known := resolvePath(w.dir, w)
	if known && (p == "/" || p == "/home") {
		return true
	}
	return isHomeDir(p) || credentialDirAt(w)
}

// credentialDirAt reports whether w names a directory on the way to one of
// credentialPaths in a home directory (not the home directory itself), or, relative to a
// start that may be one, is such a directory's name.
func credentialDirAt(w word) bool {
	p, known := resolvePath(w.dir, w)
	if !known || w.dir == unknownStart && !rooted(p) {
		return holdsCredentialFile(p)
	}
	rest, ok := inHome(p)
	if !ok {
		return false // under the project or elsewhere: a project's own .docker is no credential
	}
	segs := pathSegments(rest)
	if len(segs) == 0 {
		return false
	}
	for _, e := range credentialEntries {
		if len(segs) < len(e.segs) && slices.Equal(segs, e.segs[:len(segs)]) {
			return true
		}
	}
	return false
}

// inHome returns the part of p below the home directory it starts with.
func inHome(p string) (string, bool) {
	for _, home := range []string{"~", "$HOME", "${HOME}", "/root"} {
		if p == home {
			return "", true
		}
		if rest, ok := strings.CutPrefix(p, home+"/"); ok {
			return rest, true
		}
	}
	if rest, ok := strings.CutPrefix(p, "/home/"); ok {
		_, below, _ := strings.Cut(rest, "/")
		return below, true
	}
	return "", false
}

// where describes w for a message: with the directory a cd made it relative to.
func (w word) where() string {
	if w.dir == "" || w.dir == unknownStart || rooted(w.text) {
		return w.text
	}
	if w.dir == unknownDir {
		return w.text + " (in a directory smart mode cannot know)"
	}
	return w.text + " (in " + w.dir + ")"
}

// credentialTails are the names of credential files inside the directories that
// credentialPaths lists as a whole, such as ~/.aws/credentials.
var credentialTails = []string{
	"credentials", "config", "credentials.db", "access_tokens.db", "application_default_credentials.json",
	"accessTokens.json", "msal_token_cache.json", "secring.gpg", "private-keys-v1.d", "trustdb.gpg",
}

// maybeCredentialFile reports whether a relative path, from a directory smart mode cannot
// know, may be a credentials file: it is the tail of one of credentialPaths (config.json,
// gh/hosts.yml) or a file name found in a credential directory (credentials).
func maybeCredentialFile(w word) bool {
	if w.dir != unknownDir || rooted(w.text) || w.dynamic {
		return false
	}
	segs := pathSegments(w.text)
	if len(segs) == 0 {
		return false
	}
	if len(segs) == 1 && slices.Contains(credentialTails, segs[0]) {
		return true
	}
	for _, e := range credentialEntries {
		if len(segs) <= len(e.segs) && slices.Equal(segs, e.segs[len(e.segs)-len(segs):]) {
			return true
		}
	}
	return false
}
