package github

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/sethvargo/go-githubactions"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// Workflow-command limits (actions/toolkit problem-matchers.md): GitHub keeps at most 10
// annotations of each type per step and drops the rest silently.
const (
	MaxAnnotationsPerType = 10
	// StepSummaryBytes is the soft cap of our step summary (the hard limit is 1 MiB).
	StepSummaryBytes = 900 << 10
	// annotationMessageBytes keeps one annotation readable in the log and the PR view.
	annotationMessageBytes = 4 << 10
	annotationTitleBytes   = 255
)

// safely runs fn, turning go-githubactions' panics on write failures into errors.
func safely(what string, fn func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: %v", what, p)
		}
	}()
	fn()
	return nil
}

// AddMasks tells the runner to mask every secret in the job log (::add-mask::). Call it
// first, before anything can print a secret. A multi-line secret is also masked line by
// line; values shorter than four bytes are skipped (masking "1" would garble the log).
func AddMasks(a *githubactions.Action, secrets []string) error {
	seen := map[string]bool{}
	return safely("add masks", func() {
		for _, s := range secrets {
			vals := []string{s}
			if strings.ContainsAny(s, "\r\n") {
				vals = append(vals, strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })...)
			}
			for _, v := range vals {
				v = strings.TrimSpace(v)
				if len(v) < 4 || seen[v] {
					continue
				}
				seen[v] = true
				a.AddMask(v)
			}
		}
	})
}

// GroupSink folds the job log by stage: ::group::<stage> on stage.started, ::endgroup::
// on stage.finished (GitHub has no nested groups, so a new stage closes the open one).
// Output events (setup script and check lines) are echoed inside the group, redacted,
// between ::stop-commands:: and a random token, so command output can never issue
// workflow commands (::error::, ::add-mask::, ::set-env::).
func GroupSink(a *githubactions.Action, secrets ...string) events.Sink {
	return &groupSink{a: a, red: hygiene.NewRedactor(secrets...)}
}

type groupSink struct {
	mu      sync.Mutex
	a       *githubactions.Action
	red     *hygiene.Redactor
	open    bool
	stopped string // the stop-commands token while output is being echoed
}

func (g *groupSink) Emit(e events.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// A failed write to stdout must not take the run down.
	_ = safely("group", func() {
		switch e.Type {
		case events.StageStarted:
			g.close()
			title := string(e.Stage)
			if e.Message != "" {
				title += ": " + e.Message
			}
			g.a.Group(hygiene.Truncate(oneLine(g.red.Redact(hygiene.StripANSI(title))), 200))
			g.open = true
		case events.StageFinished, events.RunFinished:
			g.close()
		case events.Output:
			if !g.open {
				return
			}
			if g.stopped == "" {
				g.stopped = token()
				g.a.IssueCommand(&githubactions.Command{Name: "stop-commands", Message: g.stopped})
			}
			for l := range strings.Lines(g.red.Redact(hygiene.StripANSI(e.Message))) {
				g.a.Infof("%s", strings.TrimRight(l, "\n"))
			}
		}
	})
}

func (g *groupSink) close() {
	if g.stopped != "" {
		g.a.Infof("::%s::", g.stopped)
		g.stopped = ""
	}
	if g.open {
		g.a.EndGroup()
		g.open = false
	}
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "talkops-" + hex.EncodeToString(b)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// annotation is one workflow-command annotation.
type annotation struct {
	level    string // error, warning, notice
	file     string
	line     int
	endLine  int
	col      int
	endCol   int
	title    string
	message  string
	inDiff   bool
	required bool
	order    int
}

// annotationLevel maps a severity to a workflow command.
func annotationLevel(severity string) string {
	switch severity {
	case result.SeverityError:
		return "error"
	case result.SeverityWarning:
		return "warning"
	}
	return "notice"
}

// candidates turns findings, and failing rubric items that have no finding of their own,
// into annotations. Text is redacted and neutralised here; escaping happens when the
// command is written.
func candidates(r *result.Result, red *hygiene.Redactor) []annotation {
	var out []annotation
	owned := map[string]bool{}
	for _, f := range render.Findings(r) {
		if f.Item != nil {
			owned[f.Item.ID] = true
		}
		a := annotation{level: annotationLevel(f.Severity), title: f.Title, message: f.Message,
			inDiff: f.InDiff, required: f.Required, order: len(out)}
		if a.title == "" {
			a.title = f.Rule
		}
		if f.Located {
			a.file, a.line, a.endLine = f.Path, f.StartLine, f.EndLineOrStart()
			if f.StartLine > 0 && a.endLine == f.StartLine && f.StartColumn > 0 {
				a.col, a.endCol = f.StartColumn, f.EndColumn
			}
		}
		out = append(out, a)
	}
	if r.Rubric != nil {
		for _, it := range r.Rubric.Items {
			if owned[it.ID] {
				continue
			}
			var a annotation
			switch it.Status {
			case result.StatusFail:
				a.level = "warning"
				if it.Required {
					a.level = "error"
				}
				a.title = "talkops: " + it.ID + " failed"
			case result.StatusError:
				a.level = "warning"
				a.title = "talkops: " + it.ID + " could not be evaluated"
			default:
				continue
			}
			a.message = it.Reason
			if a.message == "" {
				a.message = it.Title
			}
			if a.message == "" {
				a.message = a.title
			}
			a.required, a.order = it.Required, len(out)
			out = append(out, a)
		}
	}
	for i := range out {
		out[i].title = hygiene.Truncate(oneLine(red.Text(out[i].title)), annotationTitleBytes)
		out[i].message = hygiene.Truncate(red.Text(out[i].message), annotationMessageBytes)
	}
	return out
}

// selectAnnotations keeps at most MaxAnnotationsPerType per level, picked by in-diff,
// then required, then order (candidates of one level share a severity). When a level
// overflows, its last slot becomes one annotation saying how many more there are and
// where to see them.
func selectAnnotations(all []annotation, moreAt string) []annotation {
	var out []annotation
	for _, level := range []string{"error", "warning", "notice"} {
		var lv []annotation
		for _, a := range all {
			if a.level == level {
				lv = append(lv, a)
			}
		}
		sortAnnotations(lv)
		if len(lv) <= MaxAnnotationsPerType {
			out = append(out, lv...)
			continue
		}
		keep := MaxAnnotationsPerType - 1
		out = append(out, lv[:keep]...)
		more := len(lv) - keep
		out = append(out, annotation{
			level: level,
			title: fmt.Sprintf("talkops: %d more %s annotations", more, level),
			message: fmt.Sprintf("%d more %s findings are not shown as annotations (GitHub shows at most %d per type in a step); see %s.",
				more, level, MaxAnnotationsPerType, moreAt),
		})
	}
	return out
}

func sortAnnotations(as []annotation) {
	key := func(a annotation) int {
		k := 0
		if !a.inDiff {
			k += 2
		}
		if !a.required {
			k++
		}
		return k
	}
	// Insertion sort keeps it stable and the slices are small.
	for i := 1; i < len(as); i++ {
		for j := i; j > 0; j-- {
			a, b := as[j-1], as[j]
			if key(a) < key(b) || (key(a) == key(b) && a.order <= b.order) {
				break
			}
			as[j-1], as[j] = b, a
		}
	}
}

// writeAnnotations issues the annotations as workflow commands; go-githubactions escapes
// the data (%, CR, LF) and the properties (also : and ,).
func writeAnnotations(a *githubactions.Action, as []annotation) error {
	return safely("write annotations", func() {
		for _, an := range as {
			props := githubactions.CommandProperties{}
			if an.title != "" {
				props["title"] = an.title
			}
			if an.file != "" {
				props["file"] = an.file
				if an.line > 0 {
					props["line"] = strconv.Itoa(an.line)
					props["endLine"] = strconv.Itoa(max(an.line, an.endLine))
				}
				if an.col > 0 {
					props["col"] = strconv.Itoa(an.col)
					if an.endCol >= an.col {
						props["endColumn"] = strconv.Itoa(an.endCol)
					}
				}
			}
			a.IssueCommand(&githubactions.Command{Name: an.level, Message: an.message, Properties: props})
		}
	})
}

// outputDelimiter is the fixed heredoc delimiter go-githubactions uses in GITHUB_OUTPUT;
// a value containing it could smuggle extra outputs, so values never do.
const outputDelimiter = "_GitHubActionsFileCommandDelimeter_"

// outputValue makes v one clean line that cannot end the heredoc early.
func outputValue(v string) string {
	v = strings.ReplaceAll(oneLine(v), outputDelimiter, "")
	return hygiene.Truncate(v, 4<<10)
}
