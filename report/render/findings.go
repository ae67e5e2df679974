// Package render turns a result into the pieces every reporter shares: the Markdown
// summary (step summary, check run, PR comment, MR note, summary.md), a one-line headline,
// and findings normalised and ranked the same way everywhere.
package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/talkops/talkops/result"
)

// Finding is a result.Finding prepared for publishing: path made repository-relative (or
// cleared when it points outside the repository), lines defaulted, fingerprint filled in
// and made unique, and the rubric item it belongs to resolved.
type Finding struct {
	result.Finding
	// Located is set when Path is a usable repository-relative path.
	Located bool
	// Required is set when the finding comes from a required rubric item.
	Required bool
	// Item is the rubric item the finding belongs to, if any.
	Item *result.Item
	// Occurrence counts findings that share a fingerprint (1 for the first), so files that
	// need unique ids (Code Quality, SARIF) can tell them apart deterministically.
	Occurrence int
	// Index is the finding's position in result.json.
	Index int
}

// UniqueFingerprint is the fingerprint made unique among the result's findings.
func (f Finding) UniqueFingerprint() string {
	if f.Occurrence <= 1 {
		return f.Fingerprint
	}
	sum := sha256.Sum256([]byte(f.Fingerprint + "#" + itoa(f.Occurrence)))
	return hex.EncodeToString(sum[:])
}

// PublicFingerprint is a sha256 hex digest of UniqueFingerprint: a fixed-size id that
// reveals nothing of what the producer put in the fingerprint, for files that publish it.
func (f Finding) PublicFingerprint() string {
	sum := sha256.Sum256([]byte("talkops/v1\x00" + f.UniqueFingerprint()))
	return hex.EncodeToString(sum[:])
}

// EndLineOrStart is EndLine, or StartLine when EndLine is unset or before it.
func (f Finding) EndLineOrStart() int {
	if f.EndLine < f.StartLine {
		return f.StartLine
	}
	return f.EndLine
}

// Location is "path:line" (or "path:start-end", or "path", or "") for display.
func (f Finding) Location() string {
	if !f.Located {
		return ""
	}
	switch {
	case f.StartLine == 0:
		return f.Path
	case f.EndLineOrStart() != f.StartLine:
		return f.Path + ":" + itoa(f.StartLine) + "-" + itoa(f.EndLineOrStart())
	default:
		return f.Path + ":" + itoa(f.StartLine)
	}
}

// SeverityRank orders severities, most severe first.
func SeverityRank(s string) int {
	switch s {
	case result.SeverityError:
		return 0
	case result.SeverityWarning:
		return 1
	case result.SeverityNotice:
		return 2
	}
	return 3
}

// Findings prepares r's findings: the top-level ones in result.json order, then those
// recorded only on rubric items (in item order).
func Findings(r *result.Result) []Finding {
	items := map[string]*result.Item{}
	if r.Rubric != nil {
		for i := range r.Rubric.Items {
			items[r.Rubric.Items[i].ID] = &r.Rubric.Items[i]
		}
	}
	// Findings recorded on a rubric item (a check's parsed output) count too, unless the
	// same finding is also at the top level.
	type owned struct {
		f    result.Finding
		item *result.Item
	}
	all := make([]owned, 0, len(r.Findings))
	key := func(f result.Finding) string {
		return f.Fingerprint + "\x00" + f.Path + "\x00" + strconv.Itoa(f.StartLine) + "\x00" + f.Message
	}
	present := map[string]bool{}
	for _, f := range r.Findings {
		all = append(all, owned{f: f})
		present[key(f)] = true
	}
	if r.Rubric != nil {
		for i := range r.Rubric.Items {
			it := &r.Rubric.Items[i]
			for _, f := range it.Findings {
				if !present[key(f)] {
					present[key(f)] = true
					all = append(all, owned{f: f, item: it})
				}
			}
		}
	}
	seen := map[string]int{}
	out := make([]Finding, 0, len(all))
	for i, o := range all {
		rf := o.f
		f := Finding{Finding: rf, Index: i}
		if p, ok := RelPath(r, rf.Path); ok {
			f.Path, f.Located = p, true
		} else {
			f.Path = ""
			f.StartLine, f.EndLine, f.StartColumn, f.EndColumn = 0, 0, 0, 0
		}
		if f.StartLine < 0 {
			f.StartLine = 0
		}
		if f.Fingerprint == "" {
			f.Fingerprint = Fingerprint(rf)
		}
		if it := o.item; it != nil {
			f.Item, f.Required = it, it.Required
		} else if it := items[itemID(rf.Source)]; it != nil {
			f.Item, f.Required = it, it.Required
		}
		seen[f.Fingerprint]++
		f.Occurrence = seen[f.Fingerprint]
		out = append(out, f)
	}
	return out
}

// itemID extracts the rubric item id from a finding source such as "check:validate".
func itemID(source string) string {
	if _, id, ok := strings.Cut(source, ":"); ok {
		return id
	}
	return source
}

// Rank sorts findings for publishing where space is short: by severity, then findings in
// the diff, then those from required rubric items, then result.json order.
func Rank(fs []Finding) []Finding {
	out := slices.Clone(fs)
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(SeverityRank(a.Severity), SeverityRank(b.Severity)),
			compareBool(a.InDiff, b.InDiff),
			compareBool(a.Required, b.Required),
			cmp.Compare(a.Index, b.Index),
		)
	})
	return out
}

// compareBool orders true before false.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// RelPath makes p relative to the repository: it strips the sandbox working directory
// and the project directory, and refuses paths that stay absolute or climb out of it.
func RelPath(r *result.Result, p string) (string, bool) {
	p = strings.TrimSpace(strings.ReplaceAll(p, "\\", "/"))
	if p == "" {
		return "", false
	}
	p = strings.TrimPrefix(p, "file://")
	var roots []string
	if r.Sandbox != nil && r.Sandbox.WorkDir != "" {
		roots = append(roots, r.Sandbox.WorkDir)
	}
	if r.Run.ProjectDir != "" {
		roots = append(roots, r.Run.ProjectDir)
	}
	if path.IsAbs(p) {
		for _, root := range roots {
			root = path.Clean(strings.ReplaceAll(root, "\\", "/"))
			if rel, ok := strings.CutPrefix(path.Clean(p), root+"/"); ok {
				p = rel
				break
			}
		}
	}
	p = path.Clean(p)
	if path.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

var keyChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// Marker is the hidden first line of a sticky comment or note: one per rubric, so a
// workflow that runs two rubrics keeps two comments. Only a comment that starts with it
// (and is written by the token's identity) is ever updated.
func Marker(r *result.Result) string {
	key := "default"
	if r.Rubric != nil && r.Rubric.Name != "" {
		key = strings.Trim(keyChars().ReplaceAllString(r.Rubric.Name, "-"), "-")
		if len(key) > 64 {
			key = key[:64]
		}
		if key == "" {
			key = "default"
		}
	}
	return "<!-- talkops:result:v1 key=" + key + " -->"
}

var (
	lineRefs = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:line|ln|l\.)\s*\d+(?:\s*[-:,]\s*\d+)*|:\d+(?::\d+)?\b`)
	})
	spaces = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s+`) })
)

// Fingerprint computes a finding's fingerprint when its producer did not: sha256 over the
// source, rule, path and the normalised snippet (or, without one, the title and message
// with line references removed). The line number is left out on purpose, so the
// fingerprint survives code moving up or down.
func Fingerprint(f result.Finding) string {
	text := f.Snippet
	if strings.TrimSpace(text) == "" {
		text = f.Title + "\x00" + lineRefs().ReplaceAllString(f.Message, "")
	}
	text = strings.TrimSpace(spaces().ReplaceAllString(text, " "))
	h := sha256.New()
	for _, part := range []string{"talkops/v1", f.Source, f.Rule, path.Clean("/" + f.Path), text} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func itoa(n int) string { return strconv.Itoa(n) }
