// Package report publishes a run's verdict where people look. result.json is its only
// input: from it, it derives summary.md, junit.xml, gl-code-quality-report.json,
// results.sarif and findings.rdjsonl, and it publishes to GitHub (report/github) and
// GitLab (report/gitlab) when the environment says it runs there.
package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sethvargo/go-githubactions"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/report/github"
	"github.com/talkops/talkops/report/gitlab"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// Options configure the publishers.
type Options struct {
	// Dir is the report directory the derived files are written to.
	Dir string
	// Getenv reads the environment (os.Getenv in production); it decides which
	// publishers run.
	Getenv func(string) string
	// Environ lists the environment as KEY=value (os.Environ in production); variables
	// whose names end like a credential's are redacted.
	Environ func() []string
	// Stdout receives GitHub workflow commands and GitLab log lines.
	Stdout io.Writer
	// Secrets are redacted from everything published (token shapes always are).
	Secrets []string
	// HTTPClient is used for the GitHub and GitLab APIs (nil: 30 s timeout).
	HTTPClient *http.Client
	// ErrorConclusion is the check-run conclusion when there is no verdict, a budget ran
	// out or a fail rests on an unstable judge: "failure" (default) or "neutral", which
	// branch protection treats as passing (see github.Config.ErrorConclusion).
	ErrorConclusion string
	// ResultPath is the result.json path reported in outputs (default Dir/result.json).
	ResultPath string
	// NoCheckRun and NoComment turn off the GitHub check run and the sticky PR comment
	// (and the GitLab note).
	NoCheckRun, NoComment bool
	// CheckName names the GitHub check run ("" keeps the publisher's default).
	CheckName string
	// Untrusted says why the result comes from code nobody vouched for; see
	// github.Config.Untrusted.
	Untrusted string
	// Sink, if set, receives a Warning event for every publisher error.
	Sink events.Sink
}

// Validate reports a bad option, naming it and what is valid.
func (o Options) Validate() error {
	switch o.ErrorConclusion {
	case "", github.ConclusionNeutral, github.ConclusionFailure:
	default:
		return fmt.Errorf("error conclusion %q: want neutral or failure", o.ErrorConclusion)
	}
	if o.Dir == "" {
		return errors.New("report options: no report directory")
	}
	return nil
}

func (o Options) getenv(k string) string {
	if o.Getenv == nil {
		return os.Getenv(k)
	}
	return o.Getenv(k)
}

func (o Options) environ() []string {
	if o.Environ == nil {
		return os.Environ()
	}
	return o.Environ()
}

// secrets is Secrets plus the credentials found in the environment.
func (o Options) secrets() []string {
	return append(slices.Clone(o.Secrets), SecretsFromEnv(o.getenv, o.environ)...)
}

func (o Options) stdout() io.Writer {
	if o.Stdout == nil {
		return io.Discard
	}
	return o.Stdout
}

func (o Options) action() *githubactions.Action {
	return githubactions.New(githubactions.WithWriter(o.stdout()), githubactions.WithGetenv(o.getenv))
}

// Detect returns the publishers for this environment, in order: the derived files
// always, GitHub when GITHUB_ACTIONS=true, GitLab when GITLAB_CI=true. A publisher that
// cannot be built (bad option) is replaced by one that returns the error.
func Detect(opts Options) []runner.Publisher {
	red := hygiene.NewRedactor(opts.secrets()...)
	pubs := []runner.Publisher{&files{dir: opts.Dir, opts: opts}}
	if opts.getenv("GITHUB_ACTIONS") == "true" {
		resultPath := opts.ResultPath
		if resultPath == "" {
			resultPath = filepath.Join(opts.Dir, "result.json")
		}
		p, err := github.New(github.Config{
			Getenv:          opts.getenv,
			Action:          opts.action(),
			HTTPClient:      opts.HTTPClient,
			Redactor:        red,
			ErrorConclusion: opts.ErrorConclusion,
			BotLogin:        opts.getenv("TALKOPS_GITHUB_BOT_LOGIN"),
			CheckName:       opts.CheckName,
			Untrusted:       opts.Untrusted,
			NoCheckRun:      opts.NoCheckRun,
			NoComment:       opts.NoComment,
			ResultPath:      resultPath,
			SummaryPath:     filepath.Join(opts.Dir, SummaryFile),
		})
		pubs = append(pubs, orFailing("github", p, err))
	}
	if opts.getenv("GITLAB_CI") == "true" {
		p, err := gitlab.New(gitlab.Config{
			Getenv:     opts.getenv,
			HTTPClient: opts.HTTPClient,
			Redactor:   red,
			Log:        opts.stdout(),
			NoNote:     opts.NoComment,
		})
		pubs = append(pubs, orFailing("gitlab", p, err))
	}
	if opts.Sink != nil {
		for i, p := range pubs {
			pubs[i] = &warning{Publisher: p, sink: opts.Sink}
		}
	}
	return pubs
}

func orFailing(name string, p runner.Publisher, err error) runner.Publisher {
	if err != nil {
		return failing{name, err}
	}
	return p
}

type failing struct {
	name string
	err  error
}

func (f failing) Name() string                                 { return f.name }
func (f failing) Begin(context.Context, *result.Result) error  { return f.err }
func (f failing) Finish(context.Context, *result.Result) error { return f.err }

// warning emits a Warning event for each error of the publisher it wraps.
type warning struct {
	runner.Publisher
	sink events.Sink
}

func (w *warning) Begin(ctx context.Context, r *result.Result) error {
	return w.emit(w.Publisher.Begin(ctx, r))
}

func (w *warning) Finish(ctx context.Context, r *result.Result) error {
	return w.emit(w.Publisher.Finish(ctx, r))
}

func (w *warning) emit(err error) error {
	if err != nil {
		w.sink.Emit(events.Event{Type: events.Warning, Stage: result.StageReport, Message: w.Name() + ": " + err.Error()})
	}
	return err
}

// files writes the derived files in Finish.
type files struct {
	dir  string
	opts Options // for the secrets, read when the files are written
}

func (f *files) Name() string                                { return "files" }
func (f *files) Begin(context.Context, *result.Result) error { return nil }

func (f *files) Finish(_ context.Context, r *result.Result) error {
	_, err := WriteFiles(f.dir, r, f.opts.secrets()...)
	return err
}

// Multi runs several publishers in order and joins their errors; one failing does not
// stop the others.
func Multi(pubs ...runner.Publisher) runner.Publisher { return multi(pubs) }

type multi []runner.Publisher

func (m multi) Name() string {
	names := make([]string, len(m))
	for i, p := range m {
		names[i] = p.Name()
	}
	return strings.Join(names, "+")
}

func (m multi) Begin(ctx context.Context, r *result.Result) error {
	var errs []error
	for _, p := range m {
		errs = append(errs, p.Begin(ctx, r))
	}
	return errors.Join(errs...)
}

func (m multi) Finish(ctx context.Context, r *result.Result) error {
	var errs []error
	for _, p := range m {
		errs = append(errs, p.Finish(ctx, r))
	}
	return errors.Join(errs...)
}

// MaskSecrets registers the secrets (and the token values in the environment) with
// GitHub's log masking (::add-mask::). Call it first thing in a run; outside GitHub
// Actions it does nothing.
func MaskSecrets(opts Options) error {
	if opts.getenv("GITHUB_ACTIONS") != "true" {
		return nil
	}
	return github.AddMasks(opts.action(), opts.secrets())
}

// Sink returns the event view for CI logs: GitHub ::group:: folding per stage in
// Actions, nothing elsewhere.
func Sink(opts Options) events.Sink {
	if opts.getenv("GITHUB_ACTIONS") != "true" {
		return events.Discard
	}
	return github.GroupSink(opts.action(), opts.secrets()...)
}

// CI describes the CI context for result.json's run.ci: GitHub (PR head commit from the
// event payload, fork status), GitLab (merge request), Jenkins (CHANGE_ID, GIT_COMMIT), or
// nil when none is detected.
func CI(getenv func(string) string) *result.CI {
	if ci := github.CI(getenv); ci != nil {
		return ci
	}
	if ci := gitlab.CI(getenv); ci != nil {
		return ci
	}
	if getenv("JENKINS_URL") != "" {
		ci := &result.CI{Provider: "jenkins", Repo: getenv("JOB_NAME")}
		if n, err := parsePositive(getenv("CHANGE_ID")); err == nil {
			ci.PR, ci.Event = n, "change"
		}
		if sha := strings.ToLower(getenv("GIT_COMMIT")); len(sha) == 40 || len(sha) == 64 {
			ci.HeadSHA = sha
		}
		return ci
	}
	return nil
}

func parsePositive(s string) (int, error) {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("not a positive number: %q", s)
	}
	return n, nil
}

// secretSuffixes name environment variables whose values are credentials.
var secretSuffixes = []string{"_TOKEN", "_API_KEY", "_SECRET", "_SECRET_KEY", "_PASSWORD", "_ACCESS_KEY"}

// RedactEnv is the environment variable listing more variables (comma-separated) whose
// values are secrets; [redact] env in config.toml adds to it.
const RedactEnv = "TALKOPS_REDACT"

// SecretsFromEnv returns the values of well-known credential variables in the
// environment (GITHUB_TOKEN, TALKOPS_GITLAB_TOKEN, ANTHROPIC_API_KEY, …), of the
// variables TALKOPS_REDACT names, and of the variables in names ([redact] env, and every
// variable passed into the sandbox), so they are redacted even when their name does
// not look like a credential. environ lists the environment (KEY=value, as os.Environ)
// to find the variables whose names end like a credential's (_TOKEN, _API_KEY, …).
func SecretsFromEnv(getenv func(string) string, environ func() []string, names ...string) []string {
	names = append(slices.Clone(names),
		"GITHUB_TOKEN", "GH_TOKEN", "TALKOPS_GITLAB_TOKEN", "GITLAB_TOKEN", "CI_JOB_TOKEN",
		"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TALKOPS_API_KEY", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
	)
	for n := range strings.SplitSeq(getenv(RedactEnv), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	for _, kv := range environ() {
		name, _, _ := strings.Cut(kv, "=")
		for _, s := range secretSuffixes {
			if strings.HasSuffix(name, s) && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	var out []string
	for _, n := range names {
		if v := getenv(n); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// PublishFrom reads and validates result.json at path and publishes it with every
// detected publisher, without running anything: this is `talkops report --from`. An
// invalid result.json (or one with keys talkops does not write) is an error wrapping
// result.ErrInvalid and nothing is published.
//
// The file comes from an artifact its run could write, so nothing in it is taken on
// trust: the verdict, score and exit code are recomputed (Recompute), the check run is
// named by opts (DefaultCheckName), and a result from a fork is published as untrusted.
// A trusted result recorded with --advisory gets its exit code mapped as the run's was.
func PublishFrom(ctx context.Context, path string, opts Options) (*result.Result, error) {
	r, err := readArtifact(path)
	if err != nil {
		return nil, err
	}
	Recompute(r)
	if opts.CheckName == "" {
		opts.CheckName = DefaultCheckName
	}
	if opts.Untrusted == "" {
		opts.Untrusted = github.ReadEnv(opts.getenv).UntrustedRun()
	}
	if opts.Untrusted == "" && r.Run.CI != nil && r.Run.CI.Fork {
		opts.Untrusted = "result.json was recorded for a pull request from a fork"
	}
	if opts.Untrusted == "" {
		// The run exited as --advisory said; an untrusted artifact could claim the mode
		// to turn its own error into exit 0, so only a trusted one keeps it.
		r.ExitCode = runner.AdvisoryExitCode(r.ExitCode, r.Advisory)
	}
	if opts.ResultPath == "" {
		opts.ResultPath = path
	}
	if err := opts.Validate(); err != nil {
		return r, err
	}
	p := Multi(Detect(opts)...)
	return r, errors.Join(p.Begin(ctx, r), p.Finish(ctx, r))
}
