package render

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
)

// Options shape one Markdown rendering.
type Options struct {
	// MaxBytes caps the whole body, marker and closing tags included (0 = no cap). Rows
	// are dropped whole and replaced by a "… N more" line.
	MaxBytes int
	// Redactor cleans every piece of untrusted text (nil redacts token shapes only).
	Redactor *hygiene.Redactor
	// Marker is a hidden line put first (the sticky-comment marker); "" for none.
	Marker string
	// Notes are our own sentences about where the result was published and what was
	// skipped (trusted text, rendered as a list).
	Notes []string
	// MaxFindings caps the findings table (0 = 50).
	MaxFindings int
	// Overview leaves out the per-item details, errors and the final answer.
	Overview bool
	// MoreAt says where the complete data is, for "… N more" lines.
	MoreAt string
}

const (
	defaultMaxFindings = 50
	cellBytes          = 300
	detailBytes        = 4 << 10
	answerBytes        = 8 << 10
)

// Icon is the verdict's emoji.
func Icon(verdict string) string {
	switch verdict {
	case result.VerdictPass:
		return "✅"
	case result.VerdictFail:
		return "❌"
	}
	return "⚠️"
}

func statusIcon(status result.ItemStatus) string {
	switch status {
	case result.StatusPass:
		return "✅"
	case result.StatusFail:
		return "❌"
	case result.StatusError:
		return "⚠️"
	case result.StatusSkipped:
		return "⏭️"
	}
	return "❔"
}

func severityLabel(s string) string {
	switch s {
	case result.SeverityError:
		return "🔴 error"
	case result.SeverityWarning:
		return "🟠 warning"
	case result.SeverityNotice:
		return "🔵 notice"
	}
	return s
}

// Headline is a one-line plain-text summary of the verdict, e.g.
// "fail: score 0.50 (threshold 0.80), 1 of 3 items failed, 2 findings".
func Headline(r *result.Result, red *hygiene.Redactor) string {
	var parts []string
	if r.Score != nil {
		s := fmt.Sprintf("score %.2f", *r.Score)
		if r.Rubric != nil {
			s += fmt.Sprintf(" (threshold %.2f)", r.Rubric.PassThreshold)
		}
		parts = append(parts, s)
	}
	if r.Rubric != nil {
		c := r.Rubric.Counts
		total := c.Pass + c.Fail + c.Error + c.Skipped
		if c.Fail > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d items failed", c.Fail, total))
		} else {
			parts = append(parts, fmt.Sprintf("%d of %d items passed", c.Pass, total))
		}
		if c.Error > 0 {
			parts = append(parts, fmt.Sprintf("%d could not be evaluated", c.Error))
		}
	}
	if n := len(Findings(r)); n > 0 {
		parts = append(parts, plural(n, "finding"))
	}
	if r.Partial {
		parts = append(parts, "partial (budget ran out)")
	}
	if r.Interrupted != "" {
		parts = append(parts, "interrupted by "+red.Text(r.Interrupted))
	}
	h := r.Verdict
	if len(parts) > 0 {
		h += ": " + strings.Join(parts, ", ")
	}
	if r.Verdict == result.VerdictError && r.Reason != "" {
		h += " — " + hygiene.FirstLine(red.Text(r.Reason))
	}
	return hygiene.Truncate(strings.Join(strings.Fields(h), " "), 500)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// builder appends blocks while they fit the budget; reserved bytes stay free for the
// footer.
type builder struct {
	b        strings.Builder
	max      int
	reserved int
}

func (b *builder) room() int {
	if b.max <= 0 {
		return 1 << 30
	}
	return b.max - b.reserved - b.b.Len()
}

// add appends s if it fits and reports whether it did.
func (b *builder) add(s string) bool {
	if len(s) > b.room() {
		return false
	}
	b.b.WriteString(s)
	return true
}

// Markdown renders r for people: verdict, score, items, findings and (unless Overview)
// the details, within opts.MaxBytes. Every piece of untrusted text is redacted,
// neutralised and escaped or fenced.
func Markdown(r *result.Result, opts Options) string {
	red := opts.Redactor
	t := redact(func(s string) string { return red.Text(s) })
	moreAt := opts.MoreAt
	if moreAt == "" {
		moreAt = "result.json in the report directory"
	}

	footer := footer(r, opts, t)
	b := &builder{max: opts.MaxBytes, reserved: len(footer)}
	if opts.Marker != "" {
		b.add(opts.Marker + "\n")
	}
	// Header: always first, cut only as a last resort.
	if h := header(r, t); !b.add(h) {
		b.add(hygiene.Truncate(h, max(0, b.room()-1)) + "\n")
	}
	if r.Rubric != nil && len(r.Rubric.Items) > 0 {
		b.itemsTable(r.Rubric.Items, t, moreAt)
	}
	if fs := Rank(Findings(r)); len(fs) > 0 {
		limit := opts.MaxFindings
		if limit <= 0 {
			limit = defaultMaxFindings
		}
		b.findingsTable(fs, limit, t, moreAt)
	}
	if !opts.Overview {
		for _, d := range Details(r, red) {
			if !b.add(d) {
				b.add(fmt.Sprintf("_Some details did not fit; see %s._\n\n", moreAt))
				break
			}
		}
	}

	b.reserved = 0
	b.add(footer)
	return b.b.String()
}

// redact is the redaction every piece of untrusted text goes through.
type redact func(string) string

// cell is s redacted and made safe for one table cell.
func (t redact) cell(s string) string { return hygiene.Inline(t(s), cellBytes) }

// header is the title with the verdict, a line of facts (score, items, findings, exit
// code, duration) and the notices a reader must not miss.
func header(r *result.Result, t redact) string {
	var h strings.Builder
	title := "talkops"
	if r.Rubric != nil && r.Rubric.Name != "" {
		title += " · " + t.cell(r.Rubric.Name)
	}
	fmt.Fprintf(&h, "### %s %s: **%s**\n\n", Icon(r.Verdict), title, r.Verdict)
	h.WriteString(strings.Join(headerFacts(r), " · ") + "\n\n")
	if r.Partial {
		h.WriteString("> ⏱️ A budget (turns, time or cost) ran out before the agent finished: this result is partial.\n\n")
	}
	if r.Interrupted != "" {
		fmt.Fprintf(&h, "> 🛑 The run was interrupted by %s.\n\n", t.cell(r.Interrupted))
	}
	if r.Reason != "" {
		fmt.Fprintf(&h, "**Reason:** %s\n\n", t.cell(r.Reason))
	}
	if unstable := unstableItems(r, t); len(unstable) > 0 {
		fmt.Fprintf(&h, "> 🔁 The judge disagreed with itself on %s: needs human review.\n\n", strings.Join(unstable, ", "))
	}
	return h.String()
}

func headerFacts(r *result.Result) []string {
	var facts []string
	if r.Score != nil {
		s := fmt.Sprintf("**Score** %.2f", *r.Score)
		if r.Rubric != nil {
			s += fmt.Sprintf(" (threshold %.2f)", r.Rubric.PassThreshold)
		}
		facts = append(facts, s)
	}
	if r.Rubric != nil {
		c := r.Rubric.Counts
		facts = append(facts, fmt.Sprintf("**Items** %d passed, %d failed, %s, %d skipped", c.Pass, c.Fail, plural(c.Error, "error"), c.Skipped))
	}
	if fs := Findings(r); len(fs) > 0 {
		facts = append(facts, "**Findings** "+severityCounts(fs))
	}
	facts = append(facts, fmt.Sprintf("**Exit code** %d", r.ExitCode))
	if r.Run.DurationMS > 0 {
		facts = append(facts, "**Duration** "+(time.Duration(r.Run.DurationMS)*time.Millisecond).Round(100*time.Millisecond).String())
	}
	return facts
}

// itemsTable adds a row per rubric item while they fit, then a "… N more" line.
func (b *builder) itemsTable(items []result.Item, t redact, moreAt string) {
	b.add("| | Item | Kind | Required | Score | Reason |\n|:-:|---|---|:-:|--:|---|\n")
	for i, it := range items {
		name := t.cell(it.ID)
		if it.Title != "" && it.Title != it.ID {
			name += " — " + t.cell(it.Title)
		}
		score := "–"
		if it.Score != nil {
			score = fmt.Sprintf("%.2f", *it.Score)
		}
		req := ""
		if it.Required {
			req = "✔"
		}
		row := fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", statusIcon(it.Status), name, t.cell(it.Kind), req, score, t.cell(it.Reason))
		if b.room() < len(row)+200 || !b.add(row) {
			b.add(fmt.Sprintf("\n_… %d more items, see %s._\n", len(items)-i, moreAt))
			break
		}
	}
	b.add("\n")
}

// findingsTable adds a row per ranked finding, at most limit and while they fit, then a
// "… N more" line.
func (b *builder) findingsTable(fs []Finding, limit int, t redact, moreAt string) {
	b.add(fmt.Sprintf("#### Findings (%d)\n\n| Severity | Location | Rule | Message |\n|---|---|---|---|\n", len(fs)))
	shown := 0
	for _, f := range fs {
		if shown >= limit {
			break
		}
		msg := f.Message
		if f.Title != "" {
			msg = f.Title + ": " + msg
		}
		loc := t.cell(f.Location())
		if f.InDiff {
			loc += " (in diff)"
		}
		row := fmt.Sprintf("| %s | %s | %s | %s |\n", severityLabel(f.Severity), loc, t.cell(f.Rule), t.cell(msg))
		if b.room() < len(row)+200 || !b.add(row) {
			break
		}
		shown++
	}
	if shown < len(fs) {
		b.add(fmt.Sprintf("\n_… %d more findings, see %s._\n", len(fs)-shown, moreAt))
	}
	b.add("\n")
}

// Details returns the collapsible detail blocks: one per failing or erroring item, the
// infrastructure errors, and the agent's final answer. Each block is self-contained.
func Details(r *result.Result, red *hygiene.Redactor) []string {
	t := func(s string) string { return red.Text(s) }
	fence := func(s string, n int) string { return hygiene.Fence(hygiene.Truncate(t(s), n)) + "\n\n" }
	var out []string
	if r.Rubric != nil {
		for _, it := range r.Rubric.Items {
			if it.Status != result.StatusFail && it.Status != result.StatusError {
				continue
			}
			var d strings.Builder
			fmt.Fprintf(&d, "<details><summary>%s %s: %s</summary>\n\n", statusIcon(it.Status), hygiene.Inline(t(it.ID), cellBytes), it.Status)
			if it.Reason != "" {
				d.WriteString(fence(it.Reason, detailBytes))
			}
			if c := it.Check; c != nil {
				exit := "none"
				if c.ExitCode != nil {
					exit = fmt.Sprint(*c.ExitCode)
				}
				fmt.Fprintf(&d, "Command (exit %s, expected %d", exit, c.ExpectExit)
				if c.TimedOut {
					d.WriteString(", timed out")
				}
				d.WriteString("):\n\n" + fence(c.CommandLine(), detailBytes))
				if c.StdoutTail != "" {
					d.WriteString("stdout (tail):\n\n" + fence(c.StdoutTail, detailBytes))
				}
				if c.StderrTail != "" {
					d.WriteString("stderr (tail):\n\n" + fence(c.StderrTail, detailBytes))
				}
			}
			if j := it.Judge; j != nil {
				for i, v := range j.Votes {
					fmt.Fprintf(&d, "Judge vote %d: %s", i+1, hygiene.Inline(t(v.Verdict), 40))
					if v.Confidence != "" {
						d.WriteString(" (" + hygiene.Inline(t(v.Confidence), 40) + ")")
					}
					d.WriteString("\n\n")
					if v.Gap != "" {
						d.WriteString(fence(v.Gap, detailBytes))
					}
				}
			}
			d.WriteString("</details>\n\n")
			out = append(out, d.String())
		}
	}
	if len(r.Errors) > 0 {
		var d strings.Builder
		fmt.Fprintf(&d, "<details><summary>⚠️ Errors (%d)</summary>\n\n", len(r.Errors))
		for _, e := range r.Errors {
			d.WriteString("- " + hygiene.Inline(t(string(e.Stage)), 80) + "\n\n" + indent(fence(e.Message, detailBytes)))
		}
		d.WriteString("</details>\n\n")
		out = append(out, d.String())
	}
	if s := r.Sync; s != nil && len(s.LeftOutBy) > 0 {
		out = append(out, leftOutDetails(s, t))
	}
	if r.Agent != nil && r.Agent.FinalAnswer != "" {
		out = append(out, "<details><summary>Agent's final answer</summary>\n\n"+fence(r.Agent.FinalAnswer, answerBytes)+"</details>\n\n")
	}
	return out
}

// leftOutDetails lists what the workspace sync did not send: counts by reason, then the
// first paths.
func leftOutDetails(s *result.Sync, t func(string) string) string {
	total := 0
	reasons := make([]string, 0, len(s.LeftOutBy))
	for reason, n := range s.LeftOutBy {
		total += n
		reasons = append(reasons, reason)
	}
	slices.Sort(reasons)
	var d strings.Builder
	fmt.Fprintf(&d, "<details><summary>Not synced into the sandbox (%d)</summary>\n\n", total)
	for i, reason := range reasons {
		if i > 0 {
			d.WriteString(" · ")
		}
		fmt.Fprintf(&d, "%s: %d", hygiene.Inline(t(reason), 40), s.LeftOutBy[reason])
	}
	d.WriteString("\n\n")
	for _, l := range s.LeftOut {
		fmt.Fprintf(&d, "- %s (%s)\n", hygiene.Inline(t(l.Path), cellBytes), hygiene.Inline(t(l.Reason), 40))
	}
	if len(s.LeftOut) < total {
		fmt.Fprintf(&d, "- … %d more\n", total-len(s.LeftOut))
	}
	d.WriteString("\n</details>\n\n")
	return d.String()
}

// indent puts a block under a list item.
func indent(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "")
}

func footer(r *result.Result, opts Options, t func(string) string) string {
	var f strings.Builder
	if len(opts.Notes) > 0 {
		f.WriteString("**Reporting**\n\n")
		for _, n := range opts.Notes {
			f.WriteString("- " + n + "\n")
		}
		f.WriteString("\n")
	}
	sig := []string{"talkops " + hygiene.Inline(t(r.Run.Version), 40)}
	if r.Run.ID != "" {
		sig = append(sig, "run "+hygiene.Inline(t(r.Run.ID), 80))
	}
	if r.Sandbox != nil && r.Sandbox.Provider != "" {
		sig = append(sig, "sandbox "+hygiene.Inline(t(r.Sandbox.Provider), 40))
	}
	if r.Agent != nil {
		if r.Agent.Model != "" {
			sig = append(sig, "model "+hygiene.Inline(t(r.Agent.Model), 80))
		}
		if r.Agent.Usage.CostUSD > 0 {
			sig = append(sig, fmt.Sprintf("cost $%.4f", r.Agent.Usage.CostUSD))
		}
	}
	f.WriteString("<sub>" + strings.Join(sig, " · ") + "</sub>\n")
	return f.String()
}

func severityCounts(fs []Finding) string {
	n := map[string]int{}
	for _, f := range fs {
		n[f.Severity]++
	}
	var parts []string
	for _, s := range []string{result.SeverityError, result.SeverityWarning, result.SeverityNotice} {
		if n[s] > 0 {
			parts = append(parts, plural(n[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

func unstableItems(r *result.Result, t func(string) string) []string {
	if r.Rubric == nil {
		return nil
	}
	var out []string
	for _, it := range r.Rubric.Items {
		if it.Unstable {
			out = append(out, hygiene.Inline(t(it.ID), 80))
		}
	}
	return out
}
