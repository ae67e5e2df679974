package workspace

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// SkipDirs are the directory names never synced, at any depth, unless an include pattern
// names them or (in a git work tree) they hold tracked files. It is the documented list
// minus "tests", which projects need in the sandbox, and minus ".talkops", whose helper
// scripts rubrics call (its runs/ and tmp/ are skipped instead, see isRunsDir).
var SkipDirs = []string{
	".git", ".agents", ".gemini", ".venv", "__pycache__", ".pytest_cache",
	".mypy_cache", "node_modules", "dist", "build", ".terraform", ".terragrunt-cache",
	"cdk.out", "scratch",
}

// SkipExts are the file extensions (compared case-insensitively) never synced unless an
// include pattern names the file.
var SkipExts = []string{".pyc", ".pyo", ".tmp", ".bak"}

// DefaultMaxFileSize is the size above which a file is not synced when Options.MaxFileSize
// is 0.
const DefaultMaxFileSize = 10 << 20

func isSkippedDir(name string) bool {
	for _, d := range SkipDirs {
		if name == d {
			return true
		}
	}
	return false
}

// isRunsDir reports whether rel is talkops's own output or scratch space in the project:
// .talkops/runs (the default report directory) or .talkops/tmp (the setup scratch).
func isRunsDir(rel string) bool {
	return rel == ".talkops/runs" || rel == ".talkops/tmp"
}

func isSkippedFile(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	for _, e := range SkipExts {
		if ext == e {
			return true
		}
	}
	return false
}

// isSecret reports whether the file at rel (slash-separated, relative to the root) is one
// that is withheld for security reasons: dotenv files, private keys and key stores, and
// credential files of the common cloud and package tools. Names compare case-insensitively.
func isSecret(rel string) bool {
	name := strings.ToLower(path.Base(rel))
	parent := strings.ToLower(path.Base(path.Dir(rel)))

	if name == ".env" {
		return true
	}
	if strings.HasPrefix(name, ".env.") {
		// .env.example, .env.sample, .env.template (and .env.production.example) are
		// documentation, not secrets.
		switch path.Ext(name) {
		case ".example", ".sample", ".template":
			return false
		}
		return true
	}
	for _, p := range []string{"id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"} {
		if strings.HasPrefix(name, p) && !strings.HasSuffix(name, ".pub") {
			return true
		}
	}
	switch path.Ext(name) {
	case ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore":
		return true
	}
	switch name {
	case "credentials.json", "application_default_credentials.json",
		".netrc", ".npmrc", ".pypirc", ".git-credentials":
		return true
	}
	if strings.Contains(name, "service-account") && path.Ext(name) == ".json" {
		return true
	}
	switch parent {
	case ".aws":
		return name == "credentials" || name == "config"
	case ".docker":
		return name == "config.json"
	case ".kube":
		return name == "config"
	case ".git":
		// actions/checkout persists the job token in .git/config; it only matters when an
		// include pattern brings .git along.
		return name == "config"
	}
	return false
}

// patterns is a list of gitignore patterns in increasing priority.
type patterns []gitignore.Pattern

// match returns the decision of the highest-priority pattern that matches segs:
// gitignore.Exclude, gitignore.Include or gitignore.NoMatch.
func (ps patterns) match(segs []string, isDir bool) gitignore.MatchResult {
	for i := len(ps) - 1; i >= 0; i-- {
		if r := ps[i].Match(segs, isDir); r != gitignore.NoMatch {
			return r
		}
	}
	return gitignore.NoMatch
}

// readIgnoreFile parses gitignore lines from r, with domain as the directory (segments
// relative to the root) the patterns are relative to.
func readIgnoreFile(r io.Reader, domain []string) (patterns, error) {
	var ps patterns
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		if p, ok := parseLine(sc.Text()); ok {
			ps = append(ps, gitignore.ParsePattern(p, domain))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ps, nil
}

// parseLine turns one gitignore line into a pattern for gitignore.ParsePattern, or
// reports false for blank lines and comments. It fills one gap in the library: fnmatch's
// "[!...]" negated character class, which Go's path.Match spells "[^...]". (CRLF line
// ends are already dropped by bufio.ScanLines.)
func parseLine(line string) (string, bool) {
	if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
		return "", false
	}
	if strings.Contains(line, "[!") {
		line = strings.ReplaceAll(line, "[!", "[^")
	}
	return line, true
}

// checkPatterns validates user-supplied patterns (Options.Include/Exclude), so that a typo
// is reported instead of silently matching nothing.
func checkPatterns(kind string, list []string) (patterns, error) {
	var ps patterns
	for i, raw := range list {
		p, ok := parseLine(raw)
		if !ok || strings.TrimSpace(strings.TrimPrefix(p, "!")) == "" {
			return nil, fmt.Errorf("sync %s pattern %d %q: empty pattern or comment; want a gitignore-style pattern such as \"dist/\" or \"*.log\"", kind, i+1, raw)
		}
		body := strings.Trim(strings.TrimPrefix(p, "!"), "/ ")
		for _, seg := range strings.Split(body, "/") {
			if seg == "**" {
				continue
			}
			if seg == "" || seg == "." || seg == ".." {
				return nil, fmt.Errorf("sync %s pattern %d %q: path element %q is not allowed; want a pattern relative to the project root", kind, i+1, raw, seg)
			}
			if _, err := path.Match(seg, ""); err != nil {
				return nil, fmt.Errorf("sync %s pattern %d %q: bad glob %q: %w", kind, i+1, raw, seg, err)
			}
		}
		ps = append(ps, gitignore.ParsePattern(p, nil))
	}
	return ps, nil
}

// includePrefix is an include pattern anchored at the root (it has a slash before its last
// element), split into elements, so the walk can tell whether the pattern may match
// something below a directory it would otherwise skip.
type includePrefix []string

func anchoredIncludes(list []string) []includePrefix {
	var out []includePrefix
	for _, raw := range list {
		p, _ := parseLine(raw)
		if strings.HasPrefix(p, "!") {
			continue
		}
		p = strings.TrimRight(p, " ")
		p = strings.TrimSuffix(p, "/")
		if !strings.Contains(p, "/") {
			continue // unanchored: matches names at any depth but never opens a skipped directory
		}
		p = strings.TrimPrefix(p, "/")
		out = append(out, strings.Split(p, "/"))
	}
	return out
}

// mayMatchBelow reports whether the pattern could match a path strictly inside the
// directory dir (segments relative to the root).
func (p includePrefix) mayMatchBelow(dir []string) bool {
	for i, d := range dir {
		if i >= len(p) {
			return false
		}
		if p[i] == "**" {
			return true
		}
		if ok, err := path.Match(p[i], d); err != nil || !ok {
			return false
		}
	}
	return len(p) > len(dir)
}

// Referenced returns the paths that text (a command's output) names as a path: the
// path appears with no name character right before it (a '/' is fine: an import path
// or an absolute path ends in it) and none right after it (a sentence's final '.' is
// fine). A single-element path ("build") counts only as the start of a relative path
// ("build/x", "./build/x"), so neither "go build" nor ".../pkg/build" names it.
func Referenced(text string, paths []string) []string {
	var out []string
	for _, p := range paths {
		if p != "" && mentions(text, p) {
			out = append(out, p)
		}
	}
	return out
}

func mentions(text, p string) bool {
	nameChar := func(c byte) bool {
		return c == '_' || c == '-' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	single := !strings.Contains(p, "/")
	for i := 0; ; {
		j := strings.Index(text[i:], p)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(p)
		var before, after byte
		if start > 0 {
			before = text[start-1]
		}
		if end < len(text) {
			after = text[end]
		}
		// A trailing '.' ends a sentence; a '.' followed by a name character is an
		// extension ("build.go" is not "build").
		afterOK := !nameChar(after) || after == '.' && (end+1 >= len(text) || !nameChar(text[end+1]))
		ok := !nameChar(before) && afterOK
		if single {
			ok = ok && after == '/' && (before != '/' || start >= 2 && text[start-2:start] == "./")
		}
		if ok {
			return true
		}
		i = start + 1
	}
}
