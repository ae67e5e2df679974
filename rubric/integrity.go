package rubric

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/talkops/talkops/result"
)

// DefaultProtected are the globs every rubric protects: CI configuration, which an agent
// could otherwise edit to make a gate pass. The rubric file itself and the rubric's
// protect_paths are added by Rubric.ProtectedGlobs.
var DefaultProtected = []string{".github/workflows/**", ".gitlab-ci.yml", "Jenkinsfile"}

// Integrity compares two Snapshots of the protected globs. Each protected path the agent
// modified, added or removed becomes a failing, required "integrity" item (weight 0: it
// gates, it is not scored) with a finding on the path; when nothing changed there is one
// passing "integrity" item. A nil map means that snapshot could not be taken: the result
// is one error item.
func Integrity(before, after map[string]string, r *Rubric) []result.Item {
	globs := r.ProtectedGlobs()
	if before == nil || after == nil {
		return []result.Item{integrityError(errors.New("a snapshot of the protected paths is missing"))}
	}
	var paths []string
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var items []result.Item
	checked := 0
	for _, p := range paths {
		glob := protectedBy(globs, p)
		if glob == "" {
			continue
		}
		checked++
		b, inBefore := before[p]
		a, inAfter := after[p]
		var change string
		switch {
		case inBefore && !inAfter:
			change = "removed"
		case !inBefore && inAfter:
			change = "added"
		case a != b:
			change = "modified"
		default:
			continue
		}
		msg := fmt.Sprintf("the agent %s %s, which the rubric protects (%s); before: %s, after: %s",
			change, p, glob, digestText(b, inBefore), digestText(a, inAfter))
		items = append(items, result.Item{
			ID: KindIntegrity + ":" + p, Kind: KindIntegrity, Title: "Protected path " + change + ": " + p,
			Required: true, Weight: 0, Status: result.StatusFail, Score: ptr(0.0), Reason: msg,
			Findings: []result.Finding{{
				Path: p, Severity: result.SeverityError, Rule: "protected-path", Title: "Protected path " + change,
				Message: msg, Source: "rubric",
				Fingerprint: Fingerprint(r.Name, KindIntegrity, "protected-path", p, change),
			}},
		})
	}
	if len(items) == 0 {
		items = append(items, result.Item{
			ID: KindIntegrity, Kind: KindIntegrity, Title: "Protected paths unchanged", Required: true, Weight: 0,
			Status: result.StatusPass, Score: ptr(1.0),
			Reason: fmt.Sprintf("%d protected files unchanged (%s)", checked, strings.Join(globs, ", ")),
		})
	}
	return items
}

// digestText shows one side of a protected path's change.
func digestText(d string, ok bool) string {
	switch {
	case !ok:
		return "absent"
	case strings.HasPrefix(d, "symlink:"):
		return "symlink to " + strconv.Quote(strings.TrimPrefix(d, "symlink:"))
	case len(d) == 64:
		return "sha256 " + d
	default:
		return d
	}
}

// IsProtected reports whether a workspace path (slash-separated, relative) is protected.
func (r *Rubric) IsProtected(p string) bool {
	return protectedBy(r.ProtectedGlobs(), p) != ""
}

func protectedBy(globs []string, p string) string {
	for _, g := range globs {
		if matchProtected(g, p) {
			return g
		}
	}
	return ""
}

func integrityError(err error) result.Item {
	return result.Item{
		ID: KindIntegrity, Kind: KindIntegrity, Title: "Protected paths unchanged", Required: true, Weight: 0,
		Status: result.StatusError, Reason: "could not compare protected paths: " + err.Error(),
	}
}
