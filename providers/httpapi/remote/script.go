package remote

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Quote returns s as one POSIX shell word: single-quoted, each embedded single quote
// written as quote, backslash, quote, quote. Every byte but NUL survives unchanged.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ValidEnvName reports whether name can be exported by a POSIX shell.
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// printfFormat encodes b as a printf format string that prints exactly b, NUL bytes
// included (octal escapes), ready to be single-quoted.
func printfFormat(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/8)
	for _, c := range b {
		switch {
		case c == '%':
			sb.WriteString("%%")
		case c == '\\':
			sb.WriteString(`\\`)
		case c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f):
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, `\%03o`, c)
		}
	}
	return sb.String()
}

// scriptSpec is everything a command script needs.
type scriptSpec struct {
	argv    []string
	env     map[string]string
	dir     string
	timeout time.Duration
	// stdinInline is written to a temp file by the script itself; stdinFile names a file
	// already staged in the sandbox. Both empty: stdin is /dev/null.
	stdinInline []byte
	stdinFile   string
	// splitStderr sends stderr to a file and prints it after stdout behind marker, for
	// APIs that only return combined output.
	splitStderr bool
	// keepLines and keepBytes, when set, also keep the output files when a stream has
	// more lines or bytes than that (for APIs that truncate output).
	keepLines, keepBytes int
	// prefix is the per-command temp path prefix: prefix.pid, prefix.in, prefix.err.
	prefix string
	marker string
}

// killGrace is how long `timeout` waits after SIGTERM before it sends SIGKILL.
const killGrace = 5 * time.Second

// build renders the script.
//
// The command is started through a tiny `sh -c` that writes its own pid to prefix.pid and
// then execs the command, so a later kill script finds it. When `timeout` is installed it
// wraps the command: it enforces Cmd.Timeout inside the sandbox (partial output survives)
// and puts the command's whole process tree into one process group led by that pid.
//
// Output goes to the script's stdout and stderr as it is produced (so streaming APIs show
// it live) and, through tee, into prefix.out and prefix.err. The APIs carry output as JSON
// strings, which turn bytes that are not UTF-8 into U+FFFD; the files are kept only in that
// case, for the client to read byte-exact, and removed otherwise.
func (s scriptSpec) build() string {
	var b strings.Builder
	p := func(ext string) string { return Quote(s.prefix + ext) }
	keys := make([]string, 0, len(s.env))
	for k := range s.env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, Quote(s.env[k]))
	}
	if s.dir != "" {
		fmt.Fprintf(&b, "cd -- %s || exit 1\n", Quote(s.dir))
	}
	in := "/dev/null"
	switch {
	case len(s.stdinInline) > 0:
		const chunk = 16 << 10
		for i := 0; i < len(s.stdinInline); i += chunk {
			part := s.stdinInline[i:min(i+chunk, len(s.stdinInline))]
			redir := ">>"
			if i == 0 {
				redir = ">"
			}
			fmt.Fprintf(&b, "printf %s %s%s || exit 1\n", Quote(printfFormat(part)), redir, p(".in"))
		}
		in = s.prefix + ".in"
	case s.stdinFile != "":
		in = s.stdinFile
	}
	b.WriteString("set --")
	for _, a := range s.argv {
		b.WriteByte(' ')
		b.WriteString(Quote(a))
	}
	b.WriteByte('\n')
	secs := 0
	if s.timeout > 0 {
		secs = int((s.timeout + time.Second - 1) / time.Second)
	}
	fmt.Fprintf(&b, "if command -v timeout >/dev/null 2>&1 && timeout -k 1 5 true >/dev/null 2>&1; then set -- timeout -k %d %d \"$@\"; fi\n", int(killGrace/time.Second), secs)
	fmt.Fprintf(&b, "set -- sh -c 'echo \"$$\" >\"$0\" && exec \"$@\"' %s \"$@\"\n", p(".pid"))
	if s.splitStderr {
		fmt.Fprintf(&b, "{ \"$@\" <%s 2>%s; echo \"$?\" >%s; } | tee %s\n", Quote(in), p(".err"), p(".rc"), p(".out"))
	} else {
		b.WriteString("exec 4>&2\n")
		fmt.Fprintf(&b, "{ { \"$@\" <%s 4>&-; echo \"$?\" >%s; } 2>&1 >&3 3>&- | tee %s >&4; } 3>&1 | tee %s\n", Quote(in), p(".rc"), p(".err"), p(".out"))
	}
	fmt.Fprintf(&b, "__talkops_rc=$(cat %s 2>/dev/null)\n[ -n \"$__talkops_rc\" ] || __talkops_rc=125\n", p(".rc"))
	fmt.Fprintf(&b, "rm -f %s %s %s", p(".pid"), p(".in"), p(".rc"))
	if s.stdinFile != "" {
		b.WriteString(" " + Quote(s.stdinFile))
	}
	b.WriteByte('\n')
	if s.splitStderr {
		fmt.Fprintf(&b, "printf '\\n%%s\\n' %s\ncat %s\n", Quote(s.marker), p(".err"))
	}
	b.WriteString("__talkops_text() {\n" +
		"  if command -v iconv >/dev/null 2>&1; then iconv -f UTF-8 -t UTF-8 <\"$1\" >/dev/null 2>&1\n" +
		"  else [ -z \"$(LC_ALL=C tr -d '\\000-\\177' <\"$1\" | head -c 1)\" ]; fi\n}\n")
	small := ""
	if s.keepLines > 0 {
		small = fmt.Sprintf(" && __talkops_small %s && __talkops_small %s", p(".out"), p(".err"))
		fmt.Fprintf(&b, "__talkops_small() { [ \"$(wc -l <\"$1\")\" -le %d ] && [ \"$(wc -c <\"$1\")\" -le %d ]; }\n", s.keepLines, s.keepBytes)
	}
	fmt.Fprintf(&b, "if __talkops_text %s && __talkops_text %s%s; then rm -f %s %s; fi\n", p(".out"), p(".err"), small, p(".out"), p(".err"))
	b.WriteString("exit \"$__talkops_rc\"\n")
	return b.String()
}

// killScript stops the command a script with this prefix started: its process group first
// (when timeout made one), then the pid alone, TERM then KILL.
func killScript(prefix string) string {
	p := Quote(prefix)
	return "pid=$(cat " + p + ".pid 2>/dev/null) || exit 0\n" +
		"[ -n \"$pid\" ] || exit 0\n" +
		"kill -TERM -- \"-$pid\" 2>/dev/null || kill -TERM \"$pid\" 2>/dev/null\n" +
		"sleep 1\n" +
		"kill -KILL -- \"-$pid\" 2>/dev/null || kill -KILL \"$pid\" 2>/dev/null\n" +
		"rm -f " + Quote(prefix+".pid") + " " + Quote(prefix+".in") + " " + Quote(prefix+".rc") + " " + Quote(prefix+".out") + " " + Quote(prefix+".err") + "\n" +
		"exit 0\n"
}

// splitOutput separates stdout from stderr in the combined output of a splitStderr
// script. Without the marker (the script did not reach its end), all is stdout.
func splitOutput(combined []byte, marker string) (stdout, stderr []byte) {
	sep := "\n" + marker + "\n"
	i := strings.LastIndex(string(combined), sep)
	if i < 0 {
		return combined, nil
	}
	return combined[:i], combined[i+len(sep):]
}

// resolve joins p to dir unless p is absolute, and cleans it.
func resolve(dir, p string) string {
	if p == "" {
		return dir
	}
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dir, p)
}

// untarScript extracts archive into dir and removes the archive.
func untarScript(archive, dir string) string {
	a, d := Quote(archive), Quote(dir)
	return "mkdir -p -- " + d + " || exit 1\n" +
		"tar -xzf " + a + " -C " + d + " --no-same-owner\n" +
		"rc=$?\nrm -f " + a + "\nexit $rc\n"
}
