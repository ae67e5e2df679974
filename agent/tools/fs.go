package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/internal/lines"
	"github.com/talkops/talkops/providers"
)

// Limits of the file tools.
const (
	DefaultReadLines = 500
	MaxReadLines     = 2000
	MaxLineChars     = 2000
	maxReadBytes     = 1 << 20 // a read window never returns more
	maxEditBytes     = 8 << 20 // larger files are edited with execute
	maxListEntries   = 1000
	maxGlobResults   = 1000
	maxGlobScan      = 20000
	maxGrepMatches   = 500
	maxGrepLineChars = 500
)

// Exit codes of the sandbox-side scripts.
const (
	exitNoWorkDir   = 90
	exitUnresolved  = 91
	exitOutside     = 92
	exitIsDir       = 93
	exitMkdir       = 94
	exitWrite       = 95
	exitUnreadable  = 96
	exitNotDir      = 97
	exitNotFound    = 98
	exitNotRegular  = 99
	exitBinary      = 100
	exitBadArgument = 101
)

// prelude defines resolve WORKDIR ABSPATH, which sets R to ABSPATH with every existing
// component resolved through realpath (or readlink -f), and exits 92 when R is outside
// WORKDIR. Missing trailing components are kept as written (they cannot be symlinks).
const prelude = `
rp() { realpath "$1" 2>/dev/null || readlink -f "$1" 2>/dev/null; }
resolve() {
  wd=$(rp "$1") && [ -n "$wd" ] || { echo "cannot resolve the working directory $1" >&2; exit 90; }
  d=$2; rest=
  while [ ! -e "$d" ] && [ ! -L "$d" ]; do
    rest="/${d##*/}$rest"
    d=${d%/*}
    [ -n "$d" ] || d=/
  done
  r=$(rp "$d") && [ -n "$r" ] || { echo "cannot resolve $d (a dangling symlink?)" >&2; exit 91; }
  if [ "$r" = / ]; then R=${rest:-/}; else R=$r$rest; fi
  if [ "$wd" != / ]; then
    case "$R/" in
      "$wd"/*) ;;
      *) echo "$2 resolves to $R, which is outside the working directory $wd" >&2; exit 92 ;;
    esac
  fi
}
resolve "$1" "$2"
`

// searchRoot resolves the path argument of ls, glob and grep, which defaults to the
// working directory.
func (e *Env) searchRoot(p string) (string, error) {
	if p == "" {
		p = "."
	}
	return e.sandboxPath(p)
}

// sandboxPath turns a model-supplied path into a clean absolute path inside the working
// directory, or explains why it cannot be used.
func (e *Env) sandboxPath(p string) (string, error) {
	wd := e.Sandbox.WorkDir()
	if strings.TrimSpace(p) == "" {
		return "", errors.New("path is required")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	full := p
	if !path.IsAbs(p) {
		full = path.Join(wd, p)
	}
	full = path.Clean(full)
	if !within(wd, full) {
		return "", fmt.Errorf("path %q is outside the working directory %s; file tools only work inside it", p, wd)
	}
	return full, nil
}

func within(dir, p string) bool {
	dir = path.Clean(dir)
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// rel shows p relative to the working directory when it is inside it.
func (e *Env) rel(p string) string {
	wd := path.Clean(e.Sandbox.WorkDir())
	switch {
	case p == wd:
		return "."
	case wd != "/" && strings.HasPrefix(p, wd+"/"):
		return p[len(wd)+1:]
	}
	return p
}

// fileExec runs a prelude script with args "$1"=workdir, "$2"=path, "$3".. = extra.
func (e *Env) fileExec(ctx context.Context, script string, p string, stdin []byte, limit int, extra ...string) (providers.ExecResult, error) {
	sh := e.Shell
	if sh == "" {
		sh = "/bin/sh"
	}
	argv := append([]string{sh, "-c", prelude + script, "talkops", e.Sandbox.WorkDir(), p}, extra...)
	cmd := providers.Cmd{Argv: argv, Timeout: e.fileTimeout(), OutputLimit: limit}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	res, err := e.Sandbox.Exec(ctx, cmd)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrInfra, err)
	}
	return res, nil
}

// scriptError turns a failed script into a message for the model.
func (e *Env) scriptError(res providers.ExecResult, p string) Result {
	msg := strings.TrimSpace(string(res.Stderr))
	rp := e.rel(p)
	switch res.ExitCode {
	case exitOutside:
		return errorf("%s; file tools only work inside the working directory", msg)
	case exitNotFound:
		return errorf("%s does not exist", rp)
	case exitIsDir:
		return errorf("%s is a directory (use ls to list it)", rp)
	case exitNotDir:
		return errorf("%s is not a directory", rp)
	case exitUnreadable:
		return errorf("%s is not readable (permission denied)", rp)
	case exitNotRegular:
		return errorf("%s is not a regular file", rp)
	case exitBinary:
		return errorf("%s is a binary file; inspect it with execute (e.g. od, file, strings)", rp)
	}
	if res.TimedOut {
		return errorf("timed out on %s", rp)
	}
	if msg == "" {
		msg = fmt.Sprintf("exit code %d", res.ExitCode)
	}
	return errorf("%s: %s", rp, msg)
}

// --- read_file -------------------------------------------------------------------------

type readTool struct{ env *Env }

func (t *readTool) Kind() Kind { return ReadOnly }

func (t *readTool) Def() model.Tool {
	return model.Tool{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file in the working directory. Returns lines prefixed with their line number and a tab "+
			"(the prefix is not part of the file). Reads %d lines from offset by default, at most %d; lines longer than %d characters are cut.",
			DefaultReadLines, MaxReadLines, MaxLineChars),
		Schema: schema([]string{"path"}, map[string]any{
			"path":   str("File path, relative to the working directory or absolute inside it."),
			"offset": integer("Line number to start at (1-based). Default 1."),
			"limit":  integer(fmt.Sprintf("Number of lines to read. Default %d, at most %d.", DefaultReadLines, MaxReadLines)),
		}),
	}
}

const readScript = `
[ -e "$R" ] || exit 98
[ -d "$R" ] && exit 93
[ -f "$R" ] || exit 99
[ -r "$R" ] || exit 96
n1=$(head -c 8192 "$R" | wc -c)
n2=$(head -c 8192 "$R" | tr -d '\000' | wc -c)
[ "$n1" = "$n2" ] || exit 100
total=$(sed -n '$=' "$R")
echo "${total:-0}"
sed -n "$3,$4p" "$R"
`

func (t *readTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	p, err := t.env.sandboxPath(in.Path)
	if err != nil {
		return invalid(err), nil
	}
	if in.Offset < 0 || in.Limit < 0 {
		return errorf("offset and limit must not be negative"), nil
	}
	offset := max(in.Offset, 1)
	limit := in.Limit
	if limit == 0 {
		limit = DefaultReadLines
	}
	limit = min(limit, MaxReadLines)
	res, err := t.env.fileExec(ctx, readScript, p, nil, 2*maxReadBytes, strconv.Itoa(offset), strconv.Itoa(offset+limit-1))
	if err != nil {
		return Result{}, err
	}
	if res.ExitCode != 0 {
		return t.env.scriptError(res, p), nil
	}
	first, body, _ := bytes.Cut(res.Stdout, []byte("\n"))
	total, _ := strconv.Atoi(strings.TrimSpace(string(first)))
	if total == 0 {
		return Result{Output: fmt.Sprintf("%s is empty.", t.env.rel(p))}, nil
	}
	if offset > total {
		return errorf("%s has %d lines; offset %d is past the end", t.env.rel(p), total, offset), nil
	}
	var b strings.Builder
	fileLines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	last := offset - 1
	budget := min(t.env.maxOutput(), maxReadBytes)
	for i, line := range fileLines {
		if b.Len() > budget && i > 0 {
			break
		}
		last = offset + i
		line = strings.TrimSuffix(line, "\r")
		if utf8.RuneCountInString(line) > MaxLineChars {
			r := []rune(line)
			line = string(r[:MaxLineChars]) + fmt.Sprintf(" … [line cut, %d characters]", len(r))
		}
		fmt.Fprintf(&b, "%6d\t%s\n", last, line)
	}
	if last < total {
		fmt.Fprintf(&b, "[lines %d-%d of %d; call read_file with offset=%d to continue]\n", offset, last, total, last+1)
	}
	return Result{Output: b.String()}, nil
}

// --- write_file ------------------------------------------------------------------------

type writeTool struct{ env *Env }

func (t *writeTool) Kind() Kind { return Mutating }

func (t *writeTool) Def() model.Tool {
	return model.Tool{
		Name:        "write_file",
		Description: "Create or overwrite a file in the working directory with the given content. Parent directories are created. Prefer edit_file to change part of an existing file.",
		Schema: schema([]string{"path", "content"}, map[string]any{
			"path":    str("File path, relative to the working directory or absolute inside it."),
			"content": str("The complete new content of the file."),
		}),
	}
}

const writeScript = `
[ -d "$R" ] && exit 93
parent=${R%/*}
[ -n "$parent" ] || parent=/
mkdir -p "$parent" 2>/dev/null || { echo "cannot create directory $parent" >&2; exit 94; }
existed=new
[ -e "$R" ] && existed=existing
cat > "$R" || exit 95
echo "$existed"
`

func (e *Env) writeFile(ctx context.Context, p string, content []byte) (created bool, res Result, err error) {
	out, err := e.fileExec(ctx, writeScript, p, content, 4096)
	if err != nil {
		return false, Result{}, err
	}
	if out.ExitCode != 0 {
		return false, e.scriptError(out, p), nil
	}
	return strings.TrimSpace(string(out.Stdout)) == "new", Result{}, nil
}

func (t *writeTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	if in.Content == nil {
		return errorf("content is required (use an empty string for an empty file)"), nil
	}
	p, err := t.env.sandboxPath(in.Path)
	if err != nil {
		return invalid(err), nil
	}
	created, res, err := t.env.writeFile(ctx, p, []byte(*in.Content))
	if err != nil || res.IsError {
		return res, err
	}
	verb := "Overwrote"
	if created {
		verb = "Created"
	}
	return Result{Output: fmt.Sprintf("%s %s (%d bytes, %d lines).", verb, t.env.rel(p), len(*in.Content), lines.Count(*in.Content))}, nil
}

// --- edit_file -------------------------------------------------------------------------

type editTool struct{ env *Env }

func (t *editTool) Kind() Kind { return Mutating }

func (t *editTool) Def() model.Tool {
	return model.Tool{
		Name: "edit_file",
		Description: "Replace an exact string in a file. old_string must match the file exactly (including whitespace and indentation, " +
			"without read_file's line-number prefixes) and must be unique unless replace_all is true.",
		Schema: schema([]string{"path", "old_string", "new_string"}, map[string]any{
			"path":        str("File path, relative to the working directory or absolute inside it."),
			"old_string":  str("The exact text to replace."),
			"new_string":  str("The replacement text."),
			"replace_all": boolean("Replace every occurrence instead of requiring a unique one."),
		}),
	}
}

const catScript = `
[ -e "$R" ] || exit 98
[ -d "$R" ] && exit 93
[ -f "$R" ] || exit 99
[ -r "$R" ] || exit 96
cat "$R"
`

func (t *editTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Path       string  `json:"path"`
		OldString  *string `json:"old_string"`
		NewString  *string `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	if in.OldString == nil || in.NewString == nil {
		return errorf("old_string and new_string are required"), nil
	}
	oldS, newS := *in.OldString, *in.NewString
	if oldS == "" {
		return errorf("old_string is empty; to create or replace a whole file use write_file"), nil
	}
	if oldS == newS {
		return errorf("old_string and new_string are identical; nothing to change"), nil
	}
	p, err := t.env.sandboxPath(in.Path)
	if err != nil {
		return invalid(err), nil
	}
	res, err := t.env.fileExec(ctx, catScript, p, nil, maxEditBytes+1)
	if err != nil {
		return Result{}, err
	}
	if res.ExitCode == exitNotFound {
		return errorf("%s does not exist; use write_file to create it", t.env.rel(p)), nil
	}
	if res.ExitCode != 0 {
		return t.env.scriptError(res, p), nil
	}
	if res.Truncated || len(res.Stdout) > maxEditBytes {
		return errorf("%s is larger than %d MiB; edit it with execute (sed, patch)", t.env.rel(p), maxEditBytes>>20), nil
	}
	content := string(res.Stdout)
	if strings.IndexByte(content, 0) >= 0 {
		return errorf("%s is a binary file; edit_file only edits text", t.env.rel(p)), nil
	}
	count := strings.Count(content, oldS)
	switch {
	case count == 0:
		return Result{Output: "Error: " + notFoundHint(t.env.rel(p), content, oldS), IsError: true}, nil
	case count > 1 && !in.ReplaceAll:
		return errorf("old_string occurs %d times in %s (at lines %s); include more surrounding lines to make it unique, or set replace_all to true",
			count, t.env.rel(p), joinInts(matchLines(content, oldS, 10))), nil
	}
	firstLine := lineOf(content, strings.Index(content, oldS))
	var updated string
	if in.ReplaceAll {
		updated = strings.ReplaceAll(content, oldS, newS)
	} else {
		updated = strings.Replace(content, oldS, newS, 1)
	}
	if _, wres, err := t.env.writeFile(ctx, p, []byte(updated)); err != nil || wres.IsError {
		return wres, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Edited %s: replaced %d occurrence(s).", t.env.rel(p), count)
	if count == 1 {
		b.WriteString(" The changed lines now read:\n")
		b.WriteString(snippet(updated, firstLine, lines.Count(newS)))
	}
	return Result{Output: b.String()}, nil
}

// notFoundHint explains why old was not found in content, with the nearest useful clue.
func notFoundHint(name, content, old string) string {
	if lineNumberPrefix(old) {
		return fmt.Sprintf("old_string was not found in %s; it seems to include read_file's line-number prefixes (\"   12\\t\"), which are not part of the file. Remove them.", name)
	}
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if n := norm(old); n != "" {
		contentLines := strings.Split(content, "\n")
		oldLines := max(lines.Count(old), 1)
		for i := range contentLines {
			end := min(i+oldLines, len(contentLines))
			if norm(strings.Join(contentLines[i:end], "\n")) == n {
				return fmt.Sprintf("old_string was not found exactly in %s, but the same text with different whitespace or indentation is at line %d:\n%s\nCopy the text exactly as it appears (read_file shows it, after the tab).",
					name, i+1, snippet(content, i+1, oldLines))
			}
		}
	}
	if first := strings.TrimSpace(strings.SplitN(old, "\n", 2)[0]); first != "" {
		if at := strings.Index(content, first); at >= 0 {
			return fmt.Sprintf("old_string was not found in %s. Its first line occurs at line %d, but the following lines differ; read the file again around there.", name, lineOf(content, at))
		}
	}
	return fmt.Sprintf("old_string was not found in %s (%d lines). Read the file again with read_file; it may differ from what you expect.", name, lines.Count(content))
}

func lineNumberPrefix(s string) bool {
	first, _, _ := strings.Cut(s, "\n")
	num, rest, ok := strings.Cut(first, "\t")
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.Atoi(strings.TrimSpace(num))
	return err == nil && strings.TrimSpace(num) != ""
}

func lineOf(content string, byteIdx int) int {
	return strings.Count(content[:byteIdx], "\n") + 1
}

func matchLines(content, sub string, maxN int) []int {
	var out []int
	from := 0
	for len(out) < maxN {
		i := strings.Index(content[from:], sub)
		if i < 0 {
			break
		}
		out = append(out, lineOf(content, from+i))
		from += i + max(len(sub), 1)
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// snippet returns lines [from, from+n) of content (1-based) with one line of context on
// each side, numbered like read_file, at most 20 lines.
func snippet(content string, from, n int) string {
	lines := strings.Split(content, "\n")
	start := max(from-1, 1)
	end := min(from+max(n, 1), len(lines), start+20)
	var b strings.Builder
	for i := start; i <= end && i <= len(lines); i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i, shorten(lines[i-1], MaxLineChars))
	}
	return b.String()
}

// --- ls --------------------------------------------------------------------------------

type lsTool struct{ env *Env }

func (t *lsTool) Kind() Kind { return ReadOnly }

func (t *lsTool) Def() model.Tool {
	return model.Tool{
		Name:        "ls",
		Description: fmt.Sprintf("List a directory in the working directory (dotfiles included). Directories end in /, symlinks in @. At most %d entries.", maxListEntries),
		Schema: schema(nil, map[string]any{
			"path": str("Directory, relative to the working directory or absolute inside it. Default: the working directory."),
		}),
	}
}

const lsScript = `
[ -e "$R" ] || exit 98
[ -d "$R" ] || exit 97
cd "$R" 2>/dev/null || exit 96
for f in * .[!.]* ..?*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  if [ -L "$f" ]; then t=l; elif [ -d "$f" ]; then t=d; else t=f; fi
  printf '%s %s\n' "$t" "$f"
done
`

func (t *lsTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	p, err := t.env.searchRoot(in.Path)
	if err != nil {
		return invalid(err), nil
	}
	res, err := t.env.fileExec(ctx, lsScript, p, nil, 4<<20)
	if err != nil {
		return Result{}, err
	}
	if res.ExitCode != 0 {
		return t.env.scriptError(res, p), nil
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		typ, name, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch typ {
		case "d":
			name += "/"
		case "l":
			name += "@"
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return Result{Output: fmt.Sprintf("%s is empty.", t.env.rel(p))}, nil
	}
	var b strings.Builder
	writeCapped(&b, names, maxListEntries, "[%d more entries not shown; use glob or execute to narrow down]\n")
	return Result{Output: b.String()}, nil
}

// writeCapped writes items one per line, at most limit of them, then more (a format with
// one %d for the number left out) when some were left out.
func writeCapped(b *strings.Builder, items []string, limit int, more string) {
	for i, item := range items {
		if i == limit {
			fmt.Fprintf(b, more, len(items)-limit)
			return
		}
		b.WriteString(item)
		b.WriteByte('\n')
	}
}

// --- glob ------------------------------------------------------------------------------

type globTool struct{ env *Env }

func (t *globTool) Kind() Kind { return ReadOnly }

func (t *globTool) Def() model.Tool {
	return model.Tool{
		Name: "glob",
		Description: fmt.Sprintf("Find files by name pattern under a directory. * and ? match within one path segment, ** matches any number of directories: "+
			"\"**/*.tf\" finds Terraform files at any depth, \"*.tf\" only at the top. .git is skipped. At most %d paths, sorted.", maxGlobResults),
		Schema: schema([]string{"pattern"}, map[string]any{
			"pattern": str("Glob pattern, relative to path."),
			"path":    str("Directory to search. Default: the working directory."),
		}),
	}
}

const globScript = `
[ -e "$R" ] || exit 98
[ -d "$R" ] || exit 97
cd "$R" || exit 96
find . -name .git -prune -o \( -type f -o -type l \) -print 2>/dev/null | head -n "$3"
`

func (t *globTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	if in.Pattern == "" {
		return errorf("pattern is required"), nil
	}
	if err := validGlob(in.Pattern); err != nil {
		return invalid(err), nil
	}
	p, err := t.env.searchRoot(in.Path)
	if err != nil {
		return invalid(err), nil
	}
	res, err := t.env.fileExec(ctx, globScript, p, nil, 16<<20, strconv.Itoa(maxGlobScan+1))
	if err != nil {
		return Result{}, err
	}
	if res.ExitCode != 0 {
		return t.env.scriptError(res, p), nil
	}
	all := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	scanCapped := len(all) > maxGlobScan
	var matches []string
	pattern := strings.TrimPrefix(in.Pattern, "./")
	for _, f := range all {
		if f == "" {
			continue
		}
		relToRoot := strings.TrimPrefix(f, "./")
		if matchGlob(pattern, relToRoot) {
			matches = append(matches, path.Join(t.env.rel(p), relToRoot))
		}
	}
	slices.Sort(matches)
	var b strings.Builder
	if len(matches) == 0 {
		fmt.Fprintf(&b, "No files match %q under %s.", in.Pattern, t.env.rel(p))
		if !strings.Contains(pattern, "/") {
			fmt.Fprintf(&b, " The pattern only matches at the top level; use \"**/%s\" to search subdirectories.", pattern)
		}
		b.WriteByte('\n')
	}
	writeCapped(&b, matches, maxGlobResults, "[%d more matches not shown; narrow the pattern or the path]\n")
	if scanCapped {
		fmt.Fprintf(&b, "[search stopped after %d files; narrow the path]\n", maxGlobScan)
	}
	return Result{Output: b.String()}, nil
}

// --- grep ------------------------------------------------------------------------------

// matchPrefix ends the file name of a grep -nH line: FILE:LINE:TEXT. Compiled on the
// first grep with Withheld set, not at every start of the binary.
var matchPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`:[0-9]+:`) })

type grepTool struct{ env *Env }

func (t *grepTool) Kind() Kind { return ReadOnly }

func (t *grepTool) Def() model.Tool {
	return model.Tool{
		Name: "grep",
		Description: fmt.Sprintf("Search file contents under a path with an extended regular expression (or a fixed string). "+
			"Returns path:line:text, at most %d matches. .git is skipped.", maxGrepMatches),
		Schema: schema([]string{"pattern"}, map[string]any{
			"pattern":      str("Extended regular expression (grep -E), or a literal string with fixed_string."),
			"path":         str("File or directory to search. Default: the working directory."),
			"include":      str("Only search files whose name matches this glob, e.g. \"*.tf\"."),
			"ignore_case":  boolean("Case-insensitive search."),
			"fixed_string": boolean("Treat pattern as a literal string."),
			"files_only":   boolean("List matching files instead of matching lines."),
		}),
	}
}

const grepScript = `
[ -e "$R" ] || exit 98
if [ -d "$R" ]; then
  cd "$R" || exit 96; base=.; echo D
else
  cd "${R%/*}/" || exit 96; base="./${R##*/}"; echo F
fi
flags=-nH
[ "$4" = 1 ] && flags="$flags -i"
if [ "$5" = 1 ]; then flags="$flags -F"; else flags="$flags -E"; fi
[ "$6" = 1 ] && flags="$flags -l"
find "$base" -name .git -prune -o -type f -name "$7" -exec grep $flags -e "$3" {} + | head -n "$8"
`

func (t *grepTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Pattern     string `json:"pattern"`
		Path        string `json:"path"`
		Include     string `json:"include"`
		IgnoreCase  bool   `json:"ignore_case"`
		FixedString bool   `json:"fixed_string"`
		FilesOnly   bool   `json:"files_only"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	if in.Pattern == "" {
		return errorf("pattern is required"), nil
	}
	include := in.Include
	if include == "" {
		include = "*"
	}
	if strings.Contains(include, "/") {
		return errorf("include matches file names only (no /); got %q", in.Include), nil
	}
	p, err := t.env.searchRoot(in.Path)
	if err != nil {
		return invalid(err), nil
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	res, err := t.env.fileExec(ctx, grepScript, p, nil, 8<<20,
		in.Pattern, flag(in.IgnoreCase), flag(in.FixedString), flag(in.FilesOnly), include, strconv.Itoa(maxGrepMatches+1))
	if err != nil {
		return Result{}, err
	}
	if res.ExitCode >= exitNoWorkDir && res.ExitCode <= exitBadArgument {
		return t.env.scriptError(res, p), nil
	}
	kind, out, _ := strings.Cut(strings.TrimRight(string(res.Stdout), "\n"), "\n")
	root := t.env.rel(p)
	if kind == "F" {
		root = path.Dir(root)
	}
	errText := strings.TrimSpace(string(res.Stderr))
	if out == "" {
		if errText != "" && !strings.Contains(errText, "Permission denied") {
			return errorf("grep failed: %s", shorten(errText, 1000)), nil
		}
		return Result{Output: fmt.Sprintf("No matches for %q under %s.", in.Pattern, t.env.rel(p))}, nil
	}
	lines := strings.Split(out, "\n")
	var b strings.Builder
	for i, line := range lines {
		if i == maxGrepMatches {
			fmt.Fprintf(&b, "[more than %d matches; search stopped early. Narrow the pattern, the path or include]\n", maxGrepMatches)
			break
		}
		if strings.HasPrefix(line, "Binary file ") {
			continue
		}
		if t.withheld(line, root, in.FilesOnly) {
			continue
		}
		if strings.HasPrefix(line, "./") {
			file, rest, _ := strings.Cut(line, ":")
			line = path.Join(root, file)
			if rest != "" {
				line += ":" + rest
			}
		}
		if utf8.RuneCountInString(line) > maxGrepLineChars {
			line = string([]rune(line)[:maxGrepLineChars]) + " …"
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return Result{Output: fmt.Sprintf("No matches for %q under %s.", in.Pattern, t.env.rel(p))}, nil
	}
	return Result{Output: b.String()}, nil
}

// withheld reports whether a line of grep's output comes from a file the model must not
// see. A file name may itself hold ":12:", so every place the name could end is tried,
// and a line is left out when any of them names a withheld file.
func (t *grepTool) withheld(line, root string, filesOnly bool) bool {
	if t.env.Withheld == nil {
		return false
	}
	if filesOnly {
		return t.env.Withheld(path.Join(root, line))
	}
	for _, m := range matchPrefix().FindAllStringIndex(line, -1) {
		if t.env.Withheld(path.Join(root, line[:m[0]])) {
			return true
		}
	}
	return false
}
