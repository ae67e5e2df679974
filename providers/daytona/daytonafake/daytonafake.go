// Package daytonafake is an in-process fake of the Daytona v0 API for tests: the control
// plane under /api and the toolbox under /toolbox/{id}, with Daytona's paths, bearer auth,
// JSON shapes, status codes and error bodies.
//
// Covered: POST/GET /api/sandbox (create; list with labels, states, limit, cursor),
// GET/DELETE /api/sandbox/{idOrName}, POST /api/sandbox/{idOrName}/start and /stop, and on
// the toolbox POST /process/execute, POST /files/upload, POST /files/bulk-upload and
// GET /files/download. Left out: sessions, PTY and log WebSockets, git, LSP, computer use,
// snapshots, volumes, archive and the preview/SSH endpoints; no rate-limit headers unless
// a fault adds them.
//
// State: a new sandbox is "creating" (or "pending_build" when built from an image) and
// turns "started" after ReadyAfter polls of GET /api/sandbox/{id}; NeverReady keeps it
// creating; FailWith puts it into "error" or "build_failed". A stopped, archived or
// paused (Pause) sandbox stays so until POST …/start, which accepts only those states
// (and a started one, unchanged); it then starts like a new one. Delete kills the
// sandbox's running commands, answers "destroying", and the sandbox is then gone (404).
//
// Commands run for real, as the daemon runs them: the command text is fed on stdin to
// /bin/sh in a new process group, stdout and stderr combined, the `timeout` field kills
// the group and answers 408. Files are the host's files: the fake does not jail paths.
// Each sandbox gets its own temporary HOME directory, removed on delete.
package daytonafake

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/providers/httpapi/fakekit"
)

// Server is the fake. Configure its exported fields before the first request.
type Server struct {
	// Host serves the fake at Host.URL and logs its calls.
	fakekit.Host
	// APIKey is the bearer token every request must carry.
	APIKey string
	// ReadyAfter is the number of GET polls before a new sandbox is started; 0 means the
	// first poll already sees it started.
	ReadyAfter int
	// NeverReady keeps new sandboxes in their initial state.
	NeverReady bool
	// FailWith, when set ("error", "build_failed"), is the state a new sandbox reaches
	// instead of "started", with errorReason FailReason.
	FailWith, FailReason string
	// Faults fails calls by endpoint: "create", "get", "list", "start", "stop", "delete",
	// "exec", "upload", "bulk-upload", "download".
	Faults fakekit.Faults

	mu    sync.Mutex
	boxes fakekit.Boxes[*box] // by id
}

// Call is one request the fake received.
type Call = fakekit.Call

type box struct {
	ID                 string
	Name               string
	State              string
	ErrorReason        string
	Labels             map[string]string
	Snapshot           string
	Target             string
	AutoStopInterval   int
	AutoDeleteInterval int
	BuildFrom          string
	CreatedAt          time.Time
	polls              int
	home               string
	procs              *fakekit.Procs
}

// New starts a fake with the given API key. Close it when done.
func New(apiKey string) *Server {
	s := &Server{APIKey: apiKey}
	s.Start(s.route)
	return s
}

// APIURL is the control-plane URL to give the client.
func (s *Server) APIURL() string { return s.URL + "/api" }

// Close kills every command still running and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	for _, b := range s.boxes.Live() {
		b.procs.KillAll()
		os.RemoveAll(b.home)
	}
	s.mu.Unlock()
	s.Stop()
}

// Ledger is the fake's record of sandboxes; Alive holds ids, in creation order.
type Ledger = fakekit.Ledger

// Ledger returns the record of sandboxes.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boxes.Ledger()
}

// Sandbox describes one live sandbox, for assertions.
type Sandbox struct {
	ID, Name, State, Snapshot, Target, BuildFrom string
	Labels                                       map[string]string
	AutoStopInterval, AutoDeleteInterval         int
	Home                                         string
}

// Sandbox returns a live sandbox by id or name.
func (s *Server) Sandbox(idOrName string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.find(idOrName)
	if b == nil {
		return Sandbox{}, false
	}
	return Sandbox{ID: b.ID, Name: b.Name, State: b.State, Snapshot: b.Snapshot, Target: b.Target, BuildFrom: b.BuildFrom,
		Labels: b.Labels, AutoStopInterval: b.AutoStopInterval, AutoDeleteInterval: b.AutoDeleteInterval, Home: b.home}, true
}

var (
	reBox     = regexp.MustCompile(`^/api/sandbox/([^/]+)$`)
	reBoxOp   = regexp.MustCompile(`^/api/sandbox/([^/]+)/(start|stop)$`)
	reToolbox = regexp.MustCompile(`^/toolbox/([^/]+)/(process/execute|files/upload|files/bulk-upload|files/download)$`)
)

func (s *Server) route(w http.ResponseWriter, r *http.Request) string {
	p := r.URL.Path
	var endpoint string
	var handler func(http.ResponseWriter, *http.Request, []string)
	var args []string
	switch {
	case p == "/api/sandbox" && r.Method == http.MethodPost:
		endpoint, handler = "create", s.create
	case p == "/api/sandbox" && r.Method == http.MethodGet:
		endpoint, handler = "list", s.list
	case reBox.MatchString(p) && r.Method == http.MethodGet:
		endpoint, handler, args = "get", s.get, reBox.FindStringSubmatch(p)[1:]
	case reBox.MatchString(p) && r.Method == http.MethodDelete:
		endpoint, handler, args = "delete", s.delete, reBox.FindStringSubmatch(p)[1:]
	case reBoxOp.MatchString(p) && r.Method == http.MethodPost:
		m := reBoxOp.FindStringSubmatch(p)
		endpoint, handler, args = m[2], s.startStop, m[1:]
	case reToolbox.MatchString(p):
		m := reToolbox.FindStringSubmatch(p)
		args = m[1:2]
		switch {
		case m[2] == "process/execute" && r.Method == http.MethodPost:
			endpoint, handler = "exec", s.execute
		case m[2] == "files/upload" && r.Method == http.MethodPost:
			endpoint, handler = "upload", s.upload
		case m[2] == "files/bulk-upload" && r.Method == http.MethodPost:
			endpoint, handler = "bulk-upload", s.bulkUpload
		case m[2] == "files/download" && r.Method == http.MethodGet:
			endpoint, handler = "download", s.download
		}
	}
	if handler == nil {
		apiError(w, r, http.StatusNotFound, fmt.Sprintf("Cannot %s %s", r.Method, p))
		return "unknown"
	}
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		apiError(w, r, http.StatusUnauthorized, "Invalid credentials")
		return endpoint
	}
	s.Faults.Serve(w, endpoint, func(w http.ResponseWriter, status int) { apiError(w, r, status, "injected fault") },
		func(w http.ResponseWriter) { handler(w, r, args) })
	return endpoint
}

type createBody struct {
	Name      string            `json:"name"`
	Snapshot  string            `json:"snapshot"`
	Labels    map[string]string `json:"labels"`
	Target    string            `json:"target"`
	BuildInfo *struct {
		DockerfileContent string `json:"dockerfileContent"`
	} `json:"buildInfo"`
	AutoStopInterval   *int `json:"autoStopInterval"`
	AutoDeleteInterval *int `json:"autoDeleteInterval"`
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, _ []string) {
	var in createBody
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		apiError(w, r, http.StatusBadRequest, "invalid body: "+err.Error())
		return
	}
	home, err := os.MkdirTemp("", "daytonafake-")
	if err != nil {
		apiError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := newID()
	if in.Name == "" {
		in.Name = id
	}
	if s.find(in.Name) != nil {
		os.RemoveAll(home)
		apiError(w, r, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", in.Name))
		return
	}
	b := &box{ID: id, Name: in.Name, State: "creating", Labels: in.Labels, Snapshot: in.Snapshot, Target: in.Target,
		AutoStopInterval: 15, AutoDeleteInterval: -1, CreatedAt: time.Now().UTC(), home: home, procs: &fakekit.Procs{}}
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	if in.AutoStopInterval != nil {
		b.AutoStopInterval = *in.AutoStopInterval
	}
	if in.AutoDeleteInterval != nil {
		b.AutoDeleteInterval = *in.AutoDeleteInterval
	}
	if in.BuildInfo != nil {
		b.BuildFrom = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(in.BuildInfo.DockerfileContent), "FROM "))
		b.State = "pending_build"
	}
	if b.Snapshot == "" && b.BuildFrom == "" {
		b.Snapshot = "daytonaio/sandbox:0.4.3"
	}
	s.boxes.Add(id, b)
	writeJSON(w, http.StatusOK, s.view(b))
}

// lookup returns the sandbox idOrName names, or answers the 404; s.mu must be held.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, idOrName string) *box {
	b := s.find(idOrName)
	if b == nil {
		apiError(w, r, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", idOrName))
	}
	return b
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.lookup(w, r, args[0])
	if b == nil {
		return
	}
	b.polls++
	if (b.State == "creating" || b.State == "pending_build" || b.State == "starting") && !s.NeverReady && b.polls > s.ReadyAfter {
		if s.FailWith != "" {
			b.State, b.ErrorReason = s.FailWith, s.FailReason
		} else {
			b.State = "started"
		}
	}
	writeJSON(w, http.StatusOK, s.view(b))
}

func (s *Server) startStop(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.lookup(w, r, args[0])
	if b == nil {
		return
	}
	if strings.HasSuffix(r.URL.Path, "/stop") {
		b.procs.KillAll()
		b.procs = &fakekit.Procs{}
		b.State = "stopped"
	} else {
		switch b.State {
		case "started":
		case "stopped", "archived", "paused":
			b.State, b.polls = "starting", 0
		default:
			apiError(w, r, http.StatusBadRequest, fmt.Sprintf("Sandbox %s is %s and cannot be started", b.ID, b.State))
			return
		}
	}
	writeJSON(w, http.StatusOK, s.view(b))
}

// Pause puts a sandbox into the "paused" state, as Daytona does for a sandbox paused by
// its owner: its commands stop, and only POST …/start brings it back.
func (s *Server) Pause(idOrName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.find(idOrName); b != nil {
		b.procs.KillAll()
		b.procs = &fakekit.Procs{}
		b.State = "paused"
	}
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	b := s.find(args[0])
	if b == nil {
		s.mu.Unlock()
		apiError(w, r, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", args[0]))
		return
	}
	s.boxes.Delete(b.ID)
	b.State = "destroying"
	v := s.view(b)
	s.mu.Unlock()
	b.procs.KillAll()
	os.RemoveAll(b.home)
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ []string) {
	q := r.URL.Query()
	var want map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &want); err != nil {
			apiError(w, r, http.StatusBadRequest, "labels must be a JSON object of strings")
			return
		}
	}
	states := q["states"]
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			apiError(w, r, http.StatusBadRequest, "limit must not be greater than 200")
			return
		}
		limit = n
	}
	start, _ := strconv.Atoi(q.Get("cursor"))
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*box
	for _, b := range s.boxes.Live() {
		if len(states) > 0 && !slices.Contains(states, b.State) {
			continue
		}
		ok := true
		for k, v := range want {
			if b.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			match = append(match, b)
		}
	}
	resp := struct {
		Items      []map[string]any `json:"items"`
		NextCursor *string          `json:"nextCursor"`
	}{Items: []map[string]any{}}
	end := min(start+limit, len(match))
	for _, b := range match[min(start, len(match)):end] {
		resp.Items = append(resp.Items, s.view(b))
	}
	if end < len(match) {
		next := strconv.Itoa(end)
		resp.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, resp)
}

// started returns the started sandbox id names, or answers the toolbox's error.
func (s *Server) started(w http.ResponseWriter, r *http.Request, id string) *box {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := s.boxes.Get(id)
	if b == nil {
		apiError(w, r, http.StatusNotFound, "sandbox not found")
		return nil
	}
	if b.State != "started" {
		apiError(w, r, http.StatusBadRequest, "failed to forward request to sandbox: Is the Sandbox started?")
		return nil
	}
	return b
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, args []string) {
	b := s.started(w, r, args[0])
	if b == nil {
		return
	}
	var in struct {
		Command string            `json:"command"`
		Timeout *uint32           `json:"timeout"`
		Cwd     *string           `json:"cwd"`
		Envs    map[string]string `json:"envs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		apiError(w, r, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if strings.TrimSpace(in.Command) == "" {
		apiError(w, r, http.StatusBadRequest, "command cannot be empty or whitespace-only")
		return
	}
	c := fakekit.Command{Path: "/bin/sh", Stdin: strings.NewReader(in.Command), Dir: b.home, Env: fakekit.BaseEnv(b.home), Combined: true}
	if in.Cwd != nil {
		c.Dir = *in.Cwd
	}
	for k, v := range in.Envs {
		c.Env = append(c.Env, k+"="+v)
	}
	if in.Timeout != nil && *in.Timeout > 0 {
		c.Timeout = time.Duration(*in.Timeout) * time.Second
	}
	// Like the daemon, the command outlives a client that hangs up.
	o := b.procs.Run(context.WithoutCancel(r.Context()), c)
	switch {
	case errors.Is(o.StartErr, fakekit.ErrKilled):
		apiError(w, r, http.StatusBadRequest, "failed to forward request to sandbox: Is the Sandbox started?")
	case o.StartErr != nil:
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": -1, "result": o.StartErr.Error()})
	case o.TimedOut:
		apiError(w, r, http.StatusRequestTimeout, "command execution timeout")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": o.ExitCode, "result": string(o.Stdout)})
	}
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, args []string) {
	if s.started(w, r, args[0]) == nil {
		return
	}
	dest := r.URL.Query().Get("path")
	if dest == "" {
		apiError(w, r, http.StatusBadRequest, "path is required")
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		apiError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	defer f.Close()
	if _, err := fakekit.WriteFile(dest, f); err != nil {
		apiError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) bulkUpload(w http.ResponseWriter, r *http.Request, args []string) {
	if s.started(w, r, args[0]) == nil {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		apiError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	type result struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	paths := map[string]string{}
	var done []result
	var errs []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			apiError(w, r, http.StatusBadRequest, err.Error())
			return
		}
		name := part.FormName()
		idx, field, ok := parseIndexed(name)
		if !ok {
			errs = append(errs, "unexpected field "+name)
			continue
		}
		switch field {
		case "path":
			v, _ := io.ReadAll(part)
			paths[idx] = string(v)
		case "file":
			dest, ok := paths[idx]
			if !ok {
				errs = append(errs, "file "+idx+" came before its path")
				continue
			}
			n, err := fakekit.WriteFile(dest, part)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			done = append(done, result{Path: dest, Bytes: n})
		}
		part.Close()
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": errs, "files": done})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": done})
}

func parseIndexed(name string) (idx, field string, ok bool) {
	// files[3].path
	rest, ok := strings.CutPrefix(name, "files[")
	if !ok {
		return "", "", false
	}
	idx, field, ok = strings.Cut(rest, "].")
	return idx, field, ok
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, args []string) {
	if s.started(w, r, args[0]) == nil {
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		apiError(w, r, http.StatusBadRequest, "path is required")
		return
	}
	abs, _ := filepath.Abs(p)
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		apiError(w, r, http.StatusNotFound, err.Error())
		return
	case err != nil:
		apiError(w, r, http.StatusBadRequest, err.Error())
		return
	case fi.IsDir():
		apiError(w, r, http.StatusBadRequest, "path must be a file")
		return
	}
	f, err := os.Open(abs)
	if err != nil {
		apiError(w, r, http.StatusForbidden, err.Error())
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", filepath.Base(abs)))
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	_, _ = io.Copy(w, f)
}

func (s *Server) find(idOrName string) *box {
	if b, ok := s.boxes.Get(idOrName); ok {
		return b
	}
	for _, b := range s.boxes.Live() {
		if b.Name == idOrName {
			return b
		}
	}
	return nil
}

func (s *Server) view(b *box) map[string]any {
	v := map[string]any{
		"id": b.ID, "name": b.Name, "organizationId": "org-fake", "snapshot": b.Snapshot, "user": "daytona",
		"env": map[string]string{}, "labels": b.Labels, "public": false, "networkBlockAll": false, "target": cmp.Or(b.Target, "us"),
		"cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "state": b.State, "desiredState": "started",
		"autoStopInterval": b.AutoStopInterval, "autoArchiveInterval": 10080, "autoDeleteInterval": b.AutoDeleteInterval,
		"createdAt": b.CreatedAt.Format(time.RFC3339), "updatedAt": time.Now().UTC().Format(time.RFC3339),
		"sandboxClass": "container", "runnerId": "runner-fake", "toolboxProxyUrl": s.URL + "/toolbox",
	}
	if b.ErrorReason != "" {
		v["errorReason"] = b.ErrorReason
	}
	if b.State == "destroying" {
		v["desiredState"] = "destroyed"
	}
	return v
}

// apiError writes Daytona's error body: the API's NestJS shape, or the toolbox's.
func apiError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	body := map[string]any{"statusCode": status, "message": msg, "path": r.URL.Path, "timestamp": time.Now().UTC().Format(time.RFC3339)}
	if strings.HasPrefix(r.URL.Path, "/toolbox/") {
		body["method"] = r.Method
		body["code"] = strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	} else {
		body["error"] = http.StatusText(status)
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
