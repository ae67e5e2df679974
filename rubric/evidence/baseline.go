package evidence

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
)

// Limits and defaults of the workspace baseline and its diff.
const (
	// DefaultBaselineMaxBytes caps the workspace a baseline copies (excluded directories
	// do not count).
	DefaultBaselineMaxBytes = 512 << 20
	// DefaultBaselineTimeout bounds taking a baseline and computing one diff.
	DefaultBaselineTimeout = 5 * time.Minute
	// MaxDiffFiles is how many changed files a diff shows the text of; further changed
	// files are listed without it.
	MaxDiffFiles = 300
	// MaxFileDiffBytes caps the diff text kept per file (head and tail).
	MaxFileDiffBytes = 256 << 10
	// MaxDiffBytes caps the diff text of all files together.
	MaxDiffBytes = 8 << 20
	// manifestLimit caps the output of a manifest (one line of about 80 bytes per file).
	manifestLimit = 64 << 20
)

// DefaultExclude is what a baseline leaves out: version-control data, dependency and
// tool caches that are large and generated, and talkops' own report directory. An entry
// without '/' is a directory or file name at any depth; an entry with '/' is a path from
// the workspace root.
var DefaultExclude = []string{".git", "node_modules", ".terraform", ".terragrunt-cache", "__pycache__", ".venv", ".talkops/runs"}

// ErrTooLarge is wrapped by TakeBaseline when the workspace exceeds the size limit.
var ErrTooLarge = errors.New("the workspace is too large for a baseline")

// BaselineOptions configure TakeBaseline.
type BaselineOptions struct {
	// MaxBytes caps the workspace size (0: DefaultBaselineMaxBytes).
	MaxBytes int64
	// Exclude replaces DefaultExclude (nil: the default). ".git" is always excluded.
	// Entries are find(1) -name patterns, or -path patterns relative to the workspace
	// root when they contain '/'.
	Exclude []string
	// Dir is the sandbox directory the copy is made under (""; $TMPDIR, else /tmp). It
	// must lie outside the workspace.
	Dir string
	// Shell is the POSIX shell that runs the scripts ("": /bin/sh).
	Shell string
	// Timeout bounds the copy and each diff (0: DefaultBaselineTimeout).
	Timeout time.Duration
}

// Baseline is a copy of the sandbox workspace taken after the setup script, so that the
// judge can be shown what the agent changed. It lives in the sandbox (a directory outside
// the workspace); its manifest (path → sha256) is kept here. Take one with TakeBaseline,
// call Diff after each agent pass, and Remove when the run ends (sandbox teardown removes
// it too, except on the local provider, where the copy is on the host's temp directory).
type Baseline struct {
	dir     string
	shell   string
	prune   []string
	timeout time.Duration
	files   map[string]entry
	kib     int64
}

type entry struct {
	// sum is the file's sha256, or the target of a symlink.
	sum  string
	link bool
}

// Dir is the sandbox directory holding the copy.
func (b *Baseline) Dir() string { return b.dir }

// Files is the number of files and symlinks in the baseline.
func (b *Baseline) Files() int { return len(b.files) }

// SizeKiB is the workspace size the baseline copied, in KiB as du(1) counts it.
func (b *Baseline) SizeKiB() int64 { return b.kib }

// baselineScript measures the workspace without the excluded trees, refuses one larger
// than $1 KiB, copies it with tar (entries listed by find, --no-recursion, so excluded
// trees stay out) into a new directory under $2, then prints that directory and the
// copy's manifest. Only commands busybox also has: du, find -exec {} +, awk, cut, mktemp,
// tar, sha256sum, readlink. Every path arrives as an argument, never inside the script.
const baselineScript = `max=$1; parent=${2:-${TMPDIR:-/tmp}}; shift 2
total=$(du -sk . 2>/dev/null | cut -f1)
skip=$(find . \( "$@" \) -prune -exec du -sk {} + 2>/dev/null | awk '{s+=$1} END {print s+0}')
used=$(( ${total:-0} - ${skip:-0} ))
if [ "$used" -gt "$max" ]; then echo "SIZE $used"; exit 3; fi
dir=$(mktemp -d "$parent/talkops-baseline.XXXXXX") || exit 4
case "$dir/" in "$(pwd -P)"/*|"$PWD"/*) rm -rf "$dir"; echo "the baseline directory $dir is inside the workspace" >&2; exit 7;; esac
find . \( "$@" \) -prune -o -exec sh -c 'd=$1; shift; tar -cf - --no-recursion "$@" | tar -xof - -C "$d"' talkops-copy "$dir" {} + || { rm -rf "$dir"; exit 5; }
echo "DIR $dir"
echo "SIZE $used"
cd "$dir" || exit 6
find . -type f -exec sha256sum {} +
find . -type l -exec sh -c 'for l; do printf "L %s\t%s\n" "$l" "$(readlink "$l")"; done' talkops-links {} +
exit 0`

// manifestScript prints the manifest of the workspace, without the excluded trees.
const manifestScript = `find . \( "$@" \) -prune -o -type f -exec sha256sum {} +
find . \( "$@" \) -prune -o -type l -exec sh -c 'for l; do printf "L %s\t%s\n" "$l" "$(readlink "$l")"; done' talkops-links {} +
exit 0`

// diffScript prints, for each path argument, a header "rc size head tail path" and then
// head bytes from the start and tail bytes from the end of `diff -uN` between the
// baseline copy ($1) and the workspace, cutting each file's diff to $2 bytes. The host
// reads by length, so nothing in a diff can forge a header.
const diffScript = `base=$1; cap=$2; shift 2
tmp=$(mktemp) || exit 4
trap 'rm -f "$tmp"' EXIT
for p; do
  diff -uN -L "a/${p#./}" -L "b/${p#./}" "$base/$p" "$p" > "$tmp" 2>&1
  rc=$?
  n=$(wc -c < "$tmp"); n=$((n + 0))
  if [ "$n" -le "$cap" ]; then h=$n; t=0; else h=$((cap / 2)); t=$((cap - h)); fi
  printf '%s %s %s %s %s\n' "$rc" "$n" "$h" "$t" "$p"
  if [ "$h" -gt 0 ]; then head -c "$h" "$tmp"; fi
  if [ "$t" -gt 0 ]; then tail -c "$t" "$tmp"; fi
done
exit 0`

// TakeBaseline copies the sandbox workspace (sb.WorkDir, without the excluded trees) to a
// new directory outside it and records its manifest. A workspace over the size limit is
// an error wrapping ErrTooLarge that says how large it is and how to exclude more.
func TakeBaseline(ctx context.Context, sb providers.Sandbox, opts BaselineOptions) (*Baseline, error) {
	if sb == nil {
		return nil, errors.New("baseline: no sandbox")
	}
	excl := opts.Exclude
	if excl == nil {
		excl = DefaultExclude
	}
	prune, err := pruneArgs(excl)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	max := opts.MaxBytes
	if max <= 0 {
		max = DefaultBaselineMaxBytes
	}
	b := &Baseline{shell: opts.Shell, prune: prune, timeout: opts.Timeout}
	if b.shell == "" {
		b.shell = "/bin/sh"
	}
	if b.timeout <= 0 {
		b.timeout = DefaultBaselineTimeout
	}
	if opts.Dir != "" && !strings.HasPrefix(opts.Dir, "/") {
		return nil, fmt.Errorf("baseline: directory %q must be absolute", opts.Dir)
	}
	argv := append([]string{b.shell, "-c", baselineScript, "talkops-baseline", strconv.FormatInt(max/1024, 10), opts.Dir}, prune...)
	res, err := sb.Exec(ctx, providers.Cmd{Argv: argv, Timeout: b.timeout, OutputLimit: manifestLimit})
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	out := res.Stdout
	switch {
	case res.TimedOut:
		return nil, fmt.Errorf("baseline: copying the workspace timed out after %s", b.timeout)
	case res.ExitCode == 3:
		kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(string(out), "SIZE ")), 10, 64)
		return nil, fmt.Errorf("baseline: %w: %d MiB without %s, the limit is %d MiB; exclude large generated directories or raise the limit",
			ErrTooLarge, kib/1024, strings.Join(excl, ", "), max>>20)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("baseline: exit code %d: %s", res.ExitCode, firstLine(res.Stderr))
	case res.Truncated:
		return nil, fmt.Errorf("baseline: the workspace has too many files to list (the manifest exceeds %d MiB)", manifestLimit>>20)
	}
	line, rest, _ := bytes.Cut(out, []byte("\n"))
	dir, ok := strings.CutPrefix(string(line), "DIR ")
	if !ok || !strings.HasPrefix(dir, "/") {
		return nil, fmt.Errorf("baseline: unexpected output %q", firstLine(out))
	}
	b.dir = dir
	line, rest, _ = bytes.Cut(rest, []byte("\n"))
	if s, ok := strings.CutPrefix(string(line), "SIZE "); ok {
		b.kib, _ = strconv.ParseInt(s, 10, 64)
	}
	b.files = parseManifest(rest)
	return b, nil
}

// Remove deletes the baseline copy. It is safe to call more than once.
func (b *Baseline) Remove(ctx context.Context, sb providers.Sandbox) error {
	if b == nil || b.dir == "" {
		return nil
	}
	if !strings.Contains(b.dir, "/talkops-baseline.") {
		return fmt.Errorf("baseline: refusing to remove %q", b.dir)
	}
	res, err := sb.Exec(ctx, providers.Cmd{Argv: []string{"rm", "-rf", b.dir}, Timeout: b.timeout})
	if err != nil {
		return fmt.Errorf("remove baseline: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("remove baseline %s: exit code %d: %s", b.dir, res.ExitCode, firstLine(res.Stderr))
	}
	b.dir = ""
	return nil
}

// Change kinds of a FileDiff.
const (
	Added    = "added"
	Modified = "modified"
	Removed  = "removed"
)

// FileDiff is one changed file.
type FileDiff struct {
	// Path is slash-separated, relative to the workspace.
	Path   string
	Change string
	// Text is the unified diff (labels a/PATH and b/PATH), cut to its head and tail when
	// longer than the per-file cap; for a symlink or binary file, one line saying so.
	Text string
	// Bytes is the size of the whole diff text before it was cut.
	Bytes     int
	Truncated bool
	Binary    bool
	Symlink   bool
	// Unshown is set for files listed without text: beyond MaxDiffFiles, or under a
	// dependency or cache directory.
	Unshown bool
	// Detail, when set, describes the change on the summary line (sizes, hashes, modes).
	Detail string
}

// Differ computes the workspace diff the judge is shown. *Baseline is one (the copy in
// the sandbox); the runner's host-side change set is the other.
type Differ interface {
	Diff(ctx context.Context, sb providers.Sandbox) (*Diff, error)
}

// Diff is the workspace compared with its baseline.
type Diff struct {
	Files []FileDiff
}

// Summary lists the changed files, one per line: "M path", "A path", "D path".
func (d *Diff) Summary() string {
	if d == nil || len(d.Files) == 0 {
		return "no file changed\n"
	}
	var b strings.Builder
	var n [3]int
	for _, f := range d.Files {
		switch f.Change {
		case Added:
			n[0]++
		case Modified:
			n[1]++
		case Removed:
			n[2]++
		}
	}
	files := "files"
	if len(d.Files) == 1 {
		files = "file"
	}
	fmt.Fprintf(&b, "%d %s changed: %d added, %d modified, %d removed\n", len(d.Files), files, n[0], n[1], n[2])
	for _, f := range d.Files {
		mark := map[string]string{Added: "A", Modified: "M", Removed: "D"}[f.Change]
		if f.Detail != "" {
			fmt.Fprintf(&b, "%s %s\n", mark, f.Detail)
			continue
		}
		fmt.Fprintf(&b, "%s %s", mark, f.Path)
		switch {
		case f.Symlink:
			b.WriteString(" (symlink)")
		case f.Binary:
			b.WriteString(" (binary)")
		case f.Unshown:
			b.WriteString(" (diff not shown: too many changed files)")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// String is the whole diff as text.
func (d *Diff) String() string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	for _, f := range d.Files {
		if f.Text == "" {
			continue
		}
		b.WriteString(f.Text)
		if !strings.HasSuffix(f.Text, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Diff compares the workspace with the baseline: files are compared by sha256 (symlinks
// by target), and each changed file's text comes from `diff -uN` run in the sandbox
// against the copy. It can be called after every agent pass; each diff is against the
// state after setup.
func (b *Baseline) Diff(ctx context.Context, sb providers.Sandbox) (*Diff, error) {
	if b == nil || b.dir == "" {
		return nil, errors.New("diff: no baseline (it was not taken or was removed)")
	}
	argv := append([]string{b.shell, "-c", manifestScript, "talkops-manifest"}, b.prune...)
	res, err := sb.Exec(ctx, providers.Cmd{Argv: argv, Timeout: b.timeout, OutputLimit: manifestLimit})
	switch {
	case err != nil:
		return nil, fmt.Errorf("diff: list the workspace: %w", err)
	case res.TimedOut:
		return nil, fmt.Errorf("diff: listing the workspace timed out after %s", b.timeout)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("diff: list the workspace: exit code %d: %s", res.ExitCode, firstLine(res.Stderr))
	case res.Truncated:
		return nil, fmt.Errorf("diff: the workspace has too many files to list (the manifest exceeds %d MiB)", manifestLimit>>20)
	}
	now := parseManifest(res.Stdout)

	var paths []string
	for p := range b.files {
		paths = append(paths, p)
	}
	for p := range now {
		if _, ok := b.files[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	d := &Diff{}
	var textual []int // indexes into d.Files whose text comes from diff(1)
	for _, p := range paths {
		was, inBase := b.files[p]
		is, inNow := now[p]
		f := FileDiff{Path: p}
		switch {
		case inBase && !inNow:
			f.Change = Removed
		case !inBase && inNow:
			f.Change = Added
		case was != is:
			f.Change = Modified
		default:
			continue
		}
		if was.link || is.link {
			f.Symlink = true
			f.Text = symlinkText(p, was, inBase, is, inNow)
			f.Bytes = len(f.Text)
		} else {
			textual = append(textual, len(d.Files))
		}
		d.Files = append(d.Files, f)
	}
	if len(textual) > MaxDiffFiles {
		for _, i := range textual[MaxDiffFiles:] {
			d.Files[i].Unshown = true
		}
		textual = textual[:MaxDiffFiles]
	}
	if len(textual) == 0 {
		return d, nil
	}
	perFile := max(4096, min(MaxFileDiffBytes, MaxDiffBytes/len(textual)))
	argv = []string{b.shell, "-c", diffScript, "talkops-diff", b.dir, strconv.Itoa(perFile)}
	for _, i := range textual {
		argv = append(argv, "./"+d.Files[i].Path)
	}
	res, err = sb.Exec(ctx, providers.Cmd{Argv: argv, Timeout: b.timeout, OutputLimit: len(textual)*(perFile+4096) + (1 << 20)})
	switch {
	case err != nil:
		return nil, fmt.Errorf("diff: %w", err)
	case res.TimedOut:
		return nil, fmt.Errorf("diff: timed out after %s", b.timeout)
	case res.ExitCode != 0:
		return nil, fmt.Errorf("diff: exit code %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	if err := fillDiffs(d, textual, res.Stdout); err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return d, nil
}

// fillDiffs reads diffScript's output into the files at idx, in order.
func fillDiffs(d *Diff, idx []int, out []byte) error {
	r := bufio.NewReader(bytes.NewReader(out))
	for _, i := range idx {
		f := &d.Files[i]
		header, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("output ended before the diff of %s", f.Path)
		}
		fields := strings.SplitN(strings.TrimSuffix(header, "\n"), " ", 5)
		if len(fields) != 5 || strings.TrimPrefix(fields[4], "./") != f.Path {
			return fmt.Errorf("unexpected diff header %q for %s", cleanLine(header), f.Path)
		}
		var nums [4]int
		for k := range 4 {
			if nums[k], err = strconv.Atoi(fields[k]); err != nil || nums[k] < 0 {
				return fmt.Errorf("unexpected diff header %q for %s", cleanLine(header), f.Path)
			}
		}
		rc, size, headN, tailN := nums[0], nums[1], nums[2], nums[3]
		buf := make([]byte, headN+tailN)
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("output ended inside the diff of %s", f.Path)
		}
		text := string(buf)
		f.Bytes = size
		if tailN > 0 {
			f.Truncated = true
			head, tail := string(buf[:headN]), string(buf[headN:])
			text = head + fmt.Sprintf("\n[... %d bytes of this file's diff cut by the runner ...]\n", size-headN-tailN) + tail
		}
		text = strings.ToValidUTF8(text, "\uFFFD")
		switch {
		case rc > 1:
			f.Text = fmt.Sprintf("(diff of %s failed: %s)\n", f.Path, cleanLine(text))
		case rc == 1 && !strings.HasPrefix(text, "--- "):
			// diff(1) says only "Binary files ... differ" (GNU) or "Files ... differ" (busybox).
			f.Binary = true
			f.Text = fmt.Sprintf("Binary file %s %s (content not shown)\n", f.Path, f.Change)
		default:
			f.Text = text
		}
	}
	return nil
}

func symlinkText(p string, was entry, inBase bool, is entry, inNow bool) string {
	desc := func(e entry, ok bool) string {
		switch {
		case !ok:
			return "(absent)"
		case e.link:
			return "symlink to " + strconv.Quote(e.sum)
		default:
			return "regular file"
		}
	}
	return fmt.Sprintf("%s: %s -> %s\n", p, desc(was, inBase), desc(is, inNow))
}

// parseManifest reads sha256sum lines ("HASH  ./path", GNU escaping a name with a
// backslash prefix) and symlink lines ("L ./path<TAB>target").
func parseManifest(out []byte) map[string]entry {
	m := map[string]entry{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "L "); ok {
			p, target, ok := strings.Cut(rest, "\t")
			if p = relPath(p); ok && p != "" {
				m[p] = entry{sum: target, link: true}
			}
			continue
		}
		escaped := strings.HasPrefix(line, `\`)
		if escaped {
			line = line[1:]
		}
		if len(line) < 67 || line[64] != ' ' || (line[65] != ' ' && line[65] != '*') || !isHex(line[:64]) {
			continue
		}
		p := line[66:]
		if escaped {
			p = strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\r`, "\r").Replace(p)
		}
		if p = relPath(p); p != "" {
			m[p] = entry{sum: line[:64]}
		}
	}
	return m
}

func relPath(p string) string {
	p = strings.TrimPrefix(p, "./")
	if p == "." || strings.ContainsAny(p, "\n\r") {
		return ""
	}
	return p
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// pruneArgs turns exclude entries into a find(1) expression: -name X -o -path ./a/b ...
// ".git" is always first.
func pruneArgs(excl []string) ([]string, error) {
	all := append([]string{".git"}, excl...)
	seen := map[string]bool{}
	var args []string
	for _, e := range all {
		e = strings.TrimSuffix(strings.TrimPrefix(e, "./"), "/")
		switch {
		case e == "" || e == "." || e == "..":
			return nil, fmt.Errorf("exclude entry %q: want a name such as node_modules or a path such as build/out", e)
		case strings.HasPrefix(e, "/") || strings.ContainsAny(e, "\x00\n"):
			return nil, fmt.Errorf("exclude entry %q: want a relative path without NUL or newline", e)
		case slices.Contains(strings.Split(e, "/"), ".."):
			return nil, fmt.Errorf("exclude entry %q must not contain \"..\"", e)
		}
		if seen[e] {
			continue
		}
		seen[e] = true
		if len(args) > 0 {
			args = append(args, "-o")
		}
		if strings.Contains(e, "/") {
			args = append(args, "-path", "./"+e)
		} else {
			args = append(args, "-name", e)
		}
	}
	return args, nil
}

func firstLine(b []byte) string {
	return cleanLine(string(b))
}

func cleanLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 300 {
		s = cutHead(s, 300) + "…"
	}
	return s
}
