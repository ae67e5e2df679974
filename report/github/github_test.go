package github

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sethvargo/go-githubactions"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

const (
	testToken = "ghs_0123456789abcdefghijklmnopqrstuvwxyz"
	headSHA   = "1111111111111111111111111111111111111111"
	mergeSHA  = "2222222222222222222222222222222222222222"
	otherSHA  = "3333333333333333333333333333333333333333"
	secret    = "hunter2-super-secret"
)

type harness struct {
	fake   *fakeGitHub
	env    map[string]string
	stdout *bytes.Buffer
	dir    string
}

func prPayload(fork bool) map[string]any {
	head := "acme/infra"
	if fork {
		head = "mallory/infra"
	}
	return map[string]any{"pull_request": map[string]any{
		"number": 42,
		"head":   map[string]any{"sha": headSHA, "repo": map[string]any{"full_name": head}},
		"base":   map[string]any{"repo": map[string]any{"full_name": "acme/infra"}},
	}}
}

func newHarness(t *testing.T, event string, payload any) *harness {
	t.Helper()
	h := &harness{fake: newFakeGitHub(t), stdout: &bytes.Buffer{}, dir: t.TempDir()}
	eventPath := filepath.Join(h.dir, "event.json")
	data, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(eventPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	h.env = map[string]string{
		"GITHUB_ACTIONS":      "true",
		"GITHUB_TOKEN":        testToken,
		"GITHUB_API_URL":      h.fake.apiURL(),
		"GITHUB_SERVER_URL":   "https://ghes.example.com",
		"GITHUB_REPOSITORY":   "acme/infra",
		"GITHUB_EVENT_NAME":   event,
		"GITHUB_EVENT_PATH":   eventPath,
		"GITHUB_SHA":          mergeSHA,
		"GITHUB_RUN_ID":       "777",
		"GITHUB_ACTOR":        "alice",
		"GITHUB_OUTPUT":       filepath.Join(h.dir, "output"),
		"GITHUB_STEP_SUMMARY": filepath.Join(h.dir, "summary"),
	}
	return h
}

func (h *harness) getenv(k string) string { return h.env[k] }

func (h *harness) publisher(t *testing.T, edit func(*Config)) *Publisher {
	t.Helper()
	cfg := Config{
		Getenv:      h.getenv,
		Action:      githubactions.New(githubactions.WithWriter(h.stdout), githubactions.WithGetenv(h.getenv)),
		Redactor:    hygiene.NewRedactor(secret, testToken),
		ResultPath:  "talkops/result.json",
		SummaryPath: "talkops/summary.md",
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return p
}

// publish runs Begin and Finish like the runner does and fails on an error.
func (h *harness) publish(t *testing.T, p *Publisher, r *result.Result) {
	t.Helper()
	if err := p.Begin(t.Context(), r); err != nil {
		t.Fatalf("Begin() = %v", err)
	}
	if err := p.Finish(t.Context(), r); err != nil {
		t.Fatalf("Finish() = %v", err)
	}
}

func (h *harness) summary(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(h.env["GITHUB_STEP_SUMMARY"])
	if err != nil {
		t.Fatalf("read step summary: %v", err)
	}
	return string(data)
}

var heredoc = regexp.MustCompile(`(?m)^([a-z-]+)<<` + outputDelimiter + `\n(.*)\n` + outputDelimiter + `$`)

func (h *harness) outputs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(h.env["GITHUB_OUTPUT"])
	if err != nil {
		t.Fatalf("read outputs: %v", err)
	}
	out := map[string]string{}
	for _, m := range heredoc.FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// annotationLines returns the workflow-command annotations written to stdout.
func (h *harness) annotationLines() []string {
	var out []string
	for l := range strings.Lines(h.stdout.String()) {
		if strings.HasPrefix(l, "::error") || strings.HasPrefix(l, "::warning") || strings.HasPrefix(l, "::notice") {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// makeResult builds a failing result with the given numbers of located error and warning
// findings, recorded for PR 42 at headSHA.
func makeResult(errs, warns int) *result.Result {
	r := &result.Result{
		Schema:  result.Schema,
		Run:     result.Run{ID: "run-1", Version: "0.3.0", StartedAt: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC), DurationMS: 1000, CI: &result.CI{Provider: "github", Repo: "acme/infra", Event: "pull_request", PR: 42, HeadSHA: headSHA}},
		Verdict: result.VerdictFail, Score: ptr(0.4), ExitCode: 1, Reason: "required check failed",
		Rubric: &result.Rubric{Name: "infra-secure", PassThreshold: 0.8, Status: "failed",
			Counts: result.Counts{Pass: 1, Fail: 1},
			Items: []result.Item{
				{ID: "validate", Kind: "check", Required: true, Weight: 1, Status: "pass", Score: ptr(1.0)},
				{ID: "no-open-ingress", Kind: "check", Required: true, Weight: 1, Status: "fail", Score: ptr(0.0), Reason: "open ingress"},
			}},
	}
	for i := range errs {
		r.Findings = append(r.Findings, result.Finding{Path: fmt.Sprintf("infra/e%03d.tf", i), StartLine: i + 1,
			Severity: "error", Rule: "talkops/e", Message: fmt.Sprintf("error %d", i), Source: "agent", Fingerprint: fmt.Sprintf("e%d", i)})
	}
	for i := range warns {
		r.Findings = append(r.Findings, result.Finding{Path: fmt.Sprintf("infra/w%03d.tf", i), StartLine: i + 1,
			Severity: "warning", Message: fmt.Sprintf("warning %d", i), Source: "agent", Fingerprint: fmt.Sprintf("w%d", i)})
	}
	return r
}

func TestCheckRunLifecycleAndBatching(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	p := h.publisher(t, nil)
	r := makeResult(100, 37)

	if err := p.Begin(t.Context(), r); err != nil {
		t.Fatalf("Begin() = %v", err)
	}
	c := h.fake.onlyCheck()
	if c.Status != "in_progress" || c.HeadSHA != headSHA || c.Name != "talkops / infra-secure" {
		t.Fatalf("after Begin: status %q, sha %q, name %q; want in_progress on the PR head (not the merge commit)", c.Status, c.HeadSHA, c.Name)
	}
	if err := p.Finish(t.Context(), r); err != nil {
		t.Fatalf("Finish() = %v", err)
	}
	c = h.fake.onlyCheck()
	if diff := cmp.Diff([]int{0, 50, 50, 37}, c.Batches); diff != "" {
		t.Errorf("annotations per request (-want +got):\n%s", diff)
	}
	if c.Status != "completed" || c.Conclusion != "failure" || len(c.Annotations) != 137 {
		t.Errorf("check: status %q conclusion %q, %d annotations; want completed failure 137", c.Status, c.Conclusion, len(c.Annotations))
	}
	if first := c.Annotations[0]; first["annotation_level"] != "failure" {
		t.Errorf("first annotation level %v, want failure (errors first)", first["annotation_level"])
	}
	if got := h.annotationLines(); len(got) != 0 {
		t.Errorf("workflow-command annotations written although the check run carried them: %d", len(got))
	}
	if s := h.summary(t); !strings.Contains(s, "completed with 137 annotations") {
		t.Errorf("step summary does not report the check run:\n%s", s)
	}
	var methods []string
	for _, w := range h.fake.writes() {
		methods = append(methods, w.Method+" "+w.Path)
	}
	want := []string{
		"POST /repos/acme/infra/check-runs",
		"PATCH /repos/acme/infra/check-runs/1001",
		"PATCH /repos/acme/infra/check-runs/1001",
		"PATCH /repos/acme/infra/check-runs/1001",
		"POST /repos/acme/infra/issues/42/comments",
	}
	if diff := cmp.Diff(want, methods); diff != "" {
		t.Errorf("write requests (-want +got):\n%s", diff)
	}
}

func TestCheckRunWithoutBegin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "push", map[string]any{})
	p := h.publisher(t, nil)
	r := makeResult(3, 0)
	r.Verdict, r.Score, r.ExitCode = result.VerdictError, nil, 3
	if err := p.Finish(t.Context(), r); err != nil {
		t.Fatalf("Finish() = %v", err)
	}
	c := h.fake.onlyCheck()
	if c.HeadSHA != mergeSHA || c.Status != "completed" || c.Conclusion != "failure" || len(c.Annotations) != 3 {
		t.Errorf("push check: sha %s status %q conclusion %q annotations %d; want GITHUB_SHA completed failure 3",
			c.HeadSHA, c.Status, c.Conclusion, len(c.Annotations))
	}
	for _, w := range h.fake.writes() {
		if strings.Contains(w.Path, "comments") {
			t.Errorf("a push has no pull request, but %s %s was sent", w.Method, w.Path)
		}
	}
}

func TestStickyCommentCreatedOnceThenUpdated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	// 150 comments by others first, so finding ours needs the second page.
	for i := range 150 {
		h.fake.comments = append(h.fake.comments, &fakeComment{ID: int64(i + 1), Login: "reviewer", Body: "lgtm"})
	}
	h.publish(t, h.publisher(t, nil), makeResult(2, 0))
	second := makeResult(0, 0)
	second.Verdict, second.Score, second.ExitCode = result.VerdictPass, ptr(1.0), 0
	second.Rubric.Items[1].Status = "pass"
	h.publish(t, h.publisher(t, nil), second)

	var ours []*fakeComment
	for _, c := range h.fake.comments {
		if c.Login == DefaultBotLogin {
			ours = append(ours, c)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d talkops comments after two runs, want 1", len(ours))
	}
	if !strings.HasPrefix(ours[0].Body, "<!-- talkops:result:v1 key=infra-secure -->\n") || !strings.Contains(ours[0].Body, "**pass**") {
		t.Errorf("comment not updated to the second run:\n%s", ours[0].Body)
	}
	var posts, patches int
	for _, w := range h.fake.writes() {
		switch {
		case w.Method == http.MethodPost && strings.HasSuffix(w.Path, "/comments"):
			posts++
		case w.Method == http.MethodPatch && strings.Contains(w.Path, "/issues/comments/"):
			patches++
		}
	}
	if posts != 1 || patches != 1 {
		t.Errorf("comment writes: %d creates, %d updates; want 1 and 1", posts, patches)
	}
}

func TestCommentByOthersWithOurMarkerIsNotEdited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	r := makeResult(1, 0)
	forged := render.Marker(r) + "\nI am not talkops"
	h.fake.comments = []*fakeComment{{ID: 1, Login: "mallory", Body: forged}}
	h.publish(t, h.publisher(t, nil), r)

	if h.fake.comments[0].Body != forged {
		t.Errorf("mallory's comment was edited")
	}
	for _, w := range h.fake.writes() {
		if w.Method == http.MethodPatch && strings.Contains(w.Path, "/issues/comments/") {
			t.Errorf("an existing comment was edited: %s", w.Path)
		}
	}
	if len(h.fake.comments) != 2 || h.fake.comments[1].Login != DefaultBotLogin {
		t.Errorf("talkops did not create its own comment: %+v", h.fake.comments)
	}
}

func TestCommentFoundByTokenUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	h.fake.userLogin = "ci-bot"
	r := makeResult(1, 0)
	h.fake.comments = []*fakeComment{
		{ID: 1, Login: DefaultBotLogin, Body: render.Marker(r) + "\nold, by another workflow's token"},
		{ID: 2, Login: "ci-bot", Body: render.Marker(r) + "\nold"},
	}
	h.publish(t, h.publisher(t, nil), r)
	if h.fake.comments[0].Body != render.Marker(r)+"\nold, by another workflow's token" {
		t.Errorf("a comment by another identity was edited")
	}
	if !strings.Contains(h.fake.comments[1].Body, "**fail**") {
		t.Errorf("ci-bot's comment was not updated: %q", h.fake.comments[1].Body)
	}
}

func TestCheckRun403FallsBackToAnnotations(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	h.fake.fail["POST /repos/*/*/check-runs"] = http.StatusForbidden
	h.publish(t, h.publisher(t, nil), makeResult(2, 1))

	if got := h.annotationLines(); len(got) != 4 { // 2 errors, 1 warning, 1 failing item without a finding
		t.Errorf("fallback annotations = %d lines, want 4:\n%s", len(got), strings.Join(got, "\n"))
	}
	s := h.summary(t)
	if !strings.Contains(s, "checks: write") || !strings.Contains(s, "403") {
		t.Errorf("step summary does not explain the fallback:\n%s", s)
	}
	if !strings.Contains(s, "PR comment on #42 created") {
		t.Errorf("the comment rung should still work with pull-requests: write:\n%s", s)
	}
}

func TestCheckRunMidwayFailureFallsBackWithAllFindings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	h.fake.fail["PATCH /repos/*/*/check-runs/*"] = http.StatusInternalServerError
	p := h.publisher(t, func(c *Config) { c.NoComment = true })
	r := makeResult(3, 0)
	if err := p.Begin(t.Context(), r); err != nil {
		t.Fatalf("Begin() = %v", err)
	}
	err := p.Finish(t.Context(), r)
	if err == nil || !strings.Contains(err.Error(), "check run") {
		t.Fatalf("Finish() = %v, want the check-run error", err)
	}
	if got := h.annotationLines(); len(got) != 4 {
		t.Errorf("fallback annotations = %d, want all 3 findings + the failing item", len(got))
	}
	if _, err := os.Stat(h.env["GITHUB_STEP_SUMMARY"]); err != nil {
		t.Errorf("no step summary after a check-run failure: %v", err)
	}
}

func TestForkMakesNoWriteCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(true))
	h.publish(t, h.publisher(t, nil), makeResult(2, 0))
	if reqs := h.fake.allRequests(); len(reqs) != 0 {
		t.Errorf("a fork run sent %d requests, want none: %+v", len(reqs), reqs)
	}
	if got := h.annotationLines(); len(got) != 3 {
		t.Errorf("fork annotations = %d, want 3", len(got))
	}
	if s := h.summary(t); !strings.Contains(s, "fork") {
		t.Errorf("step summary does not mention the fork:\n%s", s)
	}
	if out := h.outputs(t); out["verdict"] != "fail" {
		t.Errorf("outputs on a fork = %v", out)
	}
}

func TestDegradationLadder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		event      string
		payload    map[string]any
		edit       func(h *harness)
		wantNote   string
		wantWrites int
	}{
		{name: "no token", event: "pull_request", payload: prPayload(false),
			edit: func(h *harness) { delete(h.env, "GITHUB_TOKEN") }, wantNote: "no GITHUB_TOKEN"},
		{name: "dependabot", event: "pull_request", payload: prPayload(false),
			edit: func(h *harness) { h.env["GITHUB_ACTOR"] = "dependabot[bot]" }, wantNote: "Dependabot"},
		{name: "check 404 then comment 403", event: "pull_request", payload: prPayload(false),
			edit: func(h *harness) {
				h.fake.fail["POST /repos/*/*/check-runs"] = http.StatusNotFound
				h.fake.fail["POST /repos/*/*/issues/*/comments"] = http.StatusForbidden
			}, wantNote: "pull-requests: write", wantWrites: 2},
		{name: "result from another repository", event: "pull_request", payload: prPayload(false),
			edit: func(h *harness) { h.env["GITHUB_REPOSITORY"] = "acme/other" }, wantNote: "recorded in acme/infra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tt.event, tt.payload)
			tt.edit(h)
			h.publish(t, h.publisher(t, nil), makeResult(1, 0))
			if got := len(h.fake.writes()); got != tt.wantWrites {
				t.Errorf("%d write requests, want %d", got, tt.wantWrites)
			}
			if len(h.annotationLines()) == 0 {
				t.Errorf("no fallback annotations")
			}
			if s := h.summary(t); !strings.Contains(s, tt.wantNote) {
				t.Errorf("step summary lacks %q:\n%s", tt.wantNote, s)
			}
		})
	}
}

func workflowRunPayload(sha string, prs ...int) map[string]any {
	var list []map[string]any
	for _, n := range prs {
		list = append(list, map[string]any{"number": n})
	}
	return map[string]any{"workflow_run": map[string]any{
		"head_sha": sha, "event": "pull_request", "pull_requests": list,
		"head_repository": map[string]any{"full_name": "mallory/infra"},
	}}
}

func TestWorkflowRunPublishing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		eventSHA    string
		prHead      string
		wantCheck   bool
		wantComment bool
		wantNote    string
	}{
		{name: "verified fork PR", eventSHA: headSHA, prHead: headSHA, wantCheck: true, wantComment: true, wantNote: "PR comment on #42 created"},
		{name: "result for another commit", eventSHA: otherSHA, prHead: headSHA, wantNote: "recorded for commit 111111111111"},
		{name: "PR number pointing elsewhere", eventSHA: headSHA, prHead: otherSHA, wantCheck: true, wantNote: "whose head is 333333333333"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A fork PR's workflow_run payload lists no pull requests: the number comes
			// from result.json and is checked against the API.
			h := newHarness(t, "workflow_run", workflowRunPayload(tt.eventSHA))
			h.fake.prHeads[42] = tt.prHead
			r := makeResult(1, 0)
			r.Run.CI.Fork = true
			h.publish(t, h.publisher(t, nil), r)
			if got := len(h.fake.checks) == 1; got != tt.wantCheck {
				t.Errorf("check run created = %v, want %v", got, tt.wantCheck)
			}
			if got := len(h.fake.comments) == 1; got != tt.wantComment {
				t.Errorf("comment created = %v, want %v", got, tt.wantComment)
			}
			if tt.wantCheck && h.fake.onlyCheck().HeadSHA != headSHA {
				t.Errorf("check run on %s, want %s", h.fake.onlyCheck().HeadSHA, headSHA)
			}
			if s := h.summary(t); !strings.Contains(s, tt.wantNote) {
				t.Errorf("step summary lacks %q:\n%s", tt.wantNote, s)
			}
		})
	}
}

func TestAnnotationSelectionAtLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(true)) // fork: workflow commands only
	r := makeResult(25, 30)
	r.Findings[20].InDiff = true // ranks first among the errors
	h.publish(t, h.publisher(t, nil), r)
	var errs, warns []string
	for _, l := range h.annotationLines() {
		switch {
		case strings.HasPrefix(l, "::error"):
			errs = append(errs, l)
		case strings.HasPrefix(l, "::warning"):
			warns = append(warns, l)
		}
	}
	// 26 error candidates: 25 findings + the failing required item without a finding.
	if len(errs) != 10 || len(warns) != 10 {
		t.Fatalf("%d error and %d warning annotations, want 10 and 10", len(errs), len(warns))
	}
	if !strings.Contains(errs[0], "file=infra/e020.tf") {
		t.Errorf("first error annotation %q, want the in-diff finding e020", errs[0])
	}
	if !strings.Contains(errs[9], "17 more error findings") {
		t.Errorf("last error slot = %q, want the overflow notice for 17 more", errs[9])
	}
	if !strings.Contains(warns[9], "21 more warning findings") {
		t.Errorf("last warning slot = %q, want the overflow notice for 21 more", warns[9])
	}
}

func TestSelectAnnotationsOrder(t *testing.T) {
	t.Parallel()
	as := []annotation{
		{level: "error", message: "plain", order: 0},
		{level: "error", message: "required", required: true, order: 1},
		{level: "error", message: "diff", inDiff: true, order: 2},
		{level: "notice", message: "n", order: 3},
	}
	var got []string
	for _, a := range selectAnnotations(as, "x") {
		got = append(got, a.message)
	}
	if diff := cmp.Diff([]string{"diff", "required", "plain", "n"}, got); diff != "" {
		t.Errorf("selection order (-want +got):\n%s", diff)
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(true))
	r := makeResult(1, 0)
	r.Reason = "x\n" + outputDelimiter + "\ninjected=1"
	r.Verdict = result.VerdictError
	h.publish(t, h.publisher(t, nil), r)
	got := h.outputs(t)
	want := map[string]string{
		"verdict":      "error",
		"score":        "0.4",
		"exit-code":    "1",
		"result-json":  "talkops/result.json",
		"summary-path": "talkops/summary.md",
		"summary":      "error: score 0.40 (threshold 0.80), 1 of 2 items failed, 1 finding — x",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
}

func TestHostileTextIsInertEverywhere(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	r := makeResult(0, 0)
	hostile := "pwned ```` fence\n::error::injected\n" + render.Marker(r) + " cc @org/team " + secret + " ghp_" + strings.Repeat("x", 36)
	r.Findings = []result.Finding{
		{Path: "infra/sg.tf", StartLine: 3, Severity: "error", Title: "@octocat ::warning::t", Message: hostile, Source: "agent", Fingerprint: "h"},
		{Severity: "warning", Message: hostile, Source: "agent", Fingerprint: "h2"},
	}
	r.Reason = hostile
	r.Agent = &result.Agent{FinalAnswer: hostile}
	r.Rubric.Items[1].Reason = hostile
	p := h.publisher(t, nil)
	h.publish(t, p, r)

	c := h.fake.onlyCheck()
	var anns []string
	for _, a := range c.Annotations {
		anns = append(anns, fmt.Sprint(a["message"], " ", a["title"]))
	}
	if h.stdout.Len() != 0 {
		t.Errorf("stdout has workflow commands although the check run carried the annotations:\n%s", h.stdout.String())
	}
	surfaces := map[string]string{
		"step summary":      h.summary(t),
		"check summary":     c.Summary,
		"check text":        c.Text,
		"check title":       c.Title,
		"check annotations": strings.Join(anns, "\n"),
		"comment":           strings.TrimPrefix(h.fake.comments[0].Body, render.Marker(r)+"\n"),
	}
	// Hostile text also goes out as workflow commands when the check run is not allowed.
	h2 := newHarness(t, "pull_request", prPayload(true))
	h2.publish(t, h2.publisher(t, nil), r)
	surfaces["fallback annotations"] = h2.stdout.String()

	for name, s := range surfaces {
		if s == "" {
			t.Errorf("%s: empty", name)
			continue
		}
		for _, bad := range []string{secret, "ghp_xxxx", "@org/team", "@octocat", "talkops:result", "<!--"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
	}
	// On stdout, every line must be a command we issued: the injected ones stay escaped
	// inside the data of our annotation.
	for l := range strings.Lines(surfaces["fallback annotations"]) {
		if strings.HasPrefix(l, "::error::injected") || strings.HasPrefix(l, "::warning::t") {
			t.Errorf("stdout: injected workflow command on its own line: %q", l)
		}
	}
	if !strings.Contains(surfaces["fallback annotations"], "%0A::error::injected%0A") {
		t.Errorf("stdout: the newline before the injected command is not escaped:\n%s", surfaces["fallback annotations"])
	}
	// Markdown surfaces fence the untrusted text with a fence longer than its backticks.
	for _, name := range []string{"step summary", "comment", "check text"} {
		if !strings.Contains(surfaces[name], "`````text\n") {
			t.Errorf("%s: hostile text not fenced with 5 backticks", name)
		}
	}
	if strings.Count(h.fake.comments[0].Body, "<!--") != 1 {
		t.Errorf("comment has more than our one marker")
	}
}

func TestGroupSink(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	a := githubactions.New(githubactions.WithWriter(&out), githubactions.WithGetenv(func(string) string { return "" }))
	s := GroupSink(a, secret)
	s.Emit(events.Event{Type: events.StageStarted, Stage: "setup"})
	s.Emit(events.Event{Type: events.Output, Stage: "setup", Message: "::error::from the script " + secret + "\nline two"})
	s.Emit(events.Event{Type: events.StageStarted, Stage: "agent"}) // closes setup
	s.Emit(events.Event{Type: events.StageFinished, Stage: "agent"})
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8 {
		t.Fatalf("GroupSink wrote %d lines, want 8:\n%s", len(lines), out.String())
	}
	tok := strings.TrimPrefix(lines[1], "::stop-commands::")
	if !strings.HasPrefix(tok, "talkops-") || len(tok) < 20 {
		t.Fatalf("no random stop-commands token: %q", lines[1])
	}
	want := []string{
		"::group::setup",
		"::stop-commands::" + tok,
		"::error::from the script ***",
		"line two",
		"::" + tok + "::",
		"::endgroup::",
		"::group::agent",
		"::endgroup::",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("GroupSink output (-want +got):\n%s", diff)
	}
}

func TestAddMasks(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	a := githubactions.New(githubactions.WithWriter(&out))
	if err := AddMasks(a, []string{"s3cret-value", "", "ab", "line-one\nline-two", "s3cret-value"}); err != nil {
		t.Fatal(err)
	}
	want := "::add-mask::s3cret-value\n::add-mask::line-one%0Aline-two\n::add-mask::line-one\n::add-mask::line-two\n"
	if out.String() != want {
		t.Errorf("AddMasks wrote %q, want %q", out.String(), want)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestBrokenStdoutIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(true))
	p := h.publisher(t, func(c *Config) {
		c.Action = githubactions.New(githubactions.WithWriter(failWriter{}), githubactions.WithGetenv(h.getenv))
	})
	if err := p.Finish(t.Context(), makeResult(1, 0)); err == nil || !strings.Contains(err.Error(), "annotations") {
		t.Errorf("Finish() with a broken stdout = %v, want an annotations error", err)
	}
	GroupSink(githubactions.New(githubactions.WithWriter(failWriter{}))).Emit(events.Event{Type: events.StageStarted, Stage: "x"})
}

func TestConclusion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, verdict string
		partial       bool
		unstable      bool
		errConclusion string
		want          string
	}{
		{"pass", "pass", false, false, "", "success"},
		{"pass opting into neutral", "pass", false, false, "neutral", "success"},
		{"fail", "fail", false, false, "", "failure"},
		{"fail opting into neutral", "fail", false, false, "neutral", "failure"},
		// A run without a verdict is a failure unless the workflow opts into neutral,
		// which branch protection counts as passing.
		{"error default", "error", false, false, "", "failure"},
		{"error failure", "error", false, false, "failure", "failure"},
		{"error opting into neutral", "error", false, false, "neutral", "neutral"},
		{"unknown verdict", "maybe", false, false, "", "failure"},
		{"budget default", "fail", true, false, "", "failure"},
		{"budget opting into neutral", "fail", true, false, "neutral", "neutral"},
		{"partial pass", "pass", true, false, "", "failure"},
		{"unstable judge default", "fail", false, true, "", "failure"},
		{"unstable judge opting into neutral", "fail", false, true, "neutral", "neutral"},
	}
	for _, tt := range tests {
		r := &result.Result{Verdict: tt.verdict, Partial: tt.partial,
			Rubric: &result.Rubric{Items: []result.Item{{ID: "x", Status: "fail", Unstable: tt.unstable}}}}
		if tt.verdict == "pass" {
			r.Rubric.Items[0].Status = "pass"
		}
		if got := Conclusion(r, tt.errConclusion); got != tt.want {
			t.Errorf("%s: Conclusion() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Getenv: func(string) string { return "" }, ErrorConclusion: "red"})
	if err == nil || !strings.Contains(err.Error(), `"red"`) || !strings.Contains(err.Error(), "neutral or failure") {
		t.Errorf("New(ErrorConclusion red) = %v", err)
	}
}

func TestCI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		event   string
		payload map[string]any
		want    *result.CI
	}{
		{"same-repo PR", "pull_request", prPayload(false),
			&result.CI{Provider: "github", Repo: "acme/infra", Event: "pull_request", PR: 42, HeadSHA: headSHA}},
		{"fork PR", "pull_request", prPayload(true),
			&result.CI{Provider: "github", Repo: "acme/infra", Event: "pull_request", PR: 42, HeadSHA: headSHA, Fork: true}},
		{"push", "push", map[string]any{}, &result.CI{Provider: "github", Repo: "acme/infra", Event: "push", HeadSHA: mergeSHA}},
		{"workflow_run", "workflow_run", workflowRunPayload(headSHA, 42),
			&result.CI{Provider: "github", Repo: "acme/infra", Event: "workflow_run", PR: 42, HeadSHA: headSHA}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tt.event, tt.payload)
			if diff := cmp.Diff(tt.want, CI(h.getenv)); diff != "" {
				t.Errorf("CI() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if got := CI(func(string) string { return "" }); got != nil {
		t.Errorf("CI() outside Actions = %+v, want nil", got)
	}
}

func TestLargeResultStaysWithinLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "pull_request", prPayload(false))
	r := makeResult(1500, 500)
	long := strings.Repeat("ü long evidence line with `ticks` and | pipes\n", 100)
	for i := range r.Findings {
		r.Findings[i].Message += " " + long[:2000]
	}
	for i := range 60 {
		r.Rubric.Items = append(r.Rubric.Items, result.Item{ID: fmt.Sprintf("item-%02d", i), Kind: "check", Required: true,
			Status: "fail", Reason: long, Check: &result.Check{Argv: []string{"sh", "-c", "x"}, StdoutTail: long, StderrTail: long}})
	}
	r.Agent = &result.Agent{FinalAnswer: strings.Repeat(long, 10)}
	h.publish(t, h.publisher(t, nil), r) // the fake answers 422 to anything over a limit

	c := h.fake.onlyCheck()
	if len(c.Annotations) != MaxCheckAnnotations || c.Status != "completed" {
		t.Errorf("%d annotations, status %q; want %d, completed", len(c.Annotations), c.Status, MaxCheckAnnotations)
	}
	if len(c.Summary) > CheckTextBytes || len(c.Text) > CheckTextBytes {
		t.Errorf("check summary %d / text %d bytes, limit %d", len(c.Summary), len(c.Text), CheckTextBytes)
	}
	if n := len(h.fake.comments[0].Body); n > CommentBytes {
		t.Errorf("comment %d bytes, limit %d", n, CommentBytes)
	}
	if n := len(h.summary(t)); n > StepSummaryBytes {
		t.Errorf("step summary %d bytes, limit %d", n, StepSummaryBytes)
	}
	if s := h.summary(t); !strings.Contains(s, "more findings") {
		t.Errorf("step summary does not say findings were left out")
	}
}

func TestUntrustedResultIsNeverASuccess(t *testing.T) {
	t.Parallel()
	for _, verdict := range []string{result.VerdictPass, result.VerdictFail, result.VerdictError} {
		t.Run(verdict, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "pull_request", prPayload(false))
			r := makeResult(0, 0)
			r.Verdict = verdict
			h.publish(t, h.publisher(t, func(c *Config) { c.Untrusted = "the triggering run came from the fork mallory/infra" }), r)
			c := h.fake.onlyCheck()
			if c.Conclusion != ConclusionNeutral {
				t.Errorf("conclusion = %q, want neutral", c.Conclusion)
			}
			if !strings.HasPrefix(c.Title, "Untrusted: ") || !strings.Contains(c.Title, verdict) {
				t.Errorf("title = %q, want it marked untrusted with the verdict %s", c.Title, verdict)
			}
			for what, text := range map[string]string{"check summary": c.Summary, "comment": h.fake.comments[0].Body} {
				if !strings.Contains(text, "produced by untrusted code (the triggering run came from the fork mallory/infra)") {
					t.Errorf("%s lacks the untrusted line:\n%s", what, text)
				}
			}
		})
	}
}

func TestUntrustedRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		event   string
		payload any
		want    string
	}{
		{name: "fork", event: "workflow_run", payload: workflowRunPayload(headSHA), want: "the fork mallory/infra"},
		{name: "same repository", event: "workflow_run", payload: map[string]any{"workflow_run": map[string]any{
			"head_sha": headSHA, "head_repository": map[string]any{"full_name": "acme/infra"},
			"repository": map[string]any{"full_name": "acme/infra"}}}},
		{name: "deleted head repository", event: "workflow_run", payload: map[string]any{"workflow_run": map[string]any{"head_sha": headSHA}},
			want: "unknown or deleted"},
		{name: "not a workflow_run", event: "pull_request", payload: prPayload(true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tt.event, tt.payload)
			got := ReadEnv(h.getenv).UntrustedRun()
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("UntrustedRun() = %q, want %q", got, tt.want)
			}
		})
	}
}
