package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// JUnit layout (read by GitLab's unit test report and Jenkins' junit step): one testsuite
// per rubric, one testcase per rubric item (classname "rubric.<name>", name
// "<kind>:<id>"), a failing item as <failure>, an item that could not be evaluated as
// <error>, a skipped one as <skipped>; the findings of an item are listed in its failure
// text. A "talkops" suite holds a "run" case when there is no rubric, when the run could
// not reach a verdict, or when it failed without a failing item, and a "findings" case
// that lists findings no rubric item owns. So the failure count always agrees with the
// verdict, and every finding is visible somewhere.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Failure   *junitOutcome `xml:"failure"`
	Error     *junitOutcome `xml:"error"`
	Skipped   *junitOutcome `xml:"skipped"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitOutcome struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

const (
	junitMessageBytes = 1000
	junitBodyBytes    = 64 << 10
)

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// JUnit renders r as JUnit XML.
func JUnit(r *result.Result, red *hygiene.Redactor) ([]byte, error) {
	x := junitText{red}
	byItem, orphans := findingsByItem(render.Findings(r))
	doc := junitSuites{Name: "talkops", Time: seconds(r.Run.DurationMS)}
	stamp := ""
	if !r.Run.StartedAt.IsZero() {
		stamp = r.Run.StartedAt.UTC().Format("2006-01-02T15:04:05")
	}
	itemFailed := false
	if r.Rubric != nil {
		s := rubricSuite(r.Rubric, byItem, stamp, x)
		itemFailed = s.Failures > 0
		doc.Suites = append(doc.Suites, s)
	}

	own := junitSuite{Name: "talkops", Timestamp: stamp, Time: seconds(r.Run.DurationMS)}
	needRun := r.Rubric == nil || r.Verdict == result.VerdictError ||
		(r.Verdict == result.VerdictFail && !itemFailed) || len(r.Errors) > 0
	if needRun {
		own.add(runCase(r, itemFailed, x))
	}
	if len(orphans) > 0 {
		c := junitCase{Classname: "talkops", Name: "findings", Time: "0.000",
			SystemOut: x.body(findingLines(orphans))}
		if orphans[0].Located {
			c.File = orphans[0].Path
		}
		own.add(c)
	}
	if len(own.Cases) > 0 {
		doc.Suites = append(doc.Suites, own)
	}
	for _, s := range doc.Suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
	}

	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode junit: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// junitText redacts what goes into the XML and bounds its size.
type junitText struct{ red *hygiene.Redactor }

func (x junitText) plain(s string) string { return x.red.Text(s) }
func (x junitText) message(s string) string {
	return hygiene.Truncate(hygiene.FirstLine(x.plain(s)), junitMessageBytes)
}
func (x junitText) body(s string) string { return hygiene.Truncate(x.plain(s), junitBodyBytes) }

// add appends c and counts it by its outcome.
func (s *junitSuite) add(c junitCase) {
	s.Cases = append(s.Cases, c)
	s.Tests = len(s.Cases)
	switch {
	case c.Failure != nil:
		s.Failures++
	case c.Error != nil:
		s.Errors++
	case c.Skipped != nil:
		s.Skipped++
	}
}

// findingsByItem groups findings under the rubric item that owns them; orphans are the
// ones no item owns.
func findingsByItem(findings []render.Finding) (byItem map[string][]render.Finding, orphans []render.Finding) {
	byItem = map[string][]render.Finding{}
	for _, f := range findings {
		if f.Item != nil {
			byItem[f.Item.ID] = append(byItem[f.Item.ID], f)
		} else {
			orphans = append(orphans, f)
		}
	}
	return byItem, orphans
}

// rubricSuite is one case per rubric item.
func rubricSuite(rb *result.Rubric, byItem map[string][]render.Finding, stamp string, x junitText) junitSuite {
	name := rb.Name
	if name == "" {
		name = "rubric"
	}
	name = x.plain(name)
	s := junitSuite{Name: name, Timestamp: stamp}
	var total int64
	for _, it := range rb.Items {
		total += it.DurationMS
		s.add(itemCase(it, "rubric."+name, byItem[it.ID], x))
	}
	s.Time = seconds(total)
	return s
}

// itemCase is a rubric item as a test case: failed, not evaluated (error), skipped or
// passed, with its findings in the failure text.
func itemCase(it result.Item, classname string, fs []render.Finding, x junitText) junitCase {
	c := junitCase{Classname: classname, Name: x.plain(it.Kind + ":" + it.ID), Time: seconds(it.DurationMS)}
	if len(fs) > 0 && fs[0].Located {
		c.File = fs[0].Path
	}
	text := it.Reason
	if len(fs) > 0 {
		text += "\n\nFindings:\n" + findingLines(fs)
	}
	kind := "optional"
	if it.Required {
		kind = "required"
	}
	switch it.Status {
	case result.StatusFail:
		c.Failure = &junitOutcome{Message: x.message(it.Reason), Type: kind, Body: x.body(text)}
	case result.StatusError:
		c.Error = &junitOutcome{Message: x.message(it.Reason), Type: "evaluation", Body: x.body(text)}
	case result.StatusSkipped:
		m := it.Reason
		if m == "" {
			m = "skipped"
		}
		c.Skipped = &junitOutcome{Message: x.message(m)}
	}
	c.SystemOut = x.body(itemOutput(it))
	return c
}

// runCase is the run itself as a test case: an error when there is no verdict, a
// failure when the run failed without a failing item, and the run's errors.
func runCase(r *result.Result, itemFailed bool, x junitText) junitCase {
	c := junitCase{Classname: "talkops", Name: "run", Time: seconds(r.Run.DurationMS)}
	reason := r.Reason
	if reason == "" {
		reason = "verdict " + r.Verdict
	}
	var errs strings.Builder
	for _, e := range r.Errors {
		fmt.Fprintf(&errs, "%s: %s\n", e.Stage, e.Message)
	}
	switch {
	case r.Verdict == result.VerdictError:
		c.Error = &junitOutcome{Message: x.message(reason), Type: "error", Body: x.body(errs.String())}
	case r.Verdict == result.VerdictFail && !itemFailed:
		c.Failure = &junitOutcome{Message: x.message(reason), Type: "verdict", Body: x.body(errs.String())}
	}
	var out strings.Builder
	out.WriteString(render.Headline(r, x.red) + "\n")
	if c.Error == nil && errs.Len() > 0 {
		out.WriteString("\nErrors:\n" + errs.String())
	}
	if r.Agent != nil && r.Agent.FinalAnswer != "" {
		out.WriteString("\nFinal answer:\n" + r.Agent.FinalAnswer + "\n")
	}
	c.SystemOut = x.body(out.String())
	return c
}

func findingLines(fs []render.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		loc := f.Location()
		if loc == "" {
			loc = "(no location)"
		}
		fmt.Fprintf(&b, "%s %s", loc, f.Severity)
		if f.Rule != "" {
			fmt.Fprintf(&b, " [%s]", f.Rule)
		}
		b.WriteString(" ")
		if f.Title != "" {
			b.WriteString(f.Title + ": ")
		}
		b.WriteString(strings.Join(strings.Fields(f.Message), " ") + "\n")
	}
	return b.String()
}

// itemOutput is the evidence of an item for <system-out>. The caller redacts.
func itemOutput(it result.Item) string {
	var b strings.Builder
	if c := it.Check; c != nil {
		exit := "none"
		if c.ExitCode != nil {
			exit = fmt.Sprint(*c.ExitCode)
		}
		fmt.Fprintf(&b, "command: %s\nexit code: %s (expected %d)", c.CommandLine(), exit, c.ExpectExit)
		if c.TimedOut {
			b.WriteString(", timed out")
		}
		b.WriteString("\n")
		if c.StdoutTail != "" {
			b.WriteString("--- stdout (tail) ---\n" + c.StdoutTail + "\n")
		}
		if c.StderrTail != "" {
			b.WriteString("--- stderr (tail) ---\n" + c.StderrTail + "\n")
		}
	}
	if j := it.Judge; j != nil {
		fmt.Fprintf(&b, "judge: %s\n", j.Model)
		for i, v := range j.Votes {
			fmt.Fprintf(&b, "vote %d: %s", i+1, v.Verdict)
			if v.Confidence != "" {
				fmt.Fprintf(&b, " (%s)", v.Confidence)
			}
			if len(v.EvidenceRefs) > 0 {
				fmt.Fprintf(&b, " evidence %s", strings.Join(v.EvidenceRefs, ", "))
			}
			b.WriteString("\n")
			if v.Gap != "" {
				b.WriteString("  gap: " + v.Gap + "\n")
			}
		}
		for _, e := range j.Evidence {
			fmt.Fprintf(&b, "evidence %s: %s (%d bytes, sha256 %s)\n", e.ID, e.Source, e.Bytes, e.SHA256)
		}
	}
	return b.String()
}
