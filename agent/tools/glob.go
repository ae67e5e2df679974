package tools

import (
	"fmt"
	"path"
	"strings"
)

// matchGlob reports whether name (a slash-separated relative path) matches pattern, where
// "**" as a whole segment matches zero or more segments and other segments follow
// path.Match. A pattern with "{a,b}" alternatives is expanded first.
func matchGlob(pattern, name string) bool {
	for _, p := range expandBraces(pattern) {
		if matchSegments(strings.Split(p, "/"), strings.Split(name, "/")) {
			return true
		}
	}
	return false
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(name); i++ {
				if matchSegments(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		ok, err := path.Match(pat[0], name[0])
		if err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// expandBraces expands one level of {a,b} alternatives (nested braces are taken literally).
func expandBraces(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	end := strings.IndexByte(p[open:], '}')
	if end < 0 {
		return []string{p}
	}
	end += open
	var out []string
	for _, alt := range strings.Split(p[open+1:end], ",") {
		out = append(out, expandBraces(p[:open]+alt+p[end+1:])...)
	}
	return out
}

// validGlob checks a pattern's syntax so a typo is reported instead of matching nothing.
func validGlob(pattern string) error {
	if strings.HasPrefix(pattern, "/") {
		return fmt.Errorf("pattern %q must be relative (use path to choose the directory)", pattern)
	}
	for _, p := range expandBraces(pattern) {
		for _, seg := range strings.Split(p, "/") {
			if seg == "**" {
				continue
			}
			if _, err := path.Match(seg, ""); err != nil {
				return fmt.Errorf("pattern %q is malformed: %w", pattern, err)
			}
		}
	}
	return nil
}
