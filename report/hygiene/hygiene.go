// Package hygiene makes untrusted text (agent output, judge reasons, command output) safe to
// publish: secrets redacted, terminal escapes removed, @mentions and our own markers
// neutralised, and Markdown fenced or escaped so it cannot restyle or hijack a page.
package hygiene

import (
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Redacted replaces every secret in published text.
const Redacted = "***"

// minSecretLen is the shortest secret value a Redactor replaces. Shorter values ("1",
// "true") would shred ordinary text and are not secrets anyway.
const minSecretLen = 4

// tokenShapes match well-known credential formats, redacted even when nobody told us the
// value (a token the agent printed from a file, say). They, like the other expressions
// here, are compiled on first use, not at every start of the binary.
var tokenShapes = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(strings.Join([]string{
		`\bgithub_pat_[A-Za-z0-9_]{22,}`,
		`\bgh[pousr]_[A-Za-z0-9]{30,}`,
		`\bsk-ant-[A-Za-z0-9_-]{20,}`,
		`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`,
		`\b(?:AKIA|ASIA)[0-9A-Z]{16}`,
		`\bxox[abposr]-[A-Za-z0-9-]{10,}`,
		`\bglpat-[A-Za-z0-9_-]{20,}`,
		`\bAIza[0-9A-Za-z_-]{35}`,
		`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\z)`,
	}, "|"))
})

// Redactor replaces known secret values and well-known token shapes with ***.
// The zero value redacts token shapes only. A Redactor is safe for concurrent use.
type Redactor struct {
	replacer *strings.Replacer
}

// NewRedactor returns a Redactor for the given secret values. Values shorter than four
// bytes are ignored; a multi-line value is also redacted line by line, since logs and
// tails often cut it, and in its JSON-escaped form, as it appears inside a JSON string
// (a transcript line, a tool call's input).
func NewRedactor(secrets ...string) *Redactor {
	var vals []string
	seen := map[string]bool{}
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) < minSecretLen || seen[v] {
			return
		}
		seen[v] = true
		vals = append(vals, v)
	}
	for _, s := range secrets {
		add(s)
		if b, err := json.Marshal(strings.TrimSpace(s)); err == nil {
			add(string(b[1 : len(b)-1]))
		}
		if strings.ContainsAny(s, "\r\n") {
			for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
				add(l)
			}
		}
	}
	if len(vals) == 0 {
		return &Redactor{}
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(vals, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, Redacted)
	}
	return &Redactor{replacer: strings.NewReplacer(pairs...)}
}

// urlCredentials matches the user:password part of a URL (postgres://app:pw@db/x,
// https://x-access-token:TOKEN@github.com); a bare user (ssh://git@host) is kept.
var urlCredentials = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#@:'"<>]+:[^\s/?#@'"<>]+@`)
})

// Redact returns s with every known secret, token shape and URL credential replaced
// by ***.
func (r *Redactor) Redact(s string) string {
	if r != nil && r.replacer != nil {
		s = r.replacer.Replace(s)
	}
	if strings.Contains(s, "://") {
		s = urlCredentials().ReplaceAllString(s, "${1}"+Redacted+"@")
	}
	if !mayHoldToken(s) {
		return s
	}
	return tokenShapes().ReplaceAllString(s, Redacted)
}

// tokenPrefixes are literal prefixes of tokenShapes; text without any of them cannot
// match, which spares the regular expression on most text.
var tokenPrefixes = []string{"github_pat_", "gh", "sk-", "AKIA", "ASIA", "xox", "glpat-", "AIza", "-----BEGIN"}

func mayHoldToken(s string) bool {
	for _, p := range tokenPrefixes {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

var ansi = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])`)
})

// StripANSI removes terminal escape sequences and other control characters except tab
// and newline, and replaces invalid UTF-8.
func StripANSI(s string) string {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansi().ReplaceAllString(s, "")
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n':
			return r
		case r == '\r':
			return -1
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return -1
		}
		return r
	}, s)
}

// zwj separates @ from a name so GitHub and GitLab do not notify anyone; it is invisible
// when rendered.
const zwj = "\u200d"

// A mention starts a word: "user@example.com" is not one and stays intact.
var mention = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[^A-Za-z0-9_.+\-])@([A-Za-z0-9])`) })

// NeutralizeMentions breaks @user and @org/team mentions (and GitLab's @all) with a
// zero-width joiner after the @.
func NeutralizeMentions(s string) string {
	if strings.IndexByte(s, '@') < 0 {
		return s
	}
	return mention().ReplaceAllString(s, "${1}@"+zwj+"${2}")
}

// MarkerPrefix starts every hidden marker talkops puts in a comment or note.
const MarkerPrefix = "talkops:"

var markers = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)<!--[\s\S]*?(?:-->|\z)`) })

// StripMarkers removes HTML comments (which hide text and carry our sticky-comment
// markers) and breaks any remaining "<!--" so quoted text can neither hide content nor
// make our comment look like another talkops comment.
func StripMarkers(s string) string {
	if !strings.Contains(s, "<!--") && !strings.Contains(s, "-->") {
		return s
	}
	s = markers().ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "<!--", "<"+zwj+"!--")
	return strings.ReplaceAll(s, "-->", "--"+zwj+">")
}

// Text is the pipeline every untrusted string goes through before it is published in any
// format: redaction, control characters, our markers, mentions.
func (r *Redactor) Text(s string) string {
	s = StripANSI(s)
	s = r.Redact(s)
	s = StripMarkers(s)
	return NeutralizeMentions(s)
}

// Fence wraps s in a Markdown code fence longer than any run of backticks inside it, so
// the text renders verbatim and cannot close the fence early. s should already have been
// through Text.
func Fence(s string) string {
	n := max(3, longestRun(s, '`')+1)
	f := strings.Repeat("`", n)
	s = strings.TrimRight(s, "\n")
	return f + "text\n" + s + "\n" + f
}

func longestRun(s string, c byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

// Inline makes s safe inside a Markdown paragraph or table cell: one line, Markdown
// punctuation backslash-escaped, HTML disarmed, at most maxBytes bytes. s should already
// have been through Text.
func Inline(s string, maxBytes int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = Truncate(s, maxBytes)
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\', '`', '*', '_', '{', '}', '[', ']', '(', ')', '#', '+', '!', '|', '~', '>', '<', '&':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Truncate cuts s to at most maxBytes bytes on a rune boundary, ending with "…" when it
// cut. maxBytes <= 0 means no limit.
func Truncate(s string, maxBytes int) string {
	if maxBytes <= 0 || len(s) <= maxBytes {
		return s
	}
	const ell = "…"
	if maxBytes < len(ell) {
		return strings.ToValidUTF8(s[:maxBytes], "")
	}
	cut := maxBytes - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}

// FirstLine returns the first non-empty line of s, trimmed.
func FirstLine(s string) string {
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
