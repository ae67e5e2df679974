// Package evidence builds what the rubric judge is shown, from what the runner recorded and
// never from what a model says: numbered, hashed, size-capped evidence items fenced with a
// per-call nonce, a deterministic scan for prompt-injection attempts inside them, and the
// workspace baseline and diff that let the judge see what the agent changed.
package evidence

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/talkops/talkops/internal/lines"
)

// MinItemBytes is the smallest share of the budget an item is shown with. When the budget
// cannot give every item this much, the lowest-ranked items are left out (and listed as
// omitted) rather than every item being cut to nothing.
const MinItemBytes = 256

// Source is one piece of evidence before it is numbered and capped.
type Source struct {
	// Source names where the content comes from, as result.json records it: "task",
	// "check:<id>", "diff", "diff:<path>", "file:<path>", "command:<n>", "final_message".
	Source string
	// Title is a one-line label shown in the block's header.
	Title string
	// Text is the whole content, already redacted.
	Text string
	// Claims marks the agent's own words (its final message): shown as unverified claims,
	// never as evidence that something happened.
	Claims bool
	// Context marks material that frames the task but shows no outcome (the task prompt).
	Context bool
	// Tail keeps more of the end than the start when the item is cut (command output,
	// where errors and summaries come last).
	Tail bool
	// Keep ranks the item when the budget cannot hold every item: lower ranks are left out
	// first, and among equal ranks the earlier item goes first.
	Keep int
	// Path is the workspace path the content belongs to, if any (findings point at it).
	Path string
	// Truncated says the text is already incomplete (the sandbox or a reader cut it).
	Truncated bool
}

// Item is one numbered piece of evidence as the judge sees it.
type Item struct {
	// ID is "E1", "E2", ... in display order.
	ID     string
	Source string
	Title  string
	// Text is the content shown: the source's text, cut to its share of the budget.
	Text      string
	Claims    bool
	Context   bool
	Path      string
	Truncated bool
	// Original is the size of the source's text before it was cut.
	Original int
	// SHA256 is the hex digest of Text, the exact bytes shown.
	SHA256 string
	// Lines is the number of lines of Text (for line references such as E3:L4-L9).
	Lines int
}

// Bytes is the size of the content shown.
func (it Item) Bytes() int { return len(it.Text) }

// Bundle is the evidence of one judge call.
type Bundle struct {
	Items []Item
	// Omitted lists the sources left out because the budget could not hold them.
	Omitted []string
	// Budget is the byte budget the items were fitted into.
	Budget int
}

// Bytes is the total content size of the bundle's items.
func (b *Bundle) Bytes() int {
	n := 0
	for _, it := range b.Items {
		n += len(it.Text)
	}
	return n
}

// Lookup returns the item with id.
func (b *Bundle) Lookup(id string) (Item, bool) {
	for _, it := range b.Items {
		if it.ID == id {
			return it, true
		}
	}
	return Item{}, false
}

// Build numbers the sources in order and fits them into budget bytes of content: when
// everything fits it is shown whole; otherwise each item gets an equal share of what is
// left after the smaller items took what they need (water-filling), and an item longer
// than its share keeps its head and tail with a marker saying how much was cut. When the
// budget cannot give every item MinItemBytes, the lowest-ranked sources (Source.Keep) are
// left out and listed in Bundle.Omitted. A budget of 0 or less means no limit.
func Build(sources []Source, budget int) *Bundle {
	b := &Bundle{Budget: budget}
	keep := make([]bool, len(sources))
	for i := range keep {
		keep[i] = true
	}
	if budget > 0 {
		// Leave out the lowest-ranked sources until every remaining one can have its floor.
		order := make([]int, len(sources))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int { return sources[x].Keep - sources[y].Keep })
		n, need := len(sources), 0
		for _, s := range sources {
			need += min(len(s.Text), MinItemBytes)
		}
		for _, i := range order {
			if need <= budget || n <= 1 {
				break
			}
			keep[i] = false
			need -= min(len(sources[i].Text), MinItemBytes)
			n--
		}
	}
	var shown []int
	for i, s := range sources {
		if keep[i] {
			shown = append(shown, i)
		} else {
			b.Omitted = append(b.Omitted, s.Source)
		}
	}
	alloc := allocate(sources, shown, budget)
	for k, i := range shown {
		s := sources[i]
		text, cut := Cap(s.Text, alloc[k], s.Tail)
		sum := sha256.Sum256([]byte(text))
		b.Items = append(b.Items, Item{
			ID:        fmt.Sprintf("E%d", k+1),
			Source:    s.Source,
			Title:     s.Title,
			Text:      text,
			Claims:    s.Claims,
			Context:   s.Context,
			Path:      s.Path,
			Truncated: cut || s.Truncated,
			Original:  len(s.Text),
			SHA256:    hex.EncodeToString(sum[:]),
			Lines:     lines.Count(text),
		})
	}
	return b
}

// allocate water-fills budget over the shown sources: the smallest take what they need,
// the rest share what is left equally. It returns one cap per shown source (-1: no cap).
func allocate(sources []Source, shown []int, budget int) []int {
	out := make([]int, len(shown))
	if budget <= 0 {
		for k := range out {
			out[k] = -1
		}
		return out
	}
	idx := make([]int, len(shown))
	for k := range idx {
		idx[k] = k
	}
	slices.SortStableFunc(idx, func(x, y int) int { return len(sources[shown[x]].Text) - len(sources[shown[y]].Text) })
	left := budget
	for n, k := range idx {
		share := left / (len(idx) - n)
		size := len(sources[shown[k]].Text)
		give := min(size, share)
		out[k] = give
		left -= give
	}
	return out
}

// Cap returns text cut to at most max bytes (max < 0: no cap): the head and the tail are
// kept, cut at character boundaries (at line boundaries when one is near), with a marker
// between them saying how many bytes were left out. tail keeps two thirds for the end
// instead of half. The marker counts towards max; a max too small for it yields only the
// marker's short form.
func Cap(text string, max int, tail bool) (string, bool) {
	if max < 0 || len(text) <= max {
		return text, false
	}
	omitted := len(text) // refined below; the marker's width depends on it
	marker := func(n int) string { return fmt.Sprintf("\n[... %d bytes cut by the runner ...]\n", n) }
	room := max - len(marker(omitted))
	if room <= 0 {
		short := "[cut]"
		if max < len(short) {
			return "", true
		}
		return short, true
	}
	headN := room / 2
	if tail {
		headN = room / 3
	}
	tailN := room - headN
	head := cutHead(text, headN)
	end := cutTail(text, tailN)
	omitted = len(text) - len(head) - len(end)
	return head + marker(omitted) + end, true
}

// cutHead returns at most n bytes of the start of s, ending at a newline when one lies in
// the last quarter of the window, else at a character boundary.
func cutHead(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if i := strings.LastIndexByte(s[:n], '\n'); i >= 0 && i >= n-n/4 {
		return s[:i+1]
	}
	return s[:n]
}

// cutTail returns at most n bytes of the end of s, starting after a newline when one lies
// in the first quarter of the window, else at a character boundary.
func cutTail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	if i := strings.IndexByte(s[start:], '\n'); i >= 0 && i < n/4 && start+i+1 < len(s) {
		return s[start+i+1:]
	}
	return s[start:]
}

// NewNonce returns 16 random hex digits for one judge call's fences.
func NewNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// OpenTag and CloseTag are the fence of one evidence block: <evidence-NONCE ...> and
// </evidence-NONCE>. Content cannot close a block, because it was recorded before the
// nonce existed and any occurrence of the nonce in it is replaced (see Render).
func OpenTag(nonce string) string { return "<evidence-" + nonce }

// CloseTag is the line that ends every evidence block of a call.
func CloseTag(nonce string) string { return "</evidence-" + nonce + ">" }

// Render writes the bundle as fenced blocks:
//
//	<evidence-NONCE id="E3" source="command:2" bytes="812" truncated="false">
//	...content...
//	</evidence-NONCE>
//
// The agent's claims carry kind="unverified agent claims", the task prompt kind="task".
// Every occurrence of the nonce inside a header or content is replaced with "[nonce]", so
// nothing the agent wrote can end a block early or open a new one.
func (b *Bundle) Render(nonce string) string {
	var sb strings.Builder
	for _, it := range b.Items {
		kind := "recorded by the runner"
		switch {
		case it.Claims:
			kind = "unverified agent claims"
		case it.Context:
			kind = "task"
		}
		fmt.Fprintf(&sb, "%s id=%q source=%s kind=%q bytes=\"%d\" truncated=\"%t\"",
			OpenTag(nonce), it.ID, quoteAttr(defang(it.Source, nonce)), kind, len(it.Text), it.Truncated)
		if it.Title != "" {
			fmt.Fprintf(&sb, " title=%s", quoteAttr(defang(it.Title, nonce)))
		}
		sb.WriteString(">\n")
		sb.WriteString(defang(it.Text, nonce))
		if !strings.HasSuffix(it.Text, "\n") {
			sb.WriteByte('\n')
		}
		sb.WriteString(CloseTag(nonce))
		sb.WriteString("\n\n")
	}
	if len(b.Omitted) > 0 {
		shown := b.Omitted
		more := 0
		if len(shown) > 40 {
			shown, more = shown[:40], len(shown)-40
		}
		fmt.Fprintf(&sb, "Left out to stay within the evidence budget of %d bytes (%d items): %s",
			b.Budget, len(b.Omitted), defang(strings.Join(shown, ", "), nonce))
		if more > 0 {
			fmt.Fprintf(&sb, " and %d more", more)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// defang replaces the nonce wherever it occurs in s.
func defang(s, nonce string) string {
	if nonce == "" {
		return s
	}
	return strings.ReplaceAll(s, nonce, "[nonce]")
}

// quoteAttr quotes an attribute value on one line (Go syntax: quotes, backslashes and
// control characters escaped), so a path cannot add attributes or break the header.
func quoteAttr(s string) string {
	const max = 300
	if len(s) > max {
		s = cutHead(s, max) + "…"
	}
	return fmt.Sprintf("%q", strings.ToValidUTF8(s, "\uFFFD"))
}
