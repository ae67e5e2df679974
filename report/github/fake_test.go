package github

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeGitHub speaks the REST paths and JSON the publisher uses, under /api/v3 as on
// GitHub Enterprise Server, and enforces the documented limits (50 annotations per
// request, 65,535-character output fields, 65,536-character comment bodies) with 422s.
type fakeGitHub struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	requests  []request
	checks    map[int64]*fakeCheck
	comments  []*fakeComment
	prHeads   map[int]string
	nextID    int64
	userLogin string // "" → GET /user answers 403 like an installation token
	// fail maps "METHOD path-pattern" to a status code to answer with.
	fail map[string]int
}

type request struct {
	Method, Path string
	Body         map[string]any
}

type fakeCheck struct {
	Name, HeadSHA, Status, Conclusion string
	Title, Summary, Text              string
	Annotations                       []map[string]any
	Batches                           []int // annotations per request
}

type fakeComment struct {
	ID    int64
	Login string
	Body  string
}

const prefix = "/api/v3"

func newFakeGitHub(t *testing.T) *fakeGitHub {
	t.Helper()
	f := &fakeGitHub{t: t, checks: map[int64]*fakeCheck{}, prHeads: map[int]string{}, nextID: 1000, fail: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+prefix+"/repos/{owner}/{repo}/check-runs", f.createCheck)
	mux.HandleFunc("PATCH "+prefix+"/repos/{owner}/{repo}/check-runs/{id}", f.updateCheck)
	mux.HandleFunc("GET "+prefix+"/repos/{owner}/{repo}/issues/{n}/comments", f.listComments)
	mux.HandleFunc("POST "+prefix+"/repos/{owner}/{repo}/issues/{n}/comments", f.createComment)
	mux.HandleFunc("PATCH "+prefix+"/repos/{owner}/{repo}/issues/comments/{id}", f.editComment)
	mux.HandleFunc("GET "+prefix+"/repos/{owner}/{repo}/pulls/{n}", f.getPR)
	mux.HandleFunc("GET "+prefix+"/user", f.getUser)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	f.srv = httptest.NewServer(f.record(mux))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) apiURL() string { return f.srv.URL + prefix }

func (f *fakeGitHub) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if len(data) > 0 {
			if err := json.Unmarshal(data, &body); err != nil {
				f.t.Errorf("%s %s: body is not JSON: %v", r.Method, r.URL.Path, err)
			}
		}
		f.mu.Lock()
		f.requests = append(f.requests, request{Method: r.Method, Path: strings.TrimPrefix(r.URL.Path, prefix), Body: body})
		f.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(data)))
		for pattern, code := range f.failures() {
			if code == 0 {
				continue
			}
			method, path, _ := strings.Cut(pattern, " ")
			if r.Method == method && matchPath(path, strings.TrimPrefix(r.URL.Path, prefix)) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				fmt.Fprintf(w, `{"message":"Resource not accessible by integration","status":"%d"}`, code)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (f *fakeGitHub) failures() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.fail {
		out[k] = v
	}
	return out
}

// matchPath matches "/a/*/c" against "/a/b/c".
func matchPath(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != xs[i] {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func unprocessable(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": msg})
}

// applyOutput checks and stores a check run's output like GitHub does.
func (f *fakeGitHub) applyOutput(w http.ResponseWriter, c *fakeCheck, body map[string]any) bool {
	if status, _ := body["status"].(string); status == "completed" {
		if _, ok := body["conclusion"].(string); !ok {
			unprocessable(w, "conclusion is required when status is completed")
			return false
		}
	}
	out, ok := body["output"].(map[string]any)
	if !ok {
		return true
	}
	title, _ := out["title"].(string)
	summary, _ := out["summary"].(string)
	text, _ := out["text"].(string)
	if title == "" || summary == "" {
		unprocessable(w, "output.title and output.summary are required")
		return false
	}
	for _, s := range []string{summary, text} {
		if n := len([]rune(s)); n > 65535 {
			unprocessable(w, fmt.Sprintf("Only 65535 characters are allowed; %d were supplied.", n))
			return false
		}
	}
	anns, _ := out["annotations"].([]any)
	if len(anns) > 50 {
		unprocessable(w, "annotations: at most 50 per request")
		return false
	}
	for _, a := range anns {
		m := a.(map[string]any)
		for _, k := range []string{"path", "start_line", "end_line", "annotation_level", "message"} {
			if _, ok := m[k]; !ok {
				unprocessable(w, "annotation lacks "+k)
				return false
			}
		}
		if _, ok := m["start_column"]; ok && m["start_line"] != m["end_line"] {
			unprocessable(w, "columns on a multi-line annotation")
			return false
		}
		c.Annotations = append(c.Annotations, m)
	}
	c.Batches = append(c.Batches, len(anns))
	c.Title, c.Summary, c.Text = title, summary, text
	return true
}

func (f *fakeGitHub) createCheck(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	name, _ := body["name"].(string)
	sha, _ := body["head_sha"].(string)
	if name == "" || len(sha) != 40 {
		unprocessable(w, "name and head_sha are required")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &fakeCheck{Name: name, HeadSHA: sha, Status: "queued"}
	if !f.applyOutput(w, c, body) {
		return
	}
	if s, ok := body["status"].(string); ok {
		c.Status = s
	}
	c.Conclusion, _ = body["conclusion"].(string)
	f.nextID++
	f.checks[f.nextID] = c
	writeJSON(w, http.StatusCreated, map[string]any{"id": f.nextID, "name": name, "head_sha": sha, "status": c.Status})
}

func (f *fakeGitHub) updateCheck(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.checks[id]
	if c == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	if !f.applyOutput(w, c, body) {
		return
	}
	if s, ok := body["status"].(string); ok {
		c.Status = s
	}
	if s, ok := body["conclusion"].(string); ok {
		c.Conclusion = s
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "name": c.Name, "status": c.Status})
}

func (f *fakeGitHub) listComments(w http.ResponseWriter, r *http.Request) {
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if page < 1 {
		page = 1
	}
	if per < 1 || per > 100 {
		per = 30
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	start, end := (page-1)*per, page*per
	var out []map[string]any
	for i := start; i < end && i < len(f.comments); i++ {
		c := f.comments[i]
		out = append(out, map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.Login}})
	}
	if end < len(f.comments) {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(page+1))
		u.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, f.srv.URL, u.String()))
	}
	if out == nil {
		out = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeGitHub) commentBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	s, _ := body["body"].(string)
	if n := len([]rune(s)); n > 65536 {
		unprocessable(w, fmt.Sprintf("body is too long (maximum is 65536 characters), was %d", n))
		return "", false
	}
	return s, true
}

func (f *fakeGitHub) author() string {
	if f.userLogin != "" {
		return f.userLogin
	}
	return DefaultBotLogin
}

func (f *fakeGitHub) createComment(w http.ResponseWriter, r *http.Request) {
	body, ok := f.commentBody(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	c := &fakeComment{ID: f.nextID, Login: f.author(), Body: body}
	f.comments = append(f.comments, c)
	writeJSON(w, http.StatusCreated, map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.Login}})
}

func (f *fakeGitHub) editComment(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	body, ok := f.commentBody(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.comments {
		if c.ID == id {
			if c.Login != f.author() {
				writeJSON(w, http.StatusForbidden, map[string]any{"message": "you can only edit your own comments"})
				return
			}
			c.Body = body
			writeJSON(w, http.StatusOK, map[string]any{"id": c.ID, "body": c.Body, "user": map[string]any{"login": c.Login}})
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
}

func (f *fakeGitHub) getPR(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	f.mu.Lock()
	head, ok := f.prHeads[n]
	f.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"number": n, "head": map[string]any{"sha": head}})
}

func (f *fakeGitHub) getUser(w http.ResponseWriter, r *http.Request) {
	if f.userLogin == "" {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"login": f.userLogin})
}

// writes returns the requests that change something.
func (f *fakeGitHub) writes() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []request
	for _, r := range f.requests {
		if r.Method != http.MethodGet {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeGitHub) allRequests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

func (f *fakeGitHub) onlyCheck() *fakeCheck {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.checks) != 1 {
		f.t.Fatalf("%d check runs, want 1", len(f.checks))
	}
	for _, c := range f.checks {
		return c
	}
	return nil
}
