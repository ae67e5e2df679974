package gitlab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

const (
	testToken = "glpat-abcdefghijklmnopqrst"
	secret    = "hunter2-super-secret"
	botID     = 77
)

type note struct {
	ID       int64
	AuthorID int64
	Body     string
	System   bool
}

// fakeGitLab speaks the notes and user endpoints of the v4 API, with X-Next-Page
// pagination, and records every request.
type fakeGitLab struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	notes    []*note
	nextID   int64
	requests []string
	fail     map[string]int // "METHOD suffix" → status
}

func newFakeGitLab(t *testing.T) *fakeGitLab {
	f := &fakeGitLab{t: t, nextID: 5000, fail: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/user", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"id": botID, "username": "project_1_bot"})
	})
	base := "/api/v4/projects/{pid}/merge_requests/{iid}/notes"
	mux.HandleFunc("GET "+base, f.list)
	mux.HandleFunc("POST "+base, f.create)
	mux.HandleFunc("PUT "+base+"/{id}", f.update)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("PRIVATE-TOKEN") != testToken {
			writeJSON(w, 401, map[string]any{"message": "401 Unauthorized"})
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		fail := f.fail
		f.mu.Unlock()
		for k, code := range fail {
			m, suffix, _ := strings.Cut(k, " ")
			if r.Method == m && strings.HasSuffix(r.URL.Path, suffix) {
				writeJSON(w, code, map[string]any{"message": fmt.Sprintf("%d Forbidden", code)})
				return
			}
		}
		if r.URL.Path != "/api/v4/user" && r.PathValue("pid") == "" && !strings.HasPrefix(r.URL.Path, "/api/v4/projects/123/") {
			t.Errorf("request for another project: %s", r.URL.Path)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeGitLab) view(n *note) map[string]any {
	return map[string]any{"id": n.ID, "body": n.Body, "system": n.System, "author": map[string]any{"id": n.AuthorID}}
}

func (f *fakeGitLab) list(w http.ResponseWriter, r *http.Request) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	page, per = max(page, 1), max(per, 20)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []map[string]any{}
	for i := (page - 1) * per; i < page*per && i < len(f.notes); i++ {
		out = append(out, f.view(f.notes[i]))
	}
	if page*per < len(f.notes) {
		w.Header().Set("X-Next-Page", strconv.Itoa(page+1))
	}
	writeJSON(w, 200, out)
}

func (f *fakeGitLab) body(r *http.Request) string {
	var b struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		f.t.Errorf("note body: %v", err)
	}
	return b.Body
}

func (f *fakeGitLab) create(w http.ResponseWriter, r *http.Request) {
	b := f.body(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	n := &note{ID: f.nextID, AuthorID: botID, Body: b}
	f.notes = append(f.notes, n)
	writeJSON(w, 201, f.view(n))
}

func (f *fakeGitLab) update(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	b := f.body(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.notes {
		if n.ID == id {
			if n.AuthorID != botID {
				writeJSON(w, 403, map[string]any{"message": "403 Forbidden"})
				return
			}
			n.Body = b
			writeJSON(w, 200, f.view(n))
			return
		}
	}
	writeJSON(w, 404, map[string]any{"message": "404 Not found"})
}

func (f *fakeGitLab) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

type harness struct {
	fake *fakeGitLab
	env  map[string]string
	log  bytes.Buffer
}

func newHarness(t *testing.T) *harness {
	h := &harness{fake: newFakeGitLab(t)}
	h.env = map[string]string{
		"GITLAB_CI":                          "true",
		"TALKOPS_GITLAB_TOKEN":               testToken,
		"CI_JOB_TOKEN":                       "job-token-cannot-write",
		"CI_API_V4_URL":                      h.fake.srv.URL + "/api/v4",
		"CI_PROJECT_ID":                      "123",
		"CI_MERGE_REQUEST_PROJECT_ID":        "123",
		"CI_MERGE_REQUEST_SOURCE_PROJECT_ID": "123",
		"CI_PROJECT_PATH":                    "acme/infra",
		"CI_MERGE_REQUEST_IID":               "9",
		"CI_COMMIT_SHA":                      strings.Repeat("a", 40),
		"CI_PIPELINE_SOURCE":                 "merge_request_event",
	}
	return h
}

func (h *harness) publish(t *testing.T, r *result.Result) error {
	t.Helper()
	p, err := New(Config{Getenv: func(k string) string { return h.env[k] }, Redactor: hygiene.NewRedactor(secret), Log: &h.log})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if err := p.Begin(t.Context(), r); err != nil {
		return err
	}
	return p.Finish(t.Context(), r)
}

func ptr[T any](v T) *T { return &v }

func makeResult(verdict string) *result.Result {
	return &result.Result{
		Schema: result.Schema, Verdict: verdict, Score: ptr(0.5), ExitCode: 1,
		Run:      result.Run{ID: "r", Version: "0.3.0", StartedAt: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)},
		Rubric:   &result.Rubric{Name: "infra", PassThreshold: 0.8, Items: []result.Item{{ID: "a", Kind: "check", Status: result.ItemStatus(verdict)}}},
		Findings: []result.Finding{{Path: "main.tf", StartLine: 2, Severity: "error", Message: "bad", Source: "agent", Fingerprint: "f"}},
	}
}

func TestNoteCreatedOnceThenUpdated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i := range 120 { // ours must be found on the second page
		h.fake.notes = append(h.fake.notes, &note{ID: int64(i + 1), AuthorID: 5, Body: "review comment"})
	}
	if err := h.publish(t, makeResult("fail")); err != nil {
		t.Fatalf("first run: %v", err)
	}
	if err := h.publish(t, makeResult("pass")); err != nil {
		t.Fatalf("second run: %v", err)
	}
	want := []string{
		"POST /api/v4/projects/123/merge_requests/9/notes",
		"PUT /api/v4/projects/123/merge_requests/9/notes/5001",
	}
	if diff := cmp.Diff(want, h.fake.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	ours := h.fake.notes[len(h.fake.notes)-1]
	if !strings.HasPrefix(ours.Body, render.Marker(makeResult("pass"))+"\n") || !strings.Contains(ours.Body, "**pass**") {
		t.Errorf("note not updated:\n%s", ours.Body)
	}
	if !strings.Contains(h.log.String(), "note created") || !strings.Contains(h.log.String(), "note updated") {
		t.Errorf("log = %q", h.log.String())
	}
}

func TestNoteByOthersWithMarkerNotEdited(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := makeResult("fail")
	forged := render.Marker(r) + "\nnot talkops"
	h.fake.notes = []*note{{ID: 1, AuthorID: 5, Body: forged}, {ID: 2, AuthorID: botID, System: true, Body: render.Marker(r)}}
	if err := h.publish(t, r); err != nil {
		t.Fatal(err)
	}
	if h.fake.notes[0].Body != forged {
		t.Errorf("someone else's note was edited")
	}
	if diff := cmp.Diff([]string{"POST /api/v4/projects/123/merge_requests/9/notes"}, h.fake.writes()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestNoteSkipped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(h *harness)
		wantLog string
		wantErr bool
		writes  int
	}{
		{name: "no merge request", edit: func(h *harness) { delete(h.env, "CI_MERGE_REQUEST_IID") }, wantLog: "no merge request"},
		{name: "only the job token", edit: func(h *harness) { delete(h.env, "TALKOPS_GITLAB_TOKEN") }, wantLog: "CI_JOB_TOKEN cannot write notes"},
		{name: "forbidden", edit: func(h *harness) { h.fake.fail["POST /notes"] = 403 }, wantLog: "api scope", writes: 1},
		{name: "fork", edit: func(h *harness) {
			h.env["CI_MERGE_REQUEST_SOURCE_PROJECT_ID"] = "999"
			h.fake.fail["GET /notes"] = 404
		}, wantLog: "fork"},
		{name: "server error", edit: func(h *harness) { h.fake.fail["POST /notes"] = 500 }, wantErr: true, writes: 3},
		{name: "result from another project", edit: func(h *harness) { h.env["CI_PROJECT_PATH"] = "acme/other" }, wantLog: "recorded in acme/infra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			tt.edit(h)
			r := makeResult("fail")
			r.Run.CI = &result.CI{Provider: "gitlab", Repo: "acme/infra"}
			err := h.publish(t, r)
			if (err != nil) != tt.wantErr {
				t.Fatalf("publish() = %v, want error %v", err, tt.wantErr)
			}
			if !strings.Contains(h.log.String(), tt.wantLog) {
				t.Errorf("log %q lacks %q", h.log.String(), tt.wantLog)
			}
			if got := len(h.fake.writes()); got != tt.writes {
				t.Errorf("%d write requests, want %d (%v)", got, tt.writes, h.fake.writes())
			}
		})
	}
}

func TestNoteHygiene(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := makeResult("fail")
	r.Findings[0].Message = "```` x\n" + render.Marker(r) + " @all @group/team " + secret + " " + testToken
	if err := h.publish(t, r); err != nil {
		t.Fatal(err)
	}
	body := strings.TrimPrefix(h.fake.notes[0].Body, render.Marker(r)+"\n")
	for _, bad := range []string{secret, testToken, "@all", "@group/team", "<!--"} {
		if strings.Contains(body, bad) {
			t.Errorf("note contains %q", bad)
		}
	}
}

func TestCI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env["CI_MERGE_REQUEST_SOURCE_PROJECT_ID"] = "999"
	want := &result.CI{Provider: "gitlab", Repo: "acme/infra", Event: "merge_request_event", PR: 9,
		HeadSHA: strings.Repeat("a", 40), Fork: true}
	if diff := cmp.Diff(want, CI(func(k string) string { return h.env[k] })); diff != "" {
		t.Errorf("CI() mismatch (-want +got):\n%s", diff)
	}
}

// A run without a verdict must not read as clean in the note either: no items and no
// findings, but the verdict, the reason and the partial banner are there.
func TestNoteForRunWithoutVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    *result.Result
		want []string
	}{
		{"error", &result.Result{Schema: result.Schema, Verdict: result.VerdictError, ExitCode: 3, Reason: "sandbox create failed"},
			[]string{"⚠️", "**error**", "sandbox create failed"}},
		{"partial", &result.Result{Schema: result.Schema, Verdict: result.VerdictFail, Partial: true, ExitCode: 124},
			[]string{"**fail**", "this result is partial"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if err := h.publish(t, tc.r); err != nil {
				t.Fatal(err)
			}
			body := h.fake.notes[len(h.fake.notes)-1].Body
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("note lacks %q:\n%s", w, body)
				}
			}
		})
	}
}
