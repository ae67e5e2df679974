package github

import (
	"context"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// Checks API limits (REST docs): 50 annotations per request, 65,535 characters in the
// output summary and text, 64 KB per annotation message.
const (
	AnnotationsPerRequest = 50
	CheckTextBytes        = 65535
	// MaxCheckAnnotations bounds the annotations sent per run (20 requests), well under
	// the secondary rate limit of 80 content-creating requests a minute.
	MaxCheckAnnotations = 1000
	checkMessageBytes   = 64000
	checkTitleBytes     = 255
)

// checkAnnotations converts the located findings, ranked, into check-run annotations.
func checkAnnotations(r *result.Result, red *hygiene.Redactor) []*gh.CheckRunAnnotation {
	var out []*gh.CheckRunAnnotation
	for _, f := range render.Rank(render.Findings(r)) {
		if !f.Located || len(out) >= MaxCheckAnnotations {
			continue
		}
		level := "notice"
		switch f.Severity {
		case result.SeverityError:
			level = "failure"
		case result.SeverityWarning:
			level = "warning"
		}
		start := max(1, f.StartLine)
		end := max(start, f.EndLineOrStart())
		a := &gh.CheckRunAnnotation{
			Path:            gh.String(f.Path),
			StartLine:       gh.Int(start),
			EndLine:         gh.Int(end),
			AnnotationLevel: gh.String(level),
			Message:         gh.String(hygiene.Truncate(red.Text(f.Message), checkMessageBytes)),
		}
		// Columns are only allowed on a one-line range.
		if start == end && f.StartLine > 0 && f.StartColumn > 0 {
			a.StartColumn = gh.Int(f.StartColumn)
			if f.EndColumn >= f.StartColumn {
				a.EndColumn = gh.Int(f.EndColumn)
			}
		}
		title := f.Title
		if title == "" {
			title = f.Rule
		}
		if title != "" {
			a.Title = gh.String(hygiene.Truncate(oneLine(red.Text(title)), checkTitleBytes))
		}
		out = append(out, a)
	}
	return out
}

// finishCheck writes the annotations in batches of 50 and completes the check run with
// its conclusion; it creates the run first if Begin did not. It returns how many
// annotations it sent.
func (p *Publisher) finishCheck(ctx context.Context, r *result.Result, t target) (int, error) {
	red := p.cfg.Redactor
	anns := checkAnnotations(r, red)
	title := p.headline(r)
	summary := render.Markdown(r, render.Options{
		Notes:    p.untrustedNote(),
		MaxBytes: CheckTextBytes,
		Redactor: red,
		Overview: true,
		MoreAt:   "results.sarif and result.json in the report artifact",
	})
	text := budgetJoin(render.Details(r, red), CheckTextBytes)
	output := func(batch []*gh.CheckRunAnnotation) *gh.CheckRunOutput {
		o := &gh.CheckRunOutput{Title: gh.String(title), Summary: gh.String(summary), Annotations: batch}
		if text != "" {
			o.Text = gh.String(text)
		}
		return o
	}
	var batches [][]*gh.CheckRunAnnotation
	for i := 0; i < len(anns); i += AnnotationsPerRequest {
		batches = append(batches, anns[i:min(i+AnnotationsPerRequest, len(anns))])
	}
	if len(batches) == 0 {
		batches = [][]*gh.CheckRunAnnotation{nil}
	}
	name := p.checkName(r)
	conclusion := p.conclusion(r)
	for i, batch := range batches {
		last := i == len(batches)-1
		if p.checkID == 0 {
			opts := gh.CreateCheckRunOptions{
				Name:       name,
				HeadSHA:    t.sha,
				Status:     gh.String("in_progress"),
				StartedAt:  &gh.Timestamp{Time: startedAt(r)},
				DetailsURL: optional(p.env.RunURL),
				ExternalID: optional(r.Run.ID),
				Output:     output(batch),
			}
			if last {
				opts.Status = gh.String("completed")
				opts.Conclusion = gh.String(conclusion)
				opts.CompletedAt = &gh.Timestamp{Time: time.Now()}
			}
			run, _, err := p.client.Checks.CreateCheckRun(ctx, p.owner, p.repo, opts)
			if err != nil {
				return 0, err
			}
			p.checkID = run.GetID()
			continue
		}
		opts := gh.UpdateCheckRunOptions{Name: name, Output: output(batch)}
		if last {
			opts.Status = gh.String("completed")
			opts.Conclusion = gh.String(conclusion)
			opts.CompletedAt = &gh.Timestamp{Time: time.Now()}
		}
		if _, _, err := p.client.Checks.UpdateCheckRun(ctx, p.owner, p.repo, p.checkID, opts); err != nil {
			return 0, err
		}
	}
	return len(anns), nil
}

// budgetJoin concatenates blocks while they fit in maxBytes.
func budgetJoin(blocks []string, maxBytes int) string {
	var b strings.Builder
	for _, s := range blocks {
		if b.Len()+len(s) > maxBytes {
			const more = "_More details did not fit; see the report artifact._\n"
			if b.Len()+len(more) <= maxBytes {
				b.WriteString(more)
			}
			break
		}
		b.WriteString(s)
	}
	return b.String()
}

// completeCheck is the best effort after a failed finishCheck: it tries once to complete
// the check run without annotations, so it does not stay "in progress" forever.
func (p *Publisher) completeCheck(ctx context.Context, r *result.Result) {
	if p.checkID == 0 {
		return
	}
	_, _, _ = p.client.Checks.UpdateCheckRun(ctx, p.owner, p.repo, p.checkID, gh.UpdateCheckRunOptions{
		Name:        p.checkName(r),
		Status:      gh.String("completed"),
		Conclusion:  gh.String(p.conclusion(r)),
		CompletedAt: &gh.Timestamp{Time: time.Now()},
		Output: &gh.CheckRunOutput{
			Title:   gh.String(p.headline(r)),
			Summary: gh.String("The annotations could not be sent; they are in the job's annotations and summary."),
		},
	})
}
