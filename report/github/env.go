package github

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/talkops/talkops/internal/fileread"
	"github.com/talkops/talkops/result"
)

// Env is what the publisher reads from the GitHub Actions environment and the event
// payload at GITHUB_EVENT_PATH.
type Env struct {
	Actions   bool   // GITHUB_ACTIONS=true
	Token     string // GITHUB_TOKEN
	APIURL    string // GITHUB_API_URL (GHES: https://host/api/v3)
	ServerURL string // GITHUB_SERVER_URL
	Repo      string // GITHUB_REPOSITORY, owner/name
	EventName string // GITHUB_EVENT_NAME
	SHA       string // GITHUB_SHA (the merge commit on pull_request)
	Actor     string // GITHUB_ACTOR
	RunURL    string // link to this workflow run
	Event     Event
	// EventErr says why the payload could not be read, if it could not.
	EventErr error
}

// Event is the part of the event payload the publisher needs.
type Event struct {
	PR       int    // pull_request.number
	HeadSHA  string // pull_request.head.sha: the PR's commit, not the merge commit
	HeadRepo string // pull_request.head.repo.full_name ("" when the fork was deleted)
	BaseRepo string // pull_request.base.repo.full_name
	// WorkflowRun is set for workflow_run events.
	WorkflowRun *WorkflowRun
}

// WorkflowRun is the run that triggered a workflow_run event.
type WorkflowRun struct {
	HeadSHA  string
	Event    string // the triggering run's event, e.g. pull_request
	HeadRepo string
	Repo     string // the repository the run belongs to (workflow_run.repository)
	PRs      []int  // empty for pull requests from forks
}

type payload struct {
	PullRequest *struct {
		Number int `json:"number"`
		Head   struct {
			SHA  string `json:"sha"`
			Repo *struct {
				FullName string `json:"full_name"`
			} `json:"repo"`
		} `json:"head"`
		Base struct {
			Repo struct {
				FullName string `json:"full_name"`
			} `json:"repo"`
		} `json:"base"`
	} `json:"pull_request"`
	WorkflowRun *struct {
		HeadSHA        string `json:"head_sha"`
		Event          string `json:"event"`
		HeadRepository *struct {
			FullName string `json:"full_name"`
		} `json:"head_repository"`
		Repository *struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
		PullRequests []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
	} `json:"workflow_run"`
}

// maxEventBytes bounds the event payload we read (GitHub's are far smaller).
const maxEventBytes = 25 << 20

// ReadEnv reads the Actions environment through getenv.
func ReadEnv(getenv func(string) string) Env {
	e := Env{
		Actions:   getenv("GITHUB_ACTIONS") == "true",
		Token:     getenv("GITHUB_TOKEN"),
		APIURL:    strings.TrimRight(getenv("GITHUB_API_URL"), "/"),
		ServerURL: strings.TrimRight(getenv("GITHUB_SERVER_URL"), "/"),
		Repo:      getenv("GITHUB_REPOSITORY"),
		EventName: getenv("GITHUB_EVENT_NAME"),
		SHA:       getenv("GITHUB_SHA"),
		Actor:     getenv("GITHUB_ACTOR"),
	}
	if e.ServerURL == "" {
		e.ServerURL = "https://github.com"
	}
	if id := getenv("GITHUB_RUN_ID"); id != "" && e.Repo != "" {
		e.RunURL = e.ServerURL + "/" + e.Repo + "/actions/runs/" + id
	}
	if p := getenv("GITHUB_EVENT_PATH"); p != "" {
		e.Event, e.EventErr = readEvent(p)
	}
	return e
}

func readEvent(path string) (Event, error) {
	data, err := fileread.Read(path, maxEventBytes)
	if err != nil {
		return Event{}, fmt.Errorf("read event payload: %w", err)
	}
	var p payload
	if err := json.Unmarshal(data, &p); err != nil {
		return Event{}, fmt.Errorf("read event payload %s: %w", path, err)
	}
	var ev Event
	if pr := p.PullRequest; pr != nil {
		ev.PR = pr.Number
		ev.HeadSHA = pr.Head.SHA
		if pr.Head.Repo != nil {
			ev.HeadRepo = pr.Head.Repo.FullName
		}
		ev.BaseRepo = pr.Base.Repo.FullName
	}
	if wr := p.WorkflowRun; wr != nil {
		ev.WorkflowRun = &WorkflowRun{HeadSHA: wr.HeadSHA, Event: wr.Event}
		if wr.HeadRepository != nil {
			ev.WorkflowRun.HeadRepo = wr.HeadRepository.FullName
		}
		if wr.Repository != nil {
			ev.WorkflowRun.Repo = wr.Repository.FullName
		}
		for _, pr := range wr.PullRequests {
			ev.WorkflowRun.PRs = append(ev.WorkflowRun.PRs, pr.Number)
		}
	}
	return ev, nil
}

// isPREvent reports whether the event carries a pull_request payload.
func isPREvent(name string) bool {
	switch name {
	case "pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment":
		return true
	}
	return false
}

// Fork reports whether the event is a pull request from another repository (or from a
// deleted fork). Its token is read-only unless the event is pull_request_target.
func (e Env) Fork() bool {
	if !isPREvent(e.EventName) || e.Event.PR == 0 {
		return false
	}
	return e.Event.HeadRepo == "" || !strings.EqualFold(e.Event.HeadRepo, e.Event.BaseRepo)
}

// UntrustedRun says why a workflow_run job publishes the result of code nobody vouched
// for: the triggering run's head is in another repository (a fork, or a deleted one).
// "" when the payload shows the run's head in this repository, or this is no
// workflow_run.
func (e Env) UntrustedRun() string {
	wr := e.Event.WorkflowRun
	if e.EventName != "workflow_run" || wr == nil {
		return ""
	}
	base := wr.Repo
	if base == "" {
		base = e.Repo
	}
	switch {
	case wr.HeadRepo == "":
		return "the triggering run's head repository is unknown or deleted"
	case !strings.EqualFold(wr.HeadRepo, base):
		return "the triggering run came from the fork " + wr.HeadRepo
	}
	return ""
}

// ReadOnly says why the token cannot write, or "" when it may. Only what the environment
// shows is used here; 403/404 answers are handled where they happen.
func (e Env) ReadOnly() string {
	if e.EventName == "pull_request_target" || e.EventName == "workflow_run" {
		return ""
	}
	if e.Fork() {
		return "this pull request comes from a fork, so its token is read-only"
	}
	if isPREvent(e.EventName) && strings.EqualFold(e.Actor, "dependabot[bot]") {
		return "Dependabot pull requests get a read-only token"
	}
	return ""
}

// CI describes the run's CI context for result.json: the repository, event, pull request,
// the PR's head commit (not the merge commit) and fork status. A later publishing job
// (talkops report --from, in a workflow_run) takes the PR and commit from here.
func CI(getenv func(string) string) *result.CI {
	e := ReadEnv(getenv)
	if !e.Actions {
		return nil
	}
	ci := &result.CI{Provider: "github", Repo: e.Repo, Event: e.EventName, Fork: e.Fork()}
	switch {
	case isPREvent(e.EventName) && e.Event.PR > 0:
		ci.PR, ci.HeadSHA = e.Event.PR, e.Event.HeadSHA
	case e.EventName == "workflow_run" && e.Event.WorkflowRun != nil:
		ci.HeadSHA = e.Event.WorkflowRun.HeadSHA
		if len(e.Event.WorkflowRun.PRs) == 1 {
			ci.PR = e.Event.WorkflowRun.PRs[0]
		}
	default:
		ci.HeadSHA = e.SHA
	}
	if !isSHA(ci.HeadSHA) {
		ci.HeadSHA = ""
	}
	return ci
}

func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
