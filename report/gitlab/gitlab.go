// Package gitlab publishes a talkops result to a GitLab merge request as one note that
// is updated in place on every run (through gitlab.com/gitlab-org/api/client-go). The
// Code Quality and JUnit files it relies on are written by package report.
package gitlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// NoteBytes caps the note body; GitLab allows about 1,000,000 characters, but a note
// longer than this is not read anyway, and the full data is in the artifacts.
const NoteBytes = 200_000

// maxNotePages bounds the search for our note (100 notes a page; GitLab allows 5,000
// notes per merge request).
const maxNotePages = 50

// Config configures a Publisher.
type Config struct {
	// Getenv reads the environment (os.Getenv in production).
	Getenv func(string) string
	// HTTPClient is used for the API (nil: a client with a 30 s timeout).
	HTTPClient *http.Client
	// Redactor cleans every published string.
	Redactor *hygiene.Redactor
	// Log receives one line per decision (note created, updated, skipped and why).
	Log io.Writer
	// NoNote turns the merge-request note off.
	NoNote bool
}

// Env is what the publisher reads from GitLab CI's predefined variables.
type Env struct {
	CI        bool   // GITLAB_CI=true
	Token     string // TALKOPS_GITLAB_TOKEN, else GITLAB_TOKEN (CI_JOB_TOKEN cannot write notes)
	APIURL    string // CI_API_V4_URL
	ProjectID string // CI_MERGE_REQUEST_PROJECT_ID, else CI_PROJECT_ID
	Project   string // CI_PROJECT_PATH
	MRIID     int64  // CI_MERGE_REQUEST_IID
	SourceID  string // CI_MERGE_REQUEST_SOURCE_PROJECT_ID
	SHA       string // CI_MERGE_REQUEST_SOURCE_BRANCH_SHA, else CI_COMMIT_SHA
	Event     string // CI_PIPELINE_SOURCE
}

// ReadEnv reads GitLab CI's variables through getenv.
func ReadEnv(getenv func(string) string) Env {
	e := Env{
		CI:        getenv("GITLAB_CI") == "true",
		Token:     getenv("TALKOPS_GITLAB_TOKEN"),
		APIURL:    strings.TrimRight(getenv("CI_API_V4_URL"), "/"),
		ProjectID: getenv("CI_MERGE_REQUEST_PROJECT_ID"),
		Project:   getenv("CI_PROJECT_PATH"),
		SourceID:  getenv("CI_MERGE_REQUEST_SOURCE_PROJECT_ID"),
		SHA:       getenv("CI_MERGE_REQUEST_SOURCE_BRANCH_SHA"),
		Event:     getenv("CI_PIPELINE_SOURCE"),
	}
	if e.Token == "" {
		e.Token = getenv("GITLAB_TOKEN")
	}
	if e.ProjectID == "" {
		e.ProjectID = getenv("CI_PROJECT_ID")
	}
	if e.SHA == "" {
		e.SHA = getenv("CI_COMMIT_SHA")
	}
	e.MRIID, _ = strconv.ParseInt(getenv("CI_MERGE_REQUEST_IID"), 10, 64)
	return e
}

// Fork reports whether the merge request comes from another project.
func (e Env) Fork() bool {
	return e.MRIID > 0 && e.SourceID != "" && e.SourceID != e.ProjectID
}

// CI describes the run's CI context for result.json, or nil outside GitLab CI.
func CI(getenv func(string) string) *result.CI {
	e := ReadEnv(getenv)
	if !e.CI {
		return nil
	}
	ci := &result.CI{Provider: "gitlab", Repo: e.Project, Event: e.Event, PR: int(e.MRIID), Fork: e.Fork()}
	if len(e.SHA) == 40 || len(e.SHA) == 64 {
		ci.HeadSHA = strings.ToLower(e.SHA)
	}
	return ci
}

// Publisher writes the merge-request note.
type Publisher struct {
	cfg    Config
	env    Env
	client *gl.Client
}

// New returns a Publisher for the environment cfg.Getenv describes.
func New(cfg Config) (*Publisher, error) {
	if cfg.Getenv == nil {
		return nil, errors.New("gitlab publisher: no Getenv")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	p := &Publisher{cfg: cfg, env: ReadEnv(cfg.Getenv)}
	if p.env.Token == "" || p.env.APIURL == "" {
		return p, nil
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	c, err := gl.NewClient(p.env.Token,
		gl.WithBaseURL(p.env.APIURL),
		gl.WithHTTPClient(hc),
		gl.WithCustomRetryMax(2),
		gl.WithURLWarningLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	if err != nil {
		return nil, fmt.Errorf("gitlab publisher: CI_API_V4_URL %q: %w", p.env.APIURL, err)
	}
	p.client = c
	return p, nil
}

func (p *Publisher) logf(format string, args ...any) {
	fmt.Fprintf(p.cfg.Log, "talkops: gitlab: "+format+"\n", args...)
}

// Name is "gitlab".
func (p *Publisher) Name() string { return "gitlab" }

// Begin does nothing: GitLab has no in-progress state worth a request.
func (p *Publisher) Begin(context.Context, *result.Result) error { return nil }

// Finish creates the merge-request note or updates ours in place. A note is ours only if
// it starts with our marker and its author is the token's user. Missing token, no merge
// request, a fork or a 401/403/404 skip the note with a log line, not an error.
func (p *Publisher) Finish(ctx context.Context, r *result.Result) error {
	switch {
	case p.cfg.NoNote:
		return nil
	case p.env.MRIID == 0:
		p.logf("no merge request (CI_MERGE_REQUEST_IID is not set): note skipped; Code Quality and JUnit reports are in the report directory")
		return nil
	case p.client == nil:
		p.logf("merge request note skipped: set TALKOPS_GITLAB_TOKEN (a project access token with the api scope; CI_JOB_TOKEN cannot write notes)")
		return nil
	case r.Run.CI != nil && r.Run.CI.Provider == "gitlab" && r.Run.CI.Repo != "" && p.env.Project != "" &&
		!strings.EqualFold(r.Run.CI.Repo, p.env.Project):
		p.logf("merge request note skipped: result.json was recorded in %s, but this job runs in %s", r.Run.CI.Repo, p.env.Project)
		return nil
	}
	opt := gl.WithContext(ctx)
	me, _, err := p.client.Users.CurrentUser(opt)
	if err != nil {
		return p.failed("read the token's user", err)
	}
	marker := render.Marker(r)
	body := render.Markdown(r, render.Options{
		MaxBytes:    NoteBytes,
		Redactor:    p.cfg.Redactor,
		Marker:      marker,
		MaxFindings: 100,
		MoreAt:      "the job's Code Quality and test reports and the report artifact",
	})
	var existing *gl.Note
	list := &gl.ListMergeRequestNotesOptions{ListOptions: gl.ListOptions{PerPage: 100, Page: 1}}
	for page := 0; page < maxNotePages && existing == nil; page++ {
		notes, resp, err := p.client.Notes.ListMergeRequestNotes(p.env.ProjectID, p.env.MRIID, list, opt)
		if err != nil {
			return p.failed("list merge request notes", err)
		}
		for _, n := range notes {
			if !n.System && n.Author.ID == me.ID && strings.HasPrefix(n.Body, marker) {
				existing = n
				break
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		list.Page = resp.NextPage
	}
	if existing != nil {
		if existing.Body == body {
			p.logf("merge request !%d note is up to date", p.env.MRIID)
			return nil
		}
		if _, _, err := p.client.Notes.UpdateMergeRequestNote(p.env.ProjectID, p.env.MRIID, existing.ID,
			&gl.UpdateMergeRequestNoteOptions{Body: &body}, opt); err != nil {
			return p.failed("update the merge request note", err)
		}
		p.logf("merge request !%d note updated", p.env.MRIID)
		return nil
	}
	if _, _, err := p.client.Notes.CreateMergeRequestNote(p.env.ProjectID, p.env.MRIID,
		&gl.CreateMergeRequestNoteOptions{Body: &body}, opt); err != nil {
		return p.failed("create the merge request note", err)
	}
	p.logf("merge request !%d note created", p.env.MRIID)
	return nil
}

// failed turns permission answers into a logged skip and anything else into an error.
func (p *Publisher) failed(what string, err error) error {
	if isPermission(err) {
		hint := "the token needs the api scope and at least Reporter access to the project"
		if p.env.Fork() {
			hint = "this merge request comes from a fork, whose pipeline cannot write to the parent project"
		}
		p.logf("merge request note skipped: could not %s (%s); %s", what, p.cfg.Redactor.Redact(err.Error()), hint)
		return nil
	}
	return fmt.Errorf("gitlab: %s: %w", what, err)
}

func isPermission(err error) bool {
	if errors.Is(err, gl.ErrNotFound) {
		return true
	}
	var er *gl.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode == http.StatusUnauthorized || er.Response.StatusCode == http.StatusForbidden
	}
	return false
}
