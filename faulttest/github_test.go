package faulttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ghToken is the GITHUB_TOKEN the fake GitHub accepts.
const ghToken = "ghs_faulttestGitHubTokenCanary0000000000"

// githubFake answers the REST calls talkops's GitHub publisher makes (check runs, PR
// comments, the PR, the token's user) under /api/v3, and records every request body so
// a test can search them. Requests matching hold ("METHOD part-of-the-path") wait until
// the test releases them: that keeps talkops inside its publish stage.
type githubFake struct {
	srv   *httptest.Server
	token string // the GITHUB_TOKEN it accepts

	mu      sync.Mutex
	bodies  []string // "METHOD path\nbody" of every request
	nextID  int64
	holdFor string        // method + " " + part of the path to hold, "" for none
	held    chan struct{} // closed when the first held request arrives
	release chan struct{}
	status  int // when non-zero, every call answers this status

	heldOnce, releaseOnce sync.Once
}

func newGitHubFake(t testing.TB) *githubFake {
	t.Helper()
	f := &githubFake{token: ghToken, nextID: 100, held: make(chan struct{}), release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.releaseHeld()
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

func (f *githubFake) releaseHeld() { f.releaseOnce.Do(func() { close(f.release) }) }

// hold makes requests "METHOD part-of-the-path" wait until releaseHeld.
func (f *githubFake) hold(methodSuffix string) {
	f.mu.Lock()
	f.holdFor = methodSuffix
	f.mu.Unlock()
}

func (f *githubFake) failAll(status int) {
	f.mu.Lock()
	f.status = status
	f.mu.Unlock()
}

// recorded returns every request as "METHOD path\nbody" (the Authorization header, where
// the token belongs, is left out).
func (f *githubFake) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func (f *githubFake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(r.URL.Path, "/api/v3")
	f.mu.Lock()
	f.bodies = append(f.bodies, r.Method+" "+r.URL.RequestURI()+"\n"+string(body))
	f.nextID++
	id := f.nextID
	hold := f.holdFor != "" && strings.HasPrefix(f.holdFor, r.Method+" ") && strings.Contains(path, strings.TrimPrefix(f.holdFor, r.Method+" "))
	status := f.status
	f.mu.Unlock()
	if hold {
		f.heldOnce.Do(func() { close(f.held) })
		select {
		case <-f.release:
		case <-r.Context().Done():
			return
		}
	}
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		writeJSONStatus(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
		return
	}
	if status != 0 {
		writeJSONStatus(w, status, map[string]any{"message": fmt.Sprintf("faulttest: injected %d", status)})
		return
	}
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/check-runs"):
		writeJSONStatus(w, http.StatusCreated, map[string]any{"id": id, "status": "in_progress"})
	case r.Method == http.MethodPatch && strings.Contains(path, "/check-runs/"):
		writeJSONStatus(w, http.StatusOK, map[string]any{"id": id, "status": "completed"})
	case r.Method == http.MethodGet && strings.Contains(path, "/pulls/"):
		writeJSONStatus(w, http.StatusOK, map[string]any{"number": 7, "head": map[string]any{"sha": headSHA}})
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/comments"):
		writeJSONStatus(w, http.StatusOK, []any{})
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/comments"):
		writeJSONStatus(w, http.StatusCreated, map[string]any{"id": id, "body": "ok"})
	case r.Method == http.MethodPatch && strings.Contains(path, "/comments/"):
		writeJSONStatus(w, http.StatusOK, map[string]any{"id": id})
	case r.Method == http.MethodGet && path == "/user":
		writeJSONStatus(w, http.StatusOK, map[string]any{"login": "github-actions[bot]"})
	default:
		writeJSONStatus(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
}

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

const headSHA = "0123456789abcdef0123456789abcdef01234567"

// actionsEnv simulates a GitHub Actions job on a same-repository pull request: the
// workflow-command files, the event payload and the API pointed at the fake.
func (f *githubFake) actionsEnv(t testing.TB, root string) map[string]string {
	t.Helper()
	dir := filepath.Join(root, "gha")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	event := fmt.Sprintf(`{"pull_request":{"number":7,"head":{"sha":%q,"repo":{"full_name":"acme/infra"}},"base":{"repo":{"full_name":"acme/infra"}}}}`, headSHA)
	eventPath := filepath.Join(dir, "event.json")
	if err := os.WriteFile(eventPath, []byte(event), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"output", "summary", "env", "state"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]string{
		"GITHUB_ACTIONS":      "true",
		"CI":                  "true",
		"GITHUB_TOKEN":        f.token,
		"GITHUB_API_URL":      f.srv.URL + "/api/v3",
		"GITHUB_SERVER_URL":   "https://github.example",
		"GITHUB_REPOSITORY":   "acme/infra",
		"GITHUB_EVENT_NAME":   "pull_request",
		"GITHUB_EVENT_PATH":   eventPath,
		"GITHUB_SHA":          "fedcba9876543210fedcba9876543210fedcba98",
		"GITHUB_RUN_ID":       "42",
		"GITHUB_OUTPUT":       filepath.Join(dir, "output"),
		"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"),
		"GITHUB_ENV":          filepath.Join(dir, "env"),
		"GITHUB_STATE":        filepath.Join(dir, "state"),
	}
}
