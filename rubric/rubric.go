// Package rubric turns a --rubric argument into a scored verdict: it parses free text, @file
// and TOML rubrics, runs deterministic checks inside the sandbox, parses their tool output
// into findings, guards protected paths, and scores the items.
//
// A rubric has two kinds of items: checks (commands whose exit code decides) and criteria
// (questions a judge model answers from evidence the runner gathered). Checks-only rubrics
// never call a model. Everything Parse returns for bad input is a *Error naming the file,
// line and column and what would be valid; the caller maps it to the usage exit code.
package rubric

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/internal/fileread"
	"github.com/talkops/talkops/internal/safename"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// Limits and defaults. They are part of the documented rubric format.
const (
	// MaxTextChars caps a free-text rubric (the TalkOps RUBRIC_CHAR_LIMIT), counted in
	// characters (Unicode code points), not bytes.
	MaxTextChars = 12000
	// MaxFileBytes caps a rubric file of any kind.
	MaxFileBytes = 1 << 20
	// DefaultTimeout bounds a check that sets no timeout.
	DefaultTimeout = 5 * time.Minute
	// MaxTimeout is the longest timeout a check may ask for.
	MaxTimeout = 24 * time.Hour
	// DefaultMaxEvidenceBytes is the judge's evidence budget per call (criteria that select
	// the same evidence are graded in one call and share it).
	DefaultMaxEvidenceBytes = 100_000
	// DefaultMaxIterations is the number of agent passes the revision loop allows (TalkOps' default).
	DefaultMaxIterations = 3
	// SchemaVersion is the only accepted value of a TOML rubric's optional schema key.
	SchemaVersion = "talkops.rubric/v1"
)

// Item kinds, as they appear in result.json.
const (
	KindCheck     = "check"
	KindJudge     = "judge"
	KindIntegrity = "integrity"
)

// Rubric formats.
const (
	FormatText = "text"
	FormatTOML = "toml"
)

// Rubric is a parsed, validated rubric with every default resolved.
type Rubric struct {
	// Name identifies the rubric in results, SARIF rule ids and fingerprints.
	Name        string
	Description string
	// Source is the --rubric argument's kind as result.json records it: the TOML path as
	// given, "@" plus the path for @file, or "inline" for free text.
	Source string
	// Format is FormatText or FormatTOML.
	Format string
	// Path is the absolute path of the rubric file; "" for inline text.
	Path string
	// RelPath is the rubric file's slash-separated path relative to the base directory
	// Parse was given, when the file lies inside it (the agent must not edit it); else "".
	RelPath string
	// PassThreshold is the weighted score the non-gating items must reach (0..1).
	PassThreshold float64
	// ProtectPaths are the rubric's own protected-path globs (see ProtectedGlobs).
	ProtectPaths []string
	Checks       []Check
	Criteria     []Criterion
	Judge        JudgeConfig
	// Text is the canonical resolved rubric: a TOML document with every default filled in.
	// Parsing it again yields the same rubric; SHA256 is computed over it, so comments and
	// formatting in the source do not change the hash.
	Text   string
	SHA256 string
}

// Check is a deterministic command run in the sandbox; its exit code decides.
type Check struct {
	ID    string
	Title string
	// Argv is what runs. A shell string in the rubric becomes /bin/sh -c <Script>.
	Argv []string
	// Script is the shell string when run was given as one; "" for the argv form.
	Script     string
	ExpectExit int
	Timeout    time.Duration
	Required   bool
	Weight     float64
	// Parse names the output format to turn into findings ("" = none); see Formats.
	Parse string
	// ParseFile, when set, is read (relative to the sandbox working directory) instead of
	// stdout for Parse.
	ParseFile string
}

// Cmd returns the sandbox command for the check.
func (c Check) Cmd() providers.Cmd {
	return providers.Cmd{Argv: append([]string(nil), c.Argv...), Timeout: c.Timeout}
}

// Criterion is a yes/no question a judge answers from evidence the runner recorded.
type Criterion struct {
	ID       string
	Title    string
	Question string
	// Evidence selects what the judge sees; empty means the judge's default selection.
	Evidence     []Selector
	Required     bool
	Weight       float64
	PassExamples []string
	FailExamples []string
}

// Evidence selector kinds.
const (
	SelectCommands     = "commands"      // the commands the agent ran and their real output
	SelectDiff         = "diff"          // the workspace diff
	SelectFinalMessage = "final_message" // the agent's final message, shown as unverified claims
	SelectCheck        = "check"         // check:<id>, a check's outcome and output tails
	SelectFile         = "file"          // file:<glob>, file contents from the sandbox
)

// Selector is one parsed evidence selector such as "diff" or "check:validate".
type Selector struct {
	Kind string
	// Arg is the check id or file glob for SelectCheck and SelectFile; "" otherwise.
	Arg string
}

// String returns the selector as written in a rubric.
func (s Selector) String() string {
	if s.Arg == "" {
		return s.Kind
	}
	return s.Kind + ":" + s.Arg
}

// JudgeConfig is the rubric's [judge] table.
type JudgeConfig struct {
	// Model overrides the judge model ("" = the runner's default, the agent's model).
	Model string
	// Votes is the number of independent judge calls per criterion (odd; majority wins).
	Votes            int
	MaxEvidenceBytes int
}

// Error is a problem with the rubric input: a bad flag value, an unreadable file, or an
// invalid rubric. Parse returns one *Error, or several joined with errors.Join (sorted by
// position); errors.As finds the first either way.
type Error struct {
	// File is the rubric file as the user named it, or "--rubric" for inline text.
	File string
	// Line and Col are 1-based; 0 when the problem has no position.
	Line, Col int
	// Msg says what is wrong and what would be valid.
	Msg string
	// Detail is an optional multi-line excerpt of the file pointing at the problem.
	Detail string
	// Err is the underlying error, if any (for example fs.ErrNotExist).
	Err error
}

// Error returns "file:line:col: msg".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// flagName is what errors about inline text name as their "file".
const flagName = "--rubric"

// validID reports whether s follows idRule.
func validID(s string) bool { return safename.Valid(s, 64) }

const idRule = `1-64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit`

// ResolveSpec resolves a relative rubric path against the working directory, so that
// --rubric means the same file wherever the project root is.
func ResolveSpec(spec, workDir string) string {
	resolve := func(p string) string {
		if filepath.IsAbs(p) || strings.HasPrefix(p, "~/") {
			return p
		}
		return filepath.Join(workDir, p)
	}
	switch {
	case strings.HasPrefix(spec, "@"):
		return "@" + resolve(spec[1:])
	case strings.HasSuffix(spec, ".toml") && !strings.ContainsAny(spec, " \t\n"):
		return resolve(spec)
	}
	return spec
}

// Parse resolves a --rubric argument:
//
//   - "@path": the file's content; a path ending in .toml is a TOML rubric, anything else
//     free text;
//   - "path.toml" naming an existing file: a TOML rubric (a single word ending in .toml
//     that names no file is an error, not a one-word criterion);
//   - anything else: free text, one judged criterion per line or bullet.
//
// Relative paths and "~/" are resolved against baseDir and the home directory; baseDir
// should be the project root, because a rubric file inside it becomes a protected path.
// Every error is a *Error (possibly several joined).
func Parse(spec string, baseDir string) (*Rubric, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, &Error{File: flagName, Msg: `the rubric is empty; give criteria as text, "@file" or a path to a .toml rubric`}
	}
	if name, ok := strings.CutPrefix(spec, "@"); ok {
		if strings.TrimSpace(name) == "" {
			return nil, &Error{File: flagName, Msg: `"@" must be followed by a file name, as in --rubric @rubric.md or --rubric @rubric.toml`}
		}
		if isTOMLName(name) {
			return parseFile(name, baseDir, spec, FormatTOML)
		}
		return parseFile(name, baseDir, spec, FormatText)
	}
	if isTOMLName(spec) && !strings.ContainsAny(spec, " \t\r\n") {
		return parseFile(spec, baseDir, spec, FormatTOML)
	}
	r, err := parseText([]byte(spec), flagName)
	if err != nil {
		return nil, err
	}
	r.Source = "inline"
	r.Name = "inline"
	return finish(r)
}

func isTOMLName(name string) bool {
	return strings.EqualFold(filepath.Ext(strings.TrimSpace(name)), ".toml")
}

// parseFile reads and parses one rubric file. display is the name as the user wrote it.
func parseFile(display, baseDir, source, format string) (*Rubric, error) {
	path, err := resolvePath(display, baseDir)
	if err != nil {
		return nil, &Error{File: display, Msg: "cannot resolve the rubric path", Err: err}
	}
	data, err := readFile(path)
	if err != nil {
		e := &Error{File: display, Msg: "cannot read the rubric file", Err: err}
		if errors.Is(err, fs.ErrNotExist) {
			e.Msg = fmt.Sprintf("rubric file not found (looked for %s)", path)
			e.Err = fs.ErrNotExist
		}
		return nil, e
	}
	var r *Rubric
	if format == FormatTOML {
		r, err = parseTOML(data, display)
	} else {
		r, err = parseText(data, display)
	}
	if err != nil {
		return nil, err
	}
	if r.Name == "" {
		r.Name = nameFromFile(path)
	}
	r.Source = source
	r.Path = path
	r.RelPath = relInside(baseDir, path)
	return finish(r)
}

func resolvePath(name, baseDir string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "~" || strings.HasPrefix(name, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("expand ~: %w", err)
		}
		name = filepath.Join(home, strings.TrimPrefix(name, "~"))
	}
	if !filepath.IsAbs(name) {
		if baseDir == "" {
			baseDir = "."
		}
		name = filepath.Join(baseDir, name)
	}
	return filepath.Abs(name)
}

func readFile(path string) ([]byte, error) { return fileread.Read(path, MaxFileBytes) }

// relInside returns path relative to base (slash-separated) when it lies inside base.
func relInside(base, path string) string {
	if base == "" {
		return ""
	}
	absBase, err := filepath.Abs(base)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(absBase, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return ""
	}
	return filepath.ToSlash(rel)
}

var nameUnsafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// nameFromFile derives a rubric name from a file name: the base name without extension,
// with anything outside the id alphabet replaced by '-'.
func nameFromFile(path string) string {
	base := filepath.Base(path)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	name := strings.Trim(nameUnsafe().ReplaceAllString(base, "-"), "-._")
	if len(name) > 64 {
		name = name[:64]
	}
	if name == "" || !validID(name) {
		return "rubric"
	}
	return name
}

// finish renders the canonical text and its hash.
func finish(r *Rubric) (*Rubric, error) {
	r.Text = canonical(r)
	sum := sha256.Sum256([]byte(r.Text))
	r.SHA256 = hex.EncodeToString(sum[:])
	return r, nil
}

// ProtectedGlobs returns every glob the agent must not touch: the CI configuration
// (DefaultProtected), the rubric file itself when it lies in the project, and the rubric's
// protect_paths.
func (r *Rubric) ProtectedGlobs() []string {
	var globs []string
	seen := map[string]bool{}
	add := func(g string) {
		if g != "" && !seen[g] {
			seen[g] = true
			globs = append(globs, g)
		}
	}
	for _, g := range DefaultProtected {
		add(g)
	}
	add(globEscape(r.RelPath))
	for _, g := range r.ProtectPaths {
		add(g)
	}
	return globs
}

// Record builds result.json's rubric section from the iterations of the revision loop.
// The final status is the last iteration's; needs_revision there means no iterations were
// left, so it is recorded as failed. With no iterations the status is error.
func (r *Rubric) Record(iters []result.Iteration) *result.Rubric {
	out := &result.Rubric{
		Name:          r.Name,
		Description:   r.Description,
		Source:        r.Source,
		SHA256:        r.SHA256,
		Text:          r.Text,
		PassThreshold: r.PassThreshold,
		Status:        result.RubricError,
		Iterations:    append([]result.Iteration{}, iters...),
		Items:         []result.Item{},
	}
	if len(iters) > 0 {
		last := iters[len(iters)-1]
		out.Status = last.Status
		if out.Status == result.RubricNeedsRevision {
			out.Status = result.RubricFailed
		}
		out.Items = append(out.Items, last.Items...)
		out.Counts = result.CountItems(last.Items)
	}
	out.JudgeUsage = JudgeUsage(iters)
	return out
}
