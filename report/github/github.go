// Package github publishes a talkops result on GitHub: workflow-command annotations, the
// step summary and step outputs (through go-githubactions), and with a token a check run
// with every finding as an annotation and one sticky pull-request comment (through
// go-github). It degrades instead of failing: a fork, a read-only token or a 403/404
// drops to annotations and the step summary, and the summary says what was skipped.
package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/sethvargo/go-githubactions"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// Conclusions for Config.ErrorConclusion. Failure is the default: the agent or the
// repository under test can make a run error on purpose (a check whose command it deleted
// exits 127), and branch protection counts a neutral check run as passing, so neutral
// would let them through the gate.
const (
	ConclusionNeutral = "neutral"
	ConclusionFailure = "failure"
	// DefaultErrorConclusion is the conclusion of a run without a verdict unless the
	// workflow opts into neutral.
	DefaultErrorConclusion = ConclusionFailure
)

// DefaultBotLogin is the author of comments made with the Actions GITHUB_TOKEN. An
// installation token cannot ask GET /user who it is, so this is assumed for it.
const DefaultBotLogin = "github-actions[bot]"

// Config configures a Publisher.
type Config struct {
	// Getenv reads the environment (os.Getenv in production).
	Getenv func(string) string
	// Action writes workflow commands and the step summary/outputs files. Build it with
	// githubactions.New(githubactions.WithWriter(stdout), githubactions.WithGetenv(getenv)).
	Action *githubactions.Action
	// HTTPClient is used for the REST API (nil: a client with a 30 s timeout). The token
	// is added by the publisher.
	HTTPClient *http.Client
	// Redactor cleans every published string.
	Redactor *hygiene.Redactor
	// ErrorConclusion is the check conclusion for a run without a verdict (error), cut
	// short by a budget, or failed on an unstable judge's word: "failure" (default) or
	// "neutral", which branch protection treats as passing.
	ErrorConclusion string
	// CheckName names the check run (default "talkops", or "talkops / <rubric>").
	CheckName string
	// BotLogin is the token's login when GET /user cannot tell (default
	// github-actions[bot]); set it when publishing with another GitHub App's token.
	BotLogin string
	// Untrusted, when set, says why the result was produced by code nobody vouched for
	// (a fork's run published by a privileged workflow_run job): the check run is never
	// a success, its title says so, and the check and comment carry the reason.
	Untrusted string
	// NoCheckRun and NoComment turn those outputs off.
	NoCheckRun, NoComment bool
	// ResultPath is the result.json path given to the result-json output.
	ResultPath string
	// SummaryPath is the summary.md path given to the summary-path output.
	SummaryPath string
}

// Publisher publishes to GitHub. Begin creates the check run; Finish completes it and
// posts everything else. A Publisher is used for one run, from one goroutine.
type Publisher struct {
	cfg    Config
	env    Env
	client *gh.Client
	owner  string
	repo   string

	checkID  int64
	checkOff string // why the check run is not used ("" = usable)
	notes    []string
}

// New returns a Publisher for the environment cfg.Getenv describes. It validates the
// configuration: a bad ErrorConclusion or GITHUB_API_URL is an error naming the value.
func New(cfg Config) (*Publisher, error) {
	if cfg.Getenv == nil {
		return nil, errors.New("github publisher: no Getenv")
	}
	if cfg.Action == nil {
		cfg.Action = githubactions.New(githubactions.WithGetenv(cfg.Getenv))
	}
	switch cfg.ErrorConclusion {
	case "":
		cfg.ErrorConclusion = DefaultErrorConclusion
	case ConclusionNeutral, ConclusionFailure:
	default:
		return nil, fmt.Errorf("github publisher: error conclusion %q: want neutral or failure", cfg.ErrorConclusion)
	}
	if cfg.BotLogin == "" {
		cfg.BotLogin = DefaultBotLogin
	}
	p := &Publisher{cfg: cfg, env: ReadEnv(cfg.Getenv)}
	p.owner, p.repo, _ = strings.Cut(p.env.Repo, "/")
	if p.env.Token != "" && p.owner != "" && p.repo != "" {
		hc := cfg.HTTPClient
		if hc == nil {
			hc = &http.Client{Timeout: 30 * time.Second}
		}
		c := gh.NewClient(hc).WithAuthToken(p.env.Token)
		if api := p.env.APIURL; api != "" && api != "https://api.github.com" {
			var err error
			if c, err = c.WithEnterpriseURLs(api, api); err != nil {
				return nil, fmt.Errorf("github publisher: GITHUB_API_URL %q: %w", api, err)
			}
		}
		p.client = c
	}
	return p, nil
}

// target is where results go: the repository of this job, the commit the check run is
// attached to and the pull request the comment goes to (0: none).
type target struct {
	sha string
	pr  int
	// readOnly says why nothing may be written ("" = writes allowed).
	readOnly string
	// verifyPR is set when the PR number comes from result.json and must be checked
	// against the API before commenting (workflow_run).
	verifyPR bool
}

// target works out the commit and pull request, trusting the event payload over
// result.json, and result.json only as far as the event confirms it.
func (p *Publisher) target(r *result.Result) target {
	var t target
	ci := r.Run.CI
	switch {
	case p.client == nil:
		t.readOnly = "GITHUB_REPOSITORY is not set"
		if p.env.Token == "" {
			t.readOnly = "there is no GITHUB_TOKEN (pass `env: GITHUB_TOKEN: ${{ github.token }}`)"
		}
		return t
	case ci != nil && ci.Repo != "" && !strings.EqualFold(ci.Repo, p.env.Repo):
		t.readOnly = fmt.Sprintf("result.json was recorded in %s, but this job runs in %s", ci.Repo, p.env.Repo)
		return t
	}
	if ro := p.env.ReadOnly(); ro != "" {
		t.readOnly = ro
		return t
	}
	if ci != nil && ci.Fork && isPREvent(p.env.EventName) && p.env.EventName != "pull_request_target" {
		t.readOnly = "the run was recorded for a pull request from a fork, whose token is read-only"
		return t
	}
	switch {
	case isPREvent(p.env.EventName):
		t.sha, t.pr = p.env.Event.HeadSHA, p.env.Event.PR
	case p.env.EventName == "workflow_run":
		wr := p.env.Event.WorkflowRun
		if wr == nil {
			t.readOnly = "the workflow_run event payload could not be read"
			return t
		}
		t.sha = wr.HeadSHA
		if ci != nil && ci.HeadSHA != "" && !strings.EqualFold(ci.HeadSHA, wr.HeadSHA) {
			t.readOnly = fmt.Sprintf("result.json was recorded for commit %s, but the workflow run that produced it built %s",
				short(ci.HeadSHA), short(wr.HeadSHA))
			return t
		}
		if ci != nil && ci.PR > 0 {
			t.pr, t.verifyPR = ci.PR, true
		} else if len(wr.PRs) == 1 {
			t.pr = wr.PRs[0]
		}
	default:
		t.sha = p.env.SHA
	}
	if !isSHA(t.sha) {
		t.sha = ""
	}
	return t
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func (p *Publisher) note(format string, args ...any) {
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

func (p *Publisher) checkName(r *result.Result) string {
	if p.cfg.CheckName != "" {
		return p.cfg.CheckName
	}
	if r.Rubric != nil && r.Rubric.Name != "" {
		return hygiene.Truncate("talkops / "+oneLine(p.cfg.Redactor.Text(r.Rubric.Name)), 100)
	}
	return "talkops"
}

// Name is "github".
func (p *Publisher) Name() string { return "github" }

// Begin creates the check run as in_progress, so the PR shows talkops running. Without a
// token, on a fork or without permission it does nothing and Finish explains why.
func (p *Publisher) Begin(ctx context.Context, r *result.Result) error {
	t := p.target(r)
	if p.cfg.NoCheckRun || t.readOnly != "" || t.sha == "" || p.checkOff != "" {
		return nil
	}
	run, _, err := p.client.Checks.CreateCheckRun(ctx, p.owner, p.repo, gh.CreateCheckRunOptions{
		Name:       p.checkName(r),
		HeadSHA:    t.sha,
		Status:     gh.String("in_progress"),
		StartedAt:  &gh.Timestamp{Time: startedAt(r)},
		DetailsURL: optional(p.env.RunURL),
		ExternalID: optional(r.Run.ID),
		Output: &gh.CheckRunOutput{
			Title:   gh.String("talkops is running"),
			Summary: gh.String("The run has started; this check completes when it has a verdict."),
		},
	})
	if err != nil {
		return p.checkFailed(err)
	}
	p.checkID = run.GetID()
	return nil
}

// checkFailed records why the check run is unusable; permission answers are a
// degradation, anything else is also an error.
func (p *Publisher) checkFailed(err error) error {
	if isPermission(err) {
		p.checkOff = "the token may not create check runs (" + status(err) + "); grant `checks: write`"
		return nil
	}
	p.checkOff = "the check run could not be written: " + oneLine(p.cfg.Redactor.Redact(err.Error()))
	return fmt.Errorf("github check run: %w", err)
}

func startedAt(r *result.Result) time.Time {
	if r.Run.StartedAt.IsZero() {
		return time.Now()
	}
	return r.Run.StartedAt
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Finish completes the check run (every located finding as an annotation, in batches of
// 50), updates or creates the sticky PR comment, and always writes the annotations that
// did not go through the check run, the step summary and the outputs. Errors are joined;
// none of them changes the verdict.
func (p *Publisher) Finish(ctx context.Context, r *result.Result) error {
	var errs []error
	t := p.target(r)
	moreAt := "the job summary and results.sarif in the report artifact"

	checked := false
	switch {
	case p.cfg.NoCheckRun:
	case t.readOnly != "":
		p.note("Check run and PR comment skipped: %s. Findings are shown as annotations (at most %d per type) and in this summary.", t.readOnly, MaxAnnotationsPerType)
	case t.sha == "":
		p.note("Check run skipped: the commit could not be determined from the event.")
	case p.checkOff != "":
		p.note("Check run skipped: %s. Findings are shown as annotations instead.", p.checkOff)
	default:
		n, err := p.finishCheck(ctx, r, t)
		switch {
		case err == nil:
			checked = true
			p.note("Check run %q completed with %d annotations.", p.checkName(r), n)
			moreAt = "the check run " + strconv.Quote(p.checkName(r)) + ", this summary and results.sarif"
		case isPermission(err):
			p.note("Check run skipped: the token may not write check runs (%s); grant `checks: write`. Findings are shown as annotations instead.", status(err))
		default:
			errs = append(errs, fmt.Errorf("github check run: %w", err))
			p.note("Check run failed (%s); findings are shown as annotations instead.", oneLine(p.cfg.Redactor.Redact(err.Error())))
			p.completeCheck(ctx, r)
		}
	}
	if !checked {
		if err := writeAnnotations(p.cfg.Action, selectAnnotations(candidates(r, p.cfg.Redactor), moreAt)); err != nil {
			errs = append(errs, err)
		}
	}

	if !p.cfg.NoComment && t.readOnly == "" && t.pr != 0 {
		if err := p.comment(ctx, r, t); err != nil {
			errs = append(errs, err)
		}
	}

	if err := p.stepSummary(r); err != nil {
		errs = append(errs, err)
	}
	if err := p.outputs(r); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// conclusion is Conclusion, except that an untrusted result is always neutral: a success
// could satisfy branch protection with a verdict its author wrote, and its verdict, in
// the title, is information rather than a gate.
func (p *Publisher) conclusion(r *result.Result) string {
	if p.cfg.Untrusted != "" {
		return ConclusionNeutral
	}
	return Conclusion(r, p.cfg.ErrorConclusion)
}

// untrustedNote is the line every check run and comment for an untrusted result carries.
func (p *Publisher) untrustedNote() []string {
	if p.cfg.Untrusted == "" {
		return nil
	}
	return []string{"This result was produced by untrusted code (" + p.cfg.Untrusted + "): it is reported, not a gate. " +
		"A maintainer-approved run gives a trusted result."}
}

// headline is the check-run title: the verdict, marked when the result is untrusted.
func (p *Publisher) headline(r *result.Result) string {
	h := render.Headline(r, p.cfg.Redactor)
	if p.cfg.Untrusted != "" {
		h = "Untrusted: " + h
	}
	return hygiene.Truncate(h, checkTitleBytes)
}

// Conclusion maps a result to a check-run conclusion: pass → success; fail → failure,
// except a partial run (budget exhausted) or a failure resting on an unstable judge,
// which get errorConclusion ("" = DefaultErrorConclusion) like a run without a verdict.
func Conclusion(r *result.Result, errorConclusion string) string {
	if errorConclusion == "" {
		errorConclusion = DefaultErrorConclusion
	}
	switch r.Verdict {
	case result.VerdictPass:
		if r.Partial {
			return errorConclusion
		}
		return "success"
	case result.VerdictFail:
		if r.Partial {
			return errorConclusion
		}
		if r.Rubric != nil {
			for _, it := range r.Rubric.Items {
				if it.Status == result.StatusFail && it.Unstable {
					return errorConclusion
				}
			}
		}
		return "failure"
	}
	return errorConclusion
}

// isPermission reports whether err is GitHub saying the token may not do this: 401, 403
// (not a rate limit, which has its own error types) or 404 (GitHub hides what a token
// cannot see).
func isPermission(err error) bool {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return true
		}
	}
	return false
}

func status(err error) string {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		s := strconv.Itoa(er.Response.StatusCode)
		if er.Message != "" {
			s += " " + strconv.Quote(hygiene.Truncate(er.Message, 120))
		}
		return s
	}
	return "error"
}

// stepSummary appends the Markdown summary to $GITHUB_STEP_SUMMARY.
func (p *Publisher) stepSummary(r *result.Result) error {
	if p.cfg.Getenv("GITHUB_STEP_SUMMARY") == "" {
		return nil
	}
	md := render.Markdown(r, render.Options{
		MaxBytes:    StepSummaryBytes,
		Redactor:    p.cfg.Redactor,
		Notes:       p.notes,
		MaxFindings: 200,
		MoreAt:      "results.sarif and result.json in the report artifact",
	})
	return safely("write step summary", func() { p.cfg.Action.AddStepSummary(md) })
}

// outputs sets the step outputs verdict, score, exit-code, result-json, summary (the
// one-line headline) and summary-path.
func (p *Publisher) outputs(r *result.Result) error {
	if p.cfg.Getenv("GITHUB_OUTPUT") == "" {
		return nil
	}
	score := ""
	if r.Score != nil {
		score = strconv.FormatFloat(*r.Score, 'f', -1, 64)
	}
	vals := [][2]string{
		{"verdict", r.Verdict},
		{"score", score},
		{"exit-code", strconv.Itoa(r.ExitCode)},
		{"result-json", p.cfg.ResultPath},
		{"summary", render.Headline(r, p.cfg.Redactor)},
		{"summary-path", p.cfg.SummaryPath},
	}
	return safely("write outputs", func() {
		for _, kv := range vals {
			p.cfg.Action.SetOutput(kv[0], outputValue(kv[1]))
		}
	})
}
