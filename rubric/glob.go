package rubric

import (
	"errors"
	"path"
	"strings"
)

// Globs in a rubric (protect_paths, file:<glob> selectors) are slash-separated paths
// relative to the workspace root. Each segment is a path.Match pattern ('*', '?', '[a-z]',
// '\' escapes); a segment "**" matches any number of segments, including none.

// validGlob reports why a rubric glob is unusable, or nil.
func validGlob(g string) error {
	switch {
	case strings.TrimSpace(g) == "":
		return errors.New("the glob is empty")
	case strings.HasPrefix(g, "/"):
		return errors.New("the glob is absolute; write it relative to the workspace root, as in \"infra/**/*.tf\"")
	case strings.ContainsRune(g, 0):
		return errors.New("the glob contains a NUL byte")
	}
	for _, seg := range strings.Split(g, "/") {
		switch {
		case seg == "":
			return errors.New("the glob has an empty path segment (\"//\" or a trailing '/')")
		case seg == "." || seg == "..":
			return errors.New("the glob must not contain \".\" or \"..\" segments")
		case seg == "**":
			continue
		case strings.Contains(seg, "**"):
			return errors.New("\"**\" must be a whole path segment, as in \"a/**/b\"")
		}
		if _, err := path.Match(seg, ""); err != nil {
			return errors.New("bad pattern syntax in segment " + quote(seg) + " (unclosed '[' or trailing '\\')")
		}
	}
	return nil
}

// MatchGlob reports whether the slash-separated relative path name matches the rubric glob
// pattern. An invalid pattern matches nothing.
func MatchGlob(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

// matchSegs matches segment lists with a dynamic programme (no exponential backtracking on
// patterns with many "**"): ok[j] says whether pat[:i] matches name[:j].
func matchSegs(pat, name []string) bool {
	ok := make([]bool, len(name)+1)
	ok[0] = true
	next := make([]bool, len(name)+1)
	for _, p := range pat {
		clear(next)
		if p == "**" {
			// "**" extends any match by zero or more segments.
			seen := false
			for j := range ok {
				seen = seen || ok[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(name); j++ {
				if !ok[j-1] {
					continue
				}
				m, err := path.Match(p, name[j-1])
				next[j] = err == nil && m
			}
		}
		ok, next = next, ok
	}
	return ok[len(name)]
}

// matchProtected reports whether name is protected by pattern: the pattern matches the
// path itself or one of its parent directories (so "infra/policy" protects everything
// below it, as does "infra/policy/**").
func matchProtected(pattern, name string) bool {
	if MatchGlob(pattern, name) {
		return true
	}
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '/' && MatchGlob(pattern, name[:i]) {
			return true
		}
	}
	return false
}

// globEscape quotes pattern syntax in a literal path so it matches only itself.
func globEscape(p string) string {
	if !strings.ContainsAny(p, `*?[\`) {
		return p
	}
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func quote(s string) string { return "\"" + strings.ReplaceAll(s, "\"", "\\\"") + "\"" }
