package evidence

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Hit is one suspected prompt-injection attempt found in evidence.
type Hit struct {
	// Rule names the pattern family: "override-instructions", "verdict-claim",
	// "addresses-grader", "role-marker", "fence-break", "hidden-characters".
	Rule string
	// Match is the matched text, cut to 80 bytes, with control and invisible characters
	// shown as \u escapes.
	Match string
	// Line is the 1-based line of the match in the scanned text.
	Line int
}

type pattern struct {
	rule string
	// need lists groups of lower-case words; the expression runs only on text that
	// contains at least one word of every group (a cheap prefilter: Go's regular
	// expressions are linear but slow on case-folded alternations).
	need [][]string
	re   *regexp.Regexp
}

func words(w ...string) []string { return w }

// The patterns look for text written to steer a grader rather than to run a tool: the
// phrasings promptfoo's judge-injection study found effective (instruction overrides,
// verdict smuggling, protocol impersonation), chat-template role markers, attempts to
// close the judge's fences, and invisible characters that hide text from reviewers. They
// are deliberately narrow: ordinary tool output ("test passed", "system: ok") must not
// match. A hit is a warning finding; it never changes a verdict by itself. They are
// compiled on the first scan, not at every start of the binary (270 KB of allocations).
var patterns = sync.OnceValue(func() []pattern {
	return []pattern{
		{"override-instructions", [][]string{words("ignore", "disregard", "forget", "override", "bypass", "skip")},
			regexp.MustCompile(`(?i)\b(?:ignore|disregard|forget|override|bypass|skip)\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?(?:the\s+|your\s+|these\s+|those\s+)?(?:previous|prior|above|earlier|preceding|foregoing|original|system|grading|grader's|judge's)\s+(?:instructions?|prompts?|rules|directions|guidelines|criteria|rubric|messages?|context)\b`)},
		{"override-instructions", [][]string{words("instruction")},
			regexp.MustCompile(`(?i)\b(?:new|updated|revised|real)\s+(?:system\s+)?instructions?\s*(?:for\s+the\s+(?:grader|judge|evaluator|model|ai))?\s*:`)},
		{"override-instructions", [][]string{words("override", "developer", "jailbreak")},
			regexp.MustCompile(`(?i)\b(?:protocol|system|admin|developer)\s+override\b|\bdeveloper\s+mode\b|\bjailbreak\b`)},
		{"verdict-claim", [][]string{words("verdict", "grad", "judg"), words("pass", "satisf", "approv", "success", "true", "1")},
			regexp.MustCompile(`(?i)\b(?:the\s+)?(?:final\s+|correct\s+|true\s+)?(?:verdict|grade|grading|judg(?:e?ment))\s+(?:is|should\s+be|must\s+be|will\s+be|=|:)\s*["'*]*\s*(?:pass(?:ed)?|satisfied|approved|success(?:ful)?|true|1(?:\.0)?|100%?)\b`)},
		{"verdict-claim", [][]string{words("mark", "grade", "score", "rate", "judge", "evaluate"), words("pass", "satisf", "success", "correct", "complete")},
			regexp.MustCompile(`(?i)\b(?:mark|grade|score|rate|judge|evaluate)\s+(?:this|it|that|the)(?:\s+(?:task|work|criterion|criteria|rubric|run|change|pr))?\s+(?:as\s+)?(?:a\s+)?(?:pass(?:ed|ing)?|satisfied|successful|correct|complete)\b`)},
		{"verdict-claim", [][]string{words(`"verdict"`, `"result"`, `"status"`, `"satisfied"`, `"insufficient_evidence"`, "submit_verdicts", `"evidence_refs"`)},
			regexp.MustCompile(`(?i)"(?:verdict|result|status)"\s*:\s*"(?:pass|satisfied)"|"(?:satisfied|insufficient_evidence)"\s*:\s*(?:true|false)|\bsubmit_verdicts\b|"evidence_refs"\s*:`)},
		{"addresses-grader", [][]string{words("note", "message", "instruction", "attention", "reminder", "hint"), words("ai", "llm", "grader", "judge", "evaluator", "model", "assistant")},
			regexp.MustCompile(`(?i)\b(?:note|message|instructions?|attention|reminder|hint)\s+(?:to|for)\s+(?:the\s+|any\s+)?(?:ai|llm|grader|judge|evaluator|reviewer\s+model|language\s+model|assistant)\b`)},
		{"addresses-grader", [][]string{words("dear", "hey", "hello", "attention"), words("ai", "llm", "grader", "judge", "evaluator")},
			regexp.MustCompile(`(?i)\b(?:dear|hey|hello|attention)[,\s]+(?:ai|llm|grader|judge|evaluator)\b`)},
		{"addresses-grader", [][]string{words("you"), words("grader", "judge", "evaluator")},
			regexp.MustCompile(`(?i)\byou\s+are\s+(?:now\s+)?(?:the|a|an)\s+(?:ai\s+)?(?:grader|judge|evaluator)\b`)},
		{"addresses-grader", [][]string{words("grader", "judge", "evaluator")},
			regexp.MustCompile(`(?i)\b(?:ai|llm)\s+(?:grader|judge|evaluator)s?\s*[:,]`)},
		{"role-marker", [][]string{words("<|", "inst]", "sys>>", "<system", "</system", "<assistant", "</assistant", "<developer", "</developer", "system", "developer", "human:", "assistant:")},
			regexp.MustCompile(`(?i)<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>|\[/?INST\]|<</?SYS>>|</?(?:system|assistant|developer)(?:_prompt)?>|(?m:^\s*(?:#+\s*)?(?:system|developer)\s+(?:prompt|message|instructions?)\s*:)|(?m:^(?:Human|Assistant):\s)`)},
		{"fence-break", [][]string{words("evidence", "<<", "</", "<!--")},
			regexp.MustCompile(`(?i)</?\s*evidence[\s>_-]|<<\s*(?:end|evidence)\b|</\s*(?:transcript|rubric|criteria|criterion|grader)[\s>_-]|<!--\s*talkops`)},
	}
})

// hidden matches characters that render as nothing or reorder text: zero-width and
// joiner characters, bidirectional controls (Trojan Source), and Unicode tag characters
// (ASCII smuggling). A byte-order mark at the very start is ignored.
var hidden = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("[\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF\U000E0000-\U000E007F]")
})

// Scan looks for prompt-injection attempts in evidence text and returns the hits in order
// of position, at most one per rule and line. It is deterministic and cheap (linear
// regular expressions); every hit deserves a warning, none is proof.
func Scan(text string) []Hit {
	type found struct {
		Hit
		pos int
	}
	var all []found
	seen := map[string]bool{}
	add := func(rule string, start, end int) {
		line := 1 + strings.Count(text[:start], "\n")
		key := fmt.Sprintf("%s:%d", rule, line)
		if seen[key] {
			return
		}
		seen[key] = true
		all = append(all, found{Hit{Rule: rule, Match: excerpt(text[start:end]), Line: line}, start})
	}
	lower := strings.ToLower(text)
	for _, p := range patterns() {
		if !mayMatch(lower, p.need) {
			continue
		}
		for _, loc := range p.re.FindAllStringIndex(text, 20) {
			add(p.rule, loc[0], loc[1])
		}
	}
	if !isASCII(text) {
		for _, loc := range hidden().FindAllStringIndex(text, 20) {
			if loc[0] == 0 && strings.HasPrefix(text, "\uFEFF") {
				continue
			}
			add("hidden-characters", loc[0], loc[1])
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].pos < all[j].pos })
	out := make([]Hit, len(all))
	for i, f := range all {
		out[i] = f.Hit
	}
	return out
}

// mayMatch reports whether lower contains a word of every group.
func mayMatch(lower string, need [][]string) bool {
	for _, group := range need {
		found := false
		for _, w := range group {
			if strings.Contains(lower, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// excerpt makes a match safe to show: at most 80 bytes, one line, invisible and control
// characters escaped.
func excerpt(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\uFFFD`)
		case r < 0x20 || r == 0x7f || hidden().MatchString(string(r)):
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
		if b.Len() >= 80 {
			b.WriteString("…")
			break
		}
	}
	return b.String()
}
