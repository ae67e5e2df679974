package github

import (
	"context"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// CommentBytes keeps the sticky comment under GitHub's 65,536-character body limit with
// room to spare.
const CommentBytes = 60000

// maxCommentPages bounds the search for our comment (100 comments a page).
const maxCommentPages = 30

// comment creates the sticky PR comment, or updates ours in place. A comment is ours
// only if it starts with our marker and its author is the token's identity: anyone can
// paste the marker into their own comment, and we never edit theirs.
func (p *Publisher) comment(ctx context.Context, r *result.Result, t target) error {
	if t.verifyPR {
		pr, _, err := p.client.PullRequests.Get(ctx, p.owner, p.repo, t.pr)
		if err != nil {
			if isPermission(err) {
				p.note("PR comment skipped: pull request #%d could not be read (%s).", t.pr, status(err))
				return nil
			}
			return fmt.Errorf("github comment: read pull request #%d: %w", t.pr, err)
		}
		if head := pr.GetHead().GetSHA(); !strings.EqualFold(head, t.sha) {
			p.note("PR comment skipped: result.json names pull request #%d, whose head is %s, not the commit %s that was run.",
				t.pr, short(head), short(t.sha))
			return nil
		}
	}
	me, err := p.login(ctx)
	if err != nil {
		return p.commentFailed(err)
	}
	marker := render.Marker(r)
	body := render.Markdown(r, render.Options{
		MaxBytes:    CommentBytes,
		Redactor:    p.cfg.Redactor,
		Marker:      marker,
		MaxFindings: 30,
		Notes:       p.untrustedNote(),
		MoreAt:      "the job summary and the report artifact",
	})
	var existing *gh.IssueComment
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for page := 0; page < maxCommentPages && existing == nil; page++ {
		cs, resp, err := p.client.Issues.ListComments(ctx, p.owner, p.repo, t.pr, opts)
		if err != nil {
			return p.commentFailed(err)
		}
		for _, c := range cs {
			if strings.EqualFold(c.GetUser().GetLogin(), me) && strings.HasPrefix(c.GetBody(), marker) {
				existing = c
				break
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if existing != nil {
		if existing.GetBody() == body {
			p.note("PR comment on #%d is up to date.", t.pr)
			return nil
		}
		if _, _, err := p.client.Issues.EditComment(ctx, p.owner, p.repo, existing.GetID(), &gh.IssueComment{Body: gh.String(body)}); err != nil {
			return p.commentFailed(err)
		}
		p.note("PR comment on #%d updated.", t.pr)
		return nil
	}
	if _, _, err := p.client.Issues.CreateComment(ctx, p.owner, p.repo, t.pr, &gh.IssueComment{Body: gh.String(body)}); err != nil {
		return p.commentFailed(err)
	}
	p.note("PR comment on #%d created.", t.pr)
	return nil
}

func (p *Publisher) commentFailed(err error) error {
	if isPermission(err) {
		p.note("PR comment skipped: the token may not comment (%s); grant `pull-requests: write` and `issues: write`.", status(err))
		return nil
	}
	p.note("PR comment failed: %s.", oneLine(p.cfg.Redactor.Redact(err.Error())))
	return fmt.Errorf("github comment: %w", err)
}

// login returns the token's login. An installation token (the Actions GITHUB_TOKEN, a
// GitHub App) may not call GET /user; it comments as BotLogin.
func (p *Publisher) login(ctx context.Context) (string, error) {
	u, _, err := p.client.Users.Get(ctx, "")
	switch {
	case err == nil && u.GetLogin() != "":
		return u.GetLogin(), nil
	case err == nil || isPermission(err):
		return p.cfg.BotLogin, nil
	}
	return "", err
}
