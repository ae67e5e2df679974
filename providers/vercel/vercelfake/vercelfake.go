// Package vercelfake is an in-process fake of the Vercel Sandbox API (the v2/v3 named
// sandbox + session generation) for tests, following the behaviour of Vercel's own mock
// (packages/vercel-sandbox-mock) with Vercel's paths, bearer auth, required teamId and
// projectId, JSON shapes, {"error":{"code","message"}} errors and NDJSON command streams.
//
// Covered: POST /v3/sandboxes and /v2/sandboxes (create), GET /v2/sandboxes (list with
// tags=k:v, namePrefix, limit, cursor), GET /v2/sandboxes/{name} (resume=true),
// DELETE /v2/sandboxes/{name}, GET /v2/sandboxes/sessions/{id}, POST …/sessions/{id}/stop,
// POST …/sessions/{id}/cmd (wait+logs NDJSON, or detached), GET …/cmd/{cmdId}[?wait=true],
// POST …/cmd/{cmdId}/kill, POST …/fs/write (gzip tar, x-cwd "/" only), POST …/fs/read,
// POST …/fs/mkdir. Left out: snapshots, fork, PATCH, extend-timeout, network policy,
// interactive sessions, ports/routes beyond an empty list, command log replay.
//
// State: a new session is "pending" and turns "running" after ReadyAfter polls of GET
// …/sessions/{id}; NeverReady keeps it pending; FailWith ("failed", "aborted") ends it.
// A session stops when its timeout passes (its commands are killed; later calls get 410
// sandbox_stopped). Delete stops the session and removes the sandbox (404 afterwards).
//
// Commands run for real: command and args are executed directly (no shell) in a new
// process group, with the sandbox's and the command's env; the command timeout (ms) kills
// the group. Files are the host's files: fs/write extracts with the safe extractor at "/"
// (it refuses any other x-cwd: @vercel/sandbox never sends one, so nothing shows the
// service honours it), fs/read reads any host path.
package vercelfake

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
)

// Server is the fake. Configure its exported fields before the first request.
type Server struct {
	// Host serves the fake at Host.URL and logs its calls.
	fakekit.Host
	// Token, TeamID and ProjectID are the credentials every request must match.
	Token, TeamID, ProjectID string
	// ReadyAfter is the number of session polls before a session runs.
	ReadyAfter int
	// NeverReady keeps new sessions pending.
	NeverReady bool
	// FailWith ("failed", "aborted") is the status a new session reaches instead.
	FailWith string
	// Faults fails calls by endpoint: "create", "list", "get", "delete", "session",
	// "stop", "cmd", "cmd-get", "kill", "write", "read", "mkdir".
	Faults fakekit.Faults

	mu        sync.Mutex
	sandboxes fakekit.Boxes[*sandbox] // by name
	sessions  map[string]*session
	commands  map[string]*command
}

// Call is one request the fake received; RequestBytes is the request body's size.
type Call = fakekit.Call

type sandbox struct {
	Name       string
	Persistent bool
	Runtime    string
	Image      string
	Timeout    int64
	VCPUs      int
	Tags       map[string]string
	Region     string
	Source     string
	CreatedAt  time.Time
	sessionID  string
	home       string
}

type session struct {
	ID        string
	Sandbox   string
	Status    string
	Timeout   int64
	CreatedAt time.Time
	polls     int
	procs     *fakekit.Procs
	stopTimer *time.Timer
}

type command struct {
	ID, SessionID, Name, Cwd string
	Args                     []string
	StartedAt                time.Time
	ExitCode                 *int
	done                     chan struct{}
	stdout, stderr           []byte
}

// New starts a fake with the given credentials. Close it when done.
func New(token, teamID, projectID string) *Server {
	s := &Server{Token: token, TeamID: teamID, ProjectID: projectID,
		sessions: map[string]*session{}, commands: map[string]*command{}}
	s.Start(s.route)
	return s
}

// Close kills every command and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	for _, se := range s.sessions {
		se.procs.KillAll()
		if se.stopTimer != nil {
			se.stopTimer.Stop()
		}
	}
	for _, sb := range s.sandboxes.Live() {
		os.RemoveAll(sb.home)
	}
	s.mu.Unlock()
	s.Stop()
}

// Ledger is the fake's record of sandboxes; Alive holds names, in creation order.
type Ledger = fakekit.Ledger

// Ledger returns the record of sandboxes.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes.Ledger()
}

// Sandbox describes a live sandbox, for assertions.
type Sandbox struct {
	Name, Runtime, Image, Region, Source, SessionStatus string
	Persistent                                          bool
	Timeout                                             int64
	VCPUs                                               int
	Tags                                                map[string]string
}

// Sandbox returns a live sandbox by name.
func (s *Server) Sandbox(name string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes.Get(name)
	if !ok {
		return Sandbox{}, false
	}
	return Sandbox{Name: sb.Name, Runtime: sb.Runtime, Image: sb.Image, Region: sb.Region, Source: sb.Source,
		SessionStatus: s.sessions[sb.sessionID].Status, Persistent: sb.Persistent, Timeout: sb.Timeout, VCPUs: sb.VCPUs, Tags: sb.Tags}, true
}

// StopSession stops a sandbox's current session, as its timeout would.
func (s *Server) StopSession(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.sandboxes.Get(name); ok {
		s.stopLocked(s.sessions[sb.sessionID])
	}
}

// lookup returns the live sandbox name, or nil.
func (s *Server) lookup(name string) *sandbox {
	sb, _ := s.sandboxes.Get(name)
	return sb
}

var (
	reSandbox = regexp.MustCompile(`^/v2/sandboxes/([^/]+)$`)
	reSession = regexp.MustCompile(`^/v2/sandboxes/sessions/([^/]+)(/.*)?$`)
	reCmd     = regexp.MustCompile(`^/cmd/([^/]+)(/kill)?$`)
)

func (s *Server) route(w http.ResponseWriter, r *http.Request) string {
	p, m := strings.TrimPrefix(r.URL.Path, "/api"), r.Method
	var endpoint string
	var h func(http.ResponseWriter, *http.Request, []string)
	var args []string
	switch {
	case (p == "/v3/sandboxes" || p == "/v2/sandboxes") && m == http.MethodPost:
		endpoint, h = "create", s.create
	case p == "/v2/sandboxes" && m == http.MethodGet:
		endpoint, h = "list", s.list
	case reSession.MatchString(p):
		g := reSession.FindStringSubmatch(p)
		args = []string{g[1]}
		switch sub := g[2]; {
		case sub == "" && m == http.MethodGet:
			endpoint, h = "session", s.getSession
		case sub == "/stop" && m == http.MethodPost:
			endpoint, h = "stop", s.stopSession
		case sub == "/cmd" && m == http.MethodPost:
			endpoint, h = "cmd", s.runCommand
		case reCmd.MatchString(sub):
			c := reCmd.FindStringSubmatch(sub)
			args = append(args, c[1])
			switch {
			case c[2] == "" && m == http.MethodGet:
				endpoint, h = "cmd-get", s.getCommand
			case c[2] == "/kill" && m == http.MethodPost:
				endpoint, h = "kill", s.killCommand
			}
		case sub == "/fs/write" && m == http.MethodPost:
			endpoint, h = "write", s.fsWrite
		case sub == "/fs/read" && m == http.MethodPost:
			endpoint, h = "read", s.fsRead
		case sub == "/fs/mkdir" && m == http.MethodPost:
			endpoint, h = "mkdir", s.fsMkdir
		}
	case reSandbox.MatchString(p):
		args = reSandbox.FindStringSubmatch(p)[1:]
		switch m {
		case http.MethodGet:
			endpoint, h = "get", s.get
		case http.MethodDelete:
			endpoint, h = "delete", s.delete
		}
	}
	if h == nil {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("No route for %s %s", m, r.URL.Path))
		return "unknown"
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		apiError(w, http.StatusForbidden, "forbidden", "Not authorized")
		return endpoint
	}
	if r.URL.Query().Get("teamId") != s.TeamID {
		apiError(w, http.StatusForbidden, "forbidden", "You don't have permission to access the team "+r.URL.Query().Get("teamId"))
		return endpoint
	}
	s.Faults.Serve(w, endpoint, func(w http.ResponseWriter, status int) {
		apiError(w, status, "internal_server_error", "injected fault")
	}, func(w http.ResponseWriter) { h(w, r, args) })
	return endpoint
}

type createBody struct {
	ProjectID  string            `json:"projectId"`
	Name       string            `json:"name"`
	Runtime    string            `json:"runtime"`
	Image      string            `json:"image"`
	Timeout    *int64            `json:"timeout"`
	Persistent *bool             `json:"persistent"`
	Tags       map[string]string `json:"tags"`
	Region     string            `json:"region"`
	Resources  *struct {
		VCPUs int `json:"vcpus"`
	} `json:"resources"`
	Source *struct {
		Type       string `json:"type"`
		SnapshotID string `json:"snapshotId"`
	} `json:"source"`
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, _ []string) {
	var in createBody
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "Invalid JSON body")
		return
	}
	switch {
	case in.ProjectID != s.ProjectID:
		apiError(w, http.StatusBadRequest, "bad_request", "projectId is required and must be the project of the token")
		return
	case len(in.Tags) > 5:
		apiError(w, http.StatusBadRequest, "bad_request", "A sandbox can have at most 5 tags")
		return
	case strings.HasSuffix(r.URL.Path, "/v2/sandboxes") && in.Runtime == "":
		apiError(w, http.StatusBadRequest, "bad_request", "runtime is required on v2; use v3 for images")
		return
	case in.Source != nil && in.Source.Type == "snapshot":
		apiError(w, http.StatusGone, "snapshot_not_found", "Snapshot not found: "+in.Source.SnapshotID)
		return
	}
	home, err := os.MkdirTemp("", "vercelfake-")
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Name == "" {
		in.Name = "sandbox-" + newID()
	}
	if _, taken := s.sandboxes.Get(in.Name); taken {
		os.RemoveAll(home)
		apiError(w, http.StatusConflict, "conflict", "A sandbox named "+in.Name+" already exists")
		return
	}
	sb := &sandbox{Name: in.Name, Persistent: true, Runtime: in.Runtime, Image: in.Image, Timeout: 300_000, VCPUs: 2,
		Tags: in.Tags, Region: cmp.Or(in.Region, "iad1"), CreatedAt: time.Now(), home: home}
	if in.Image == "" && in.Runtime == "" {
		sb.Image = "vercel/sandbox/universal"
	}
	if in.Persistent != nil {
		sb.Persistent = *in.Persistent
	}
	if in.Timeout != nil {
		sb.Timeout = *in.Timeout
	}
	if in.Resources != nil && in.Resources.VCPUs > 0 {
		sb.VCPUs = in.Resources.VCPUs
	}
	se := s.startSessionLocked(sb)
	s.sandboxes.Add(sb.Name, sb)
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"sandbox": s.sandboxView(sb), "session": s.sessionView(se), "routes": []any{}, "resumed": false})
}

func (s *Server) startSessionLocked(sb *sandbox) *session {
	se := &session{ID: "se_" + newID(), Sandbox: sb.Name, Status: "pending", Timeout: sb.Timeout, CreatedAt: time.Now(), procs: &fakekit.Procs{}}
	if s.ReadyAfter == 0 && !s.NeverReady && s.FailWith == "" {
		se.Status = "running"
		s.armTimeoutLocked(se)
	}
	s.sessions[se.ID] = se
	sb.sessionID = se.ID
	return se
}

func (s *Server) armTimeoutLocked(se *session) {
	se.stopTimer = time.AfterFunc(time.Duration(se.Timeout)*time.Millisecond, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopLocked(se)
	})
}

func (s *Server) stopLocked(se *session) {
	if se == nil || se.Status == "stopped" {
		return
	}
	se.Status = "stopped"
	if se.stopTimer != nil {
		se.stopTimer.Stop()
	}
	go se.procs.KillAll()
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.sessions[args[0]]
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", "Session not found: "+args[0])
		return
	}
	se.polls++
	if se.Status == "pending" && !s.NeverReady && se.polls >= s.ReadyAfter {
		if s.FailWith != "" {
			se.Status = s.FailWith
		} else {
			se.Status = "running"
			s.armTimeoutLocked(se)
		}
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"session": s.sessionView(se), "routes": []any{}})
}

func (s *Server) stopSession(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.sessions[args[0]]
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", "Session not found: "+args[0])
		return
	}
	s.stopLocked(se)
	out := map[string]any{"session": s.sessionView(se)}
	if sb, ok := s.sandboxes.Get(se.Sandbox); ok {
		out["sandbox"] = s.sandboxView(sb)
	}
	fakekit.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, args []string) {
	if r.URL.Query().Get("projectId") != s.ProjectID {
		apiError(w, http.StatusBadRequest, "bad_request", "projectId is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes.Get(args[0])
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", "Sandbox not found: "+args[0])
		return
	}
	se := s.sessions[sb.sessionID]
	resumed := false
	if r.URL.Query().Get("resume") == "true" && se.Status != "running" && se.Status != "pending" {
		se = s.startSessionLocked(sb)
		resumed = true
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"sandbox": s.sandboxView(sb), "session": s.sessionView(se), "routes": []any{}, "resumed": resumed})
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, args []string) {
	if r.URL.Query().Get("projectId") != s.ProjectID {
		apiError(w, http.StatusBadRequest, "bad_request", "projectId is required")
		return
	}
	s.mu.Lock()
	sb, ok := s.sandboxes.Get(args[0])
	if !ok {
		s.mu.Unlock()
		apiError(w, http.StatusNotFound, "not_found", "Sandbox not found: "+args[0])
		return
	}
	se := s.sessions[sb.sessionID]
	s.stopLocked(se)
	s.sandboxes.Delete(sb.Name)
	view := s.sandboxView(sb)
	s.mu.Unlock()
	se.procs.KillAll()
	os.RemoveAll(sb.home)
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"sandbox": view})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ []string) {
	q := r.URL.Query()
	if q.Get("project") != s.ProjectID {
		apiError(w, http.StatusBadRequest, "bad_request", "project is required")
		return
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			apiError(w, http.StatusBadRequest, "bad_request", "limit must be between 1 and 100")
			return
		}
		limit = n
	}
	start, _ := strconv.Atoi(q.Get("cursor"))
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*sandbox
	for _, sb := range s.sandboxes.Live() {
		if !strings.HasPrefix(sb.Name, q.Get("namePrefix")) {
			continue
		}
		all := true
		for _, tag := range q["tags"] {
			k, v, _ := strings.Cut(tag, ":")
			if sb.Tags[k] != v {
				all = false
			}
		}
		if all {
			match = append(match, sb)
		}
	}
	sort.SliceStable(match, func(i, j int) bool { return match[i].CreatedAt.After(match[j].CreatedAt) })
	end := min(start+limit, len(match))
	views := []any{}
	for _, sb := range match[min(start, len(match)):end] {
		views = append(views, s.sandboxView(sb))
	}
	var next *string
	if end < len(match) {
		n := strconv.Itoa(end)
		next = &n
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"sandboxes": views, "pagination": map[string]any{"count": len(views), "next": next}})
}

// running returns the session and its sandbox, or answers 404/410.
func (s *Server) running(w http.ResponseWriter, id string) (*session, *sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.sessions[id]
	if !ok {
		apiError(w, http.StatusNotFound, "not_found", "Session not found: "+id)
		return nil, nil
	}
	if se.Status != "running" {
		apiError(w, http.StatusGone, "sandbox_stopped", "Sandbox is stopped")
		return nil, nil
	}
	return se, s.lookup(se.Sandbox)
}

func (s *Server) runCommand(w http.ResponseWriter, r *http.Request, args []string) {
	se, sb := s.running(w, args[0])
	if se == nil {
		return
	}
	var in struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Cwd     string            `json:"cwd"`
		Env     map[string]string `json:"env"`
		Wait    bool              `json:"wait"`
		Logs    bool              `json:"logs"`
		Timeout int64             `json:"timeout"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Command == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "command is required")
		return
	}
	path := in.Command
	if !strings.Contains(path, "/") {
		lp, err := lookPath(path)
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", "command not found: "+path)
			return
		}
		path = lp
	}
	home := sb.home
	cmd := &command{ID: "cmd_" + newID(), SessionID: se.ID, Name: in.Command, Args: in.Args, Cwd: cmp.Or(in.Cwd, home), StartedAt: time.Now(), done: make(chan struct{})}
	s.mu.Lock()
	s.commands[cmd.ID] = cmd
	s.mu.Unlock()
	c := fakekit.Command{Path: path, Args: in.Args, Dir: cmd.Cwd, Env: fakekit.BaseEnv(home), Timeout: time.Duration(in.Timeout) * time.Millisecond}
	keys := make([]string, 0, len(in.Env))
	for k := range in.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.Env = append(c.Env, k+"="+in.Env[k])
	}
	run := func(stdout, stderr io.Writer) fakekit.Outcome {
		c.Stdout, c.Stderr = stdout, stderr
		o := se.procs.Run(context.WithoutCancel(r.Context()), c)
		code := o.ExitCode
		if o.StartErr != nil {
			code = 127
		}
		s.mu.Lock()
		cmd.ExitCode, cmd.stdout, cmd.stderr = &code, o.Stdout, o.Stderr
		s.mu.Unlock()
		close(cmd.done)
		return o
	}
	if !in.Wait {
		go run(nil, nil)
		fakekit.WriteJSON(w, http.StatusOK, map[string]any{"command": s.commandView(cmd)})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	nd := &ndjson{w: w}
	nd.line(map[string]any{"command": s.commandView(cmd)})
	if in.Logs {
		out, errw := &logWriter{nd: nd, stream: "stdout"}, &logWriter{nd: nd, stream: "stderr"}
		run(out, errw)
		out.flush()
		errw.flush()
	} else {
		run(nil, nil)
	}
	nd.line(map[string]any{"command": s.commandView(cmd)})
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	cmd, ok := s.commands[args[1]]
	s.mu.Unlock()
	if !ok || cmd.SessionID != args[0] {
		apiError(w, http.StatusNotFound, "not_found", "Command not found: "+args[1])
		return
	}
	if r.URL.Query().Get("wait") == "true" {
		select {
		case <-cmd.done:
		case <-r.Context().Done():
			return
		}
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"command": s.commandView(cmd)})
}

func (s *Server) killCommand(w http.ResponseWriter, r *http.Request, args []string) {
	// The fake cannot signal one command of a session apart from the rest; it reports
	// the command as the real API does and leaves it to the client's own kill.
	s.getCommand(w, r, args)
}

func (s *Server) fsWrite(w http.ResponseWriter, r *http.Request, args []string) {
	if se, _ := s.running(w, args[0]); se == nil {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/gzip" {
		apiError(w, http.StatusBadRequest, "bad_request", "content-type must be application/gzip, got "+ct)
		return
	}
	// @vercel/sandbox always sends x-cwd "/" with full paths in the archive; nothing
	// shows the service honours another directory, so the fake refuses one.
	if dir := cmp.Or(r.Header.Get("X-Cwd"), "/"); dir != "/" {
		apiError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("x-cwd %q: the fake takes only \"/\", the one value @vercel/sandbox sends (entries carry full paths)", dir))
		return
	}
	if err := archive.Extract(r.Context(), r.Body, "/"); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "write failed: "+err.Error())
		return
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{})
}

// fsPath returns the host path a running session's fs/read or fs/mkdir body names
// (relative to its cwd, else the sandbox's home), or answers the error.
func (s *Server) fsPath(w http.ResponseWriter, r *http.Request, session string) (string, bool) {
	_, sb := s.running(w, session)
	if sb == nil {
		return "", false
	}
	var in struct{ Path, Cwd string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Path == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "path is required")
		return "", false
	}
	p := in.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(cmp.Or(in.Cwd, sb.home), p)
	}
	return p, true
}

func (s *Server) fsRead(w http.ResponseWriter, r *http.Request, args []string) {
	p, ok := s.fsPath(w, r, args[0])
	if !ok {
		return
	}
	f, err := os.Open(p)
	if err != nil {
		w.WriteHeader(http.StatusNotFound) // the real API answers a missing file with an empty 404
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		apiError(w, http.StatusBadRequest, "bad_request", "path is a directory")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, f)
}

func (s *Server) fsMkdir(w http.ResponseWriter, r *http.Request, args []string) {
	p, ok := s.fsPath(w, r, args[0])
	if !ok {
		return
	}
	if err := os.Mkdir(p, 0o755); err != nil { // not recursive, like the real API
		apiError(w, http.StatusBadRequest, "bad_request", "mkdir failed: "+err.Error())
		return
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) sandboxView(sb *sandbox) map[string]any {
	se := s.sessions[sb.sessionID]
	v := map[string]any{
		"name": sb.Name, "persistent": sb.Persistent, "region": sb.Region, "vcpus": sb.VCPUs, "memory": sb.VCPUs * 2048,
		"timeout": sb.Timeout, "createdAt": sb.CreatedAt.UnixMilli(), "updatedAt": time.Now().UnixMilli(),
		"currentSessionId": sb.sessionID, "status": se.Status, "cwd": "/vercel/sandbox",
	}
	if sb.Runtime != "" {
		v["runtime"] = sb.Runtime
	}
	if sb.Image != "" {
		v["image"] = sb.Image
	}
	if sb.Tags != nil {
		v["tags"] = sb.Tags
	}
	return v
}

func (s *Server) sessionView(se *session) map[string]any {
	sb := s.lookup(se.Sandbox)
	vcpus := 2
	if sb != nil {
		vcpus = sb.VCPUs
	}
	return map[string]any{
		"id": se.ID, "memory": vcpus * 2048, "vcpus": vcpus, "region": "iad1", "timeout": se.Timeout, "status": se.Status,
		"requestedAt": se.CreatedAt.UnixMilli(), "createdAt": se.CreatedAt.UnixMilli(), "updatedAt": time.Now().UnixMilli(),
		"cwd": "/vercel/sandbox",
	}
}

func (s *Server) commandView(c *command) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := map[string]any{"id": c.ID, "name": c.Name, "args": c.Args, "cwd": c.Cwd, "sessionId": c.SessionID,
		"exitCode": nil, "startedAt": c.StartedAt.UnixMilli()}
	if c.ExitCode != nil {
		v["exitCode"] = *c.ExitCode
		v["durationMs"] = time.Since(c.StartedAt).Milliseconds()
	}
	return v
}

// ndjson writes JSON lines and flushes each.
type ndjson struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (n *ndjson) line(v any) {
	b, _ := json.Marshal(v)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.w.Write(append(b, '\n'))
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

// logWriter turns output into log lines. Like the real service, the data field is a JSON
// string, so bytes that are not UTF-8 become U+FFFD; a character split across two writes
// is held back until it is whole.
type logWriter struct {
	nd      *ndjson
	stream  string
	pending []byte
}

func (l *logWriter) Write(p []byte) (int, error) {
	buf := append(l.pending, p...)
	cut := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	l.emit(buf[:cut])
	l.pending = append([]byte(nil), buf[cut:]...)
	return len(p), nil
}

func (l *logWriter) flush() {
	l.emit(l.pending)
	l.pending = nil
}

func (l *logWriter) emit(b []byte) {
	if len(b) > 0 {
		l.nd.line(map[string]any{"stream": l.stream, "data": string(bytes.ToValidUTF8(b, []byte("\uFFFD")))})
	}
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	fakekit.WriteJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("not found")
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
