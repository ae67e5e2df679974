package rubric

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Free-text rubrics follow the TalkOps contract: each bullet or line is one criterion, and a
// single sentence is one criterion. On top of that:
//
//   - bullets are "-", "*", "+", "•", "1.", "1)", "(1)" and "a)"; Markdown task boxes
//     ("- [ ]", "- [x]") are dropped;
//   - an indented line right after a criterion continues it (a wrapped bullet);
//   - a Markdown heading ("## Security") or a line ending in ':' that introduces a list is a
//     section label, not a criterion: it prefixes the questions of the criteria under it;
//   - blank lines only separate.

var (
	bulletRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:[-*+•‣◦]|\d{1,3}[.)]|\(\d{1,3}\)|[A-Za-z]\))[ \t]+`)
	})
	taskBoxRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[[ xX]\][ \t]+`) })
	headingRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^#{1,6}(?:[ \t]+|$)`) })
	bareBullet = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:[-*+•‣◦]|\d{1,3}[.)]|\(\d{1,3}\)|[A-Za-z]\))$`)
	})
)

type textItem struct {
	text    string
	section string
}

// parseText builds a rubric of judged criteria from free text. file names the source in
// errors ("--rubric" for inline text).
func parseText(data []byte, file string) (*Rubric, error) {
	text := string(data)
	if !utf8.ValidString(text) {
		return nil, &Error{File: file, Msg: "the rubric is not valid UTF-8 text"}
	}
	text = strings.TrimPrefix(text, "\uFEFF")
	if n := utf8.RuneCountInString(text); n > MaxTextChars {
		return nil, &Error{File: file, Msg: fmt.Sprintf(
			"the rubric text is %d characters; the limit is %d. Put a long rubric in a TOML file (--rubric rubric.toml) with one [[criterion]] per question",
			n, MaxTextChars)}
	}
	if strings.ContainsRune(text, 0) {
		return nil, &Error{File: file, Msg: "the rubric text contains a NUL byte; give plain text"}
	}
	items := splitCriteria(text)
	if len(items) == 0 {
		return nil, &Error{File: file, Msg: "the rubric has no criteria: give one criterion per line or bullet"}
	}
	r := &Rubric{
		Format:        FormatText,
		PassThreshold: 1,
		Judge:         JudgeConfig{Votes: 1, MaxEvidenceBytes: DefaultMaxEvidenceBytes},
	}
	for i, it := range items {
		q := it.text
		if it.section != "" {
			q = it.section + ": " + it.text
		}
		r.Criteria = append(r.Criteria, Criterion{
			ID:       fmt.Sprintf("criterion-%d", i+1),
			Title:    it.text,
			Question: q,
			Required: true,
			Weight:   1,
		})
	}
	return r, nil
}

// splitCriteria applies the free-text rules above.
func splitCriteria(text string) []textItem {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	lines := strings.Split(text, "\n")

	var items []textItem
	section := ""
	cont := false // the previous line was part of the last item, so an indented line continues it
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			cont = false
			continue
		}
		indented := line[0] == ' ' || line[0] == '\t'
		if headingRe().MatchString(trimmed) {
			section = cleanSection(strings.TrimLeft(trimmed, "#"))
			cont = false
			continue
		}
		if bareBullet().MatchString(trimmed) {
			cont = false
			continue
		}
		if loc := bulletRe().FindStringIndex(trimmed); loc != nil {
			body := strings.TrimSpace(trimmed[loc[1]:])
			body = strings.TrimSpace(taskBoxRe().ReplaceAllString(body, ""))
			if body == "" || body == "[ ]" || body == "[x]" || body == "[X]" {
				cont = false
				continue
			}
			items = append(items, textItem{text: body, section: section})
			cont = true
			continue
		}
		if cont && indented && len(items) > 0 {
			items[len(items)-1].text += " " + trimmed
			continue
		}
		if strings.HasSuffix(trimmed, ":") && nextIsBullet(lines[i+1:]) {
			section = cleanSection(trimmed)
			cont = false
			continue
		}
		items = append(items, textItem{text: trimmed, section: section})
		cont = true
	}
	return items
}

func cleanSection(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, ":")
	return strings.TrimSpace(s)
}

// nextIsBullet reports whether the next non-blank line is a bullet.
func nextIsBullet(lines []string) bool {
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		return bulletRe().MatchString(t)
	}
	return false
}
