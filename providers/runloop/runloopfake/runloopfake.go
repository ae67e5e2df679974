// Package runloopfake is an in-process fake of Runloop's devbox API for tests, with
// Runloop's paths, bearer auth, JSON shapes (DevboxView, DevboxAsyncExecutionDetailView),
// long-polls that answer 408 when their hold passes, de-duplication of creates by the
// idempotency key in x-request-id (where Runloop's SDKs send it) and of executes by
// command_id, and output cut to the last last_n lines with *_truncated flags.
//
// Covered: POST/GET /v1/devboxes (create; list by status with limit, starting_after,
// has_more), GET /v1/devboxes/{id}, POST …/{id}/wait_for_status, …/shutdown, …/suspend,
// …/resume, …/execute, …/execute_async, …/executions/{eid}/wait_for_status,
// …/upload_file (multipart path + file), …/download_file, and GET /v1/blueprints?name=.
// Left out: execute_sync, executions/{eid}/kill and the SSE output streams, snapshots,
// tunnels, keep_alive, logs, secrets, code mounts, blueprint builds (blueprints are
// seeded with Blueprints).
//
// State: a devbox is "provisioning", then "initializing", then "running", advancing one
// step per status read or long-poll round after ReadyAfter reads; NeverReady keeps it
// provisioning; FailWith sets "failure" with that failure_reason. Shutdown kills its
// commands; the devbox stays listable as "shutdown", and a second shutdown is refused
// with 400. A long-poll holds for min(timeout_seconds, Hold).
//
// Commands run for real with /bin/sh -c in a new process group, in the devbox's own
// temporary home; there is no server-side timeout, as on Runloop. Files are the host's
// files: the fake does not jail paths.
package runloopfake

import (
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
	APIKey string
	// ReadyAfter is the number of status reads before a devbox starts to advance.
	ReadyAfter int
	// NeverReady keeps new devboxes provisioning; FailWith makes them fail with that
	// failure_reason instead of running.
	NeverReady bool
	FailWith   string
	// Hold caps every long-poll and optimistic wait (Runloop holds up to 25-30 s).
	Hold time.Duration
	// Blueprints seeds GET /v1/blueprints: name → status ("build_complete", "failed").
	Blueprints map[string]string
	// Faults fails calls by endpoint: "create", "get", "list", "wait", "shutdown",
	// "resume", "suspend", "execute", "execute_async", "exec-wait", "upload",
	// "download", "blueprints".
	Faults fakekit.Faults

	mu          sync.Mutex
	boxes       fakekit.Boxes[*devbox] // by id; a devbox is never deleted, only shut down
	idempotency map[string]string      // x-request-id → devbox id
	execs       map[string]*execution
	byCommandID map[string]*execution
}

// Call is one request the fake received.
type Call = fakekit.Call

type devbox struct {
	ID, Name, Status, FailureReason string
	Metadata                        map[string]string
	BlueprintID, BlueprintName      string
	SnapshotID                      string
	KeepAlive                       int
	ResourceSize                    string
	CreatedAt                       time.Time
	reads                           int
	home                            string
	procs                           *fakekit.Procs
	changed                         chan struct{} // closed and replaced on every status change
}

type execution struct {
	ID, DevboxID   string
	done           chan struct{}
	exit           int
	stdout, stderr []byte
}

// New starts a fake with the given API key. Close it when done.
func New(apiKey string) *Server {
	s := &Server{APIKey: apiKey, Hold: 25 * time.Second, idempotency: map[string]string{},
		execs: map[string]*execution{}, byCommandID: map[string]*execution{}}
	s.Start(s.route)
	return s
}

// Close kills every command and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	for _, b := range s.boxes.Live() {
		b.procs.KillAll()
		os.RemoveAll(b.home)
	}
	s.mu.Unlock()
	s.Stop()
}

// Ledger is the fake's record of devboxes.
type Ledger struct {
	Created, ShutDown int
	// Alive lists devboxes not shut down (nor failed), in creation order.
	Alive []string
}

// Ledger returns the record of devboxes.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	boxes := s.boxes.Live()
	l := Ledger{Created: len(boxes)}
	for _, b := range boxes {
		switch b.Status {
		case "shutdown":
			l.ShutDown++
		case "failure":
		default:
			l.Alive = append(l.Alive, b.ID)
		}
	}
	return l
}

// Devbox describes a devbox, for assertions.
type Devbox struct {
	ID, Name, Status, BlueprintID, BlueprintName, SnapshotID, ResourceSize string
	Metadata                                                               map[string]string
	KeepAlive                                                              int
}

// Devbox returns a devbox by id.
func (s *Server) Devbox(id string) (Devbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes.Get(id)
	if !ok {
		return Devbox{}, false
	}
	return Devbox{ID: b.ID, Name: b.Name, Status: b.Status, BlueprintID: b.BlueprintID, BlueprintName: b.BlueprintName,
		SnapshotID: b.SnapshotID, ResourceSize: b.ResourceSize, Metadata: b.Metadata, KeepAlive: b.KeepAlive}, true
}

// Suspend suspends a running devbox, as its idle policy would.
func (s *Server) Suspend(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.boxes.Get(id); ok {
		s.setStatus(b, "suspended")
	}
}

var (
	reBox  = regexp.MustCompile(`^/v1/devboxes/([^/]+)$`)
	reOp   = regexp.MustCompile(`^/v1/devboxes/([^/]+)/(wait_for_status|shutdown|suspend|resume|execute|execute_async|upload_file|download_file)$`)
	reExec = regexp.MustCompile(`^/v1/devboxes/([^/]+)/executions/([^/]+)/wait_for_status$`)
)

func (s *Server) route(w http.ResponseWriter, r *http.Request) string {
	p, m := r.URL.Path, r.Method
	var endpoint string
	var h func(http.ResponseWriter, *http.Request, []string)
	var args []string
	switch {
	case p == "/v1/devboxes" && m == http.MethodPost:
		endpoint, h = "create", s.create
	case p == "/v1/devboxes" && m == http.MethodGet:
		endpoint, h = "list", s.list
	case p == "/v1/blueprints" && m == http.MethodGet:
		endpoint, h = "blueprints", s.blueprints
	case reBox.MatchString(p) && m == http.MethodGet:
		endpoint, h, args = "get", s.get, reBox.FindStringSubmatch(p)[1:]
	case reExec.MatchString(p) && m == http.MethodPost:
		endpoint, h, args = "exec-wait", s.waitExecution, reExec.FindStringSubmatch(p)[1:]
	case reOp.MatchString(p) && m == http.MethodPost:
		g := reOp.FindStringSubmatch(p)
		args = g[1:2]
		switch g[2] {
		case "wait_for_status":
			endpoint, h = "wait", s.waitDevbox
		case "shutdown", "suspend", "resume":
			endpoint, h = g[2], s.lifecycle
		case "execute":
			endpoint, h = "execute", s.execute
		case "execute_async":
			endpoint, h = "execute_async", s.execute
		case "upload_file":
			endpoint, h = "upload", s.upload
		case "download_file":
			endpoint, h = "download", s.download
		}
	}
	if h == nil {
		apiError(w, http.StatusNotFound, "Not Found: "+m+" "+p)
		return "unknown"
	}
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		apiError(w, http.StatusUnauthorized, "Invalid API key")
		return endpoint
	}
	s.Faults.Serve(w, endpoint, func(w http.ResponseWriter, status int) { apiError(w, status, "injected fault") },
		func(w http.ResponseWriter) { h(w, r, args) })
	return endpoint
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, _ []string) {
	var in struct {
		Name             string            `json:"name"`
		BlueprintID      string            `json:"blueprint_id"`
		BlueprintName    string            `json:"blueprint_name"`
		SnapshotID       string            `json:"snapshot_id"`
		Metadata         map[string]string `json:"metadata"`
		LaunchParameters struct {
			KeepAlive    *int   `json:"keep_alive_time_seconds"`
			ResourceSize string `json:"resource_size_request"`
		} `json:"launch_parameters"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		apiError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	n := 0
	for _, v := range []string{in.BlueprintID, in.BlueprintName, in.SnapshotID} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		apiError(w, http.StatusBadRequest, "at most one of blueprint_id, blueprint_name and snapshot_id may be set")
		return
	}
	if in.BlueprintName != "" && s.Blueprints[in.BlueprintName] != "build_complete" {
		apiError(w, http.StatusBadRequest, "Blueprint not found: "+in.BlueprintName)
		return
	}
	if ka := in.LaunchParameters.KeepAlive; ka != nil && (*ka < 1 || *ka > 172800) {
		apiError(w, http.StatusBadRequest, "keep_alive_time_seconds must be between 1 and 172800")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := r.Header.Get("X-Request-Id")
	if id, ok := s.idempotency[key]; ok && key != "" {
		b, _ := s.boxes.Get(id)
		fakekit.WriteJSON(w, http.StatusOK, s.view(b))
		return
	}
	home, err := os.MkdirTemp("", "runloopfake-")
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	b := &devbox{ID: "dbx_" + newID(), Name: in.Name, Status: "provisioning", Metadata: in.Metadata, BlueprintID: in.BlueprintID,
		BlueprintName: in.BlueprintName, SnapshotID: in.SnapshotID, KeepAlive: 3600, ResourceSize: in.LaunchParameters.ResourceSize,
		CreatedAt: time.Now(), home: home, procs: &fakekit.Procs{}, changed: make(chan struct{})}
	if b.Metadata == nil {
		b.Metadata = map[string]string{}
	}
	if ka := in.LaunchParameters.KeepAlive; ka != nil {
		b.KeepAlive = *ka
	}
	s.boxes.Add(b.ID, b)
	if key != "" {
		s.idempotency[key] = b.ID
	}
	fakekit.WriteJSON(w, http.StatusOK, s.view(b))
}

// advance moves a booting devbox one step; called on every status read.
func (s *Server) advance(b *devbox) {
	b.reads++
	if s.NeverReady || b.reads <= s.ReadyAfter {
		return
	}
	switch b.Status {
	case "provisioning":
		if s.FailWith != "" {
			b.FailureReason = s.FailWith
			s.setStatus(b, "failure")
			return
		}
		s.setStatus(b, "initializing")
	case "initializing", "resuming":
		s.setStatus(b, "running")
	}
}

func (s *Server) setStatus(b *devbox, st string) {
	b.Status = st
	close(b.changed)
	b.changed = make(chan struct{})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes.Get(args[0])
	if !ok {
		apiError(w, http.StatusNotFound, "Devbox not found: "+args[0])
		return
	}
	s.advance(b)
	fakekit.WriteJSON(w, http.StatusOK, s.view(b))
}

// waitBody is the body of both wait_for_status long-polls.
type waitBody struct {
	Statuses []string `json:"statuses"`
	Timeout  *int     `json:"timeout_seconds"`
}

// decodeWait reads a wait_for_status body, or answers the error.
func decodeWait(w http.ResponseWriter, r *http.Request) (waitBody, bool) {
	var in waitBody
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Statuses) == 0 {
		apiError(w, http.StatusBadRequest, "statuses must list at least one status")
		return in, false
	}
	return in, true
}

func (s *Server) waitDevbox(w http.ResponseWriter, r *http.Request, args []string) {
	in, ok := decodeWait(w, r)
	if !ok {
		return
	}
	deadline := time.Now().Add(s.hold(in.Timeout, 30))
	for {
		s.mu.Lock()
		b, ok := s.boxes.Get(args[0])
		if !ok {
			s.mu.Unlock()
			apiError(w, http.StatusNotFound, "Devbox not found: "+args[0])
			return
		}
		s.advance(b)
		if slices.Contains(in.Statuses, b.Status) {
			v := s.view(b)
			s.mu.Unlock()
			fakekit.WriteJSON(w, http.StatusOK, v)
			return
		}
		changed := b.changed
		s.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			apiError(w, http.StatusRequestTimeout, "Timed out waiting for devbox status")
			return
		}
		select {
		case <-changed:
		case <-time.After(min(left, 50*time.Millisecond)):
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) hold(requested *int, max int) time.Duration {
	secs := max
	if requested != nil && *requested > 0 && *requested < max {
		secs = *requested
	}
	return min(time.Duration(secs)*time.Second, s.Hold)
}

func (s *Server) lifecycle(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	b, ok := s.boxes.Get(args[0])
	if !ok {
		s.mu.Unlock()
		apiError(w, http.StatusNotFound, "Devbox not found: "+args[0])
		return
	}
	var kill bool
	switch op := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]; op {
	case "shutdown":
		if b.Status == "shutdown" || b.Status == "failure" {
			s.mu.Unlock()
			apiError(w, http.StatusBadRequest, "Devbox "+b.ID+" is already "+b.Status)
			return
		}
		s.setStatus(b, "shutdown")
		kill = true
	case "suspend":
		s.setStatus(b, "suspended")
	case "resume":
		if b.Status != "suspended" {
			s.mu.Unlock()
			apiError(w, http.StatusBadRequest, "Devbox "+b.ID+" is not suspended")
			return
		}
		b.reads = 0
		s.setStatus(b, "resuming")
	}
	v := s.view(b)
	s.mu.Unlock()
	if kill {
		b.procs.KillAll()
	}
	fakekit.WriteJSON(w, http.StatusOK, v)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ []string) {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5000 {
			apiError(w, http.StatusBadRequest, "limit must be between 1 and 5000")
			return
		}
		limit = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*devbox
	boxes := s.boxes.Live()
	for _, b := range slices.Backward(boxes) { // newest first
		if st := q.Get("status"); st != "" && b.Status != st {
			continue
		}
		match = append(match, b)
	}
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(match, func(b *devbox) bool { return b.ID == after })
		match = match[i+1:]
	}
	page := match[:min(limit, len(match))]
	views := []any{}
	for _, b := range page {
		views = append(views, s.view(b))
	}
	out := map[string]any{"devboxes": views, "has_more": len(match) > len(page)}
	if q.Get("include_total_count") != "false" {
		out["total_count"] = len(match)
	}
	fakekit.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) blueprints(w http.ResponseWriter, r *http.Request, _ []string) {
	name := r.URL.Query().Get("name")
	var out []any
	for n, st := range s.Blueprints {
		if name == "" || n == name {
			out = append(out, map[string]any{"id": "bpt_" + strings.ReplaceAll(n, "-", ""), "name": n, "status": st})
		}
	}
	if out == nil {
		out = []any{}
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"blueprints": out, "has_more": false})
}

// running returns a running devbox, or answers the error.
func (s *Server) running(w http.ResponseWriter, id string) *devbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes.Get(id)
	if !ok {
		apiError(w, http.StatusNotFound, "Devbox not found: "+id)
		return nil
	}
	if b.Status != "running" {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("Devbox %s is %s, not running", id, b.Status))
		return nil
	}
	return b
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, args []string) {
	b := s.running(w, args[0])
	if b == nil {
		return
	}
	var in struct {
		Command           string `json:"command"`
		CommandID         string `json:"command_id"`
		OptimisticTimeout *int   `json:"optimistic_timeout"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Command == "" {
		apiError(w, http.StatusBadRequest, "command is required")
		return
	}
	optimistic := strings.HasSuffix(r.URL.Path, "/execute")
	if optimistic && in.CommandID == "" {
		apiError(w, http.StatusBadRequest, "command_id is required")
		return
	}
	s.mu.Lock()
	ex, dup := s.byCommandID[in.CommandID]
	if !dup {
		ex = &execution{ID: "exe_" + newID(), DevboxID: b.ID, done: make(chan struct{})}
		s.execs[ex.ID] = ex
		if in.CommandID != "" {
			s.byCommandID[in.CommandID] = ex
		}
	}
	s.mu.Unlock()
	if !dup {
		// The command outlives this request, as on Runloop; the fake's Close kills what still runs.
		go func(ctx context.Context) {
			shell := "/bin/bash"
			if _, err := os.Stat(shell); err != nil {
				shell = "/bin/sh"
			}
			o := b.procs.Run(ctx, fakekit.Command{Path: shell, Args: []string{"-c", in.Command}, Dir: b.home, Env: fakekit.BaseEnv(b.home)})
			s.mu.Lock()
			ex.exit, ex.stdout, ex.stderr = o.ExitCode, o.Stdout, o.Stderr
			if o.StartErr != nil {
				ex.exit, ex.stderr = 127, []byte(o.StartErr.Error())
			}
			s.mu.Unlock()
			close(ex.done)
		}(context.WithoutCancel(r.Context()))
	}
	if optimistic {
		select {
		case <-ex.done:
		case <-time.After(s.hold(in.OptimisticTimeout, 25)):
		case <-r.Context().Done():
			return
		}
	}
	fakekit.WriteJSON(w, http.StatusOK, s.execView(ex, lastN(r)))
}

func (s *Server) waitExecution(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	ex, ok := s.execs[args[1]]
	s.mu.Unlock()
	if !ok || ex.DevboxID != args[0] {
		apiError(w, http.StatusNotFound, "Execution not found: "+args[1])
		return
	}
	in, ok := decodeWait(w, r)
	if !ok {
		return
	}
	if !slices.Contains(in.Statuses, "running") && !slices.Contains(in.Statuses, "queued") {
		select {
		case <-ex.done:
		case <-time.After(s.hold(in.Timeout, 25)):
			apiError(w, http.StatusRequestTimeout, "Timed out waiting for execution status")
			return
		case <-r.Context().Done():
			return
		}
	}
	fakekit.WriteJSON(w, http.StatusOK, s.execView(ex, lastN(r)))
}

func lastN(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("last_n"))
	if err != nil || n <= 0 {
		return 100
	}
	return n
}

func (s *Server) execView(ex *execution, n int) map[string]any {
	v := map[string]any{"devbox_id": ex.DevboxID, "execution_id": ex.ID, "status": "running"}
	select {
	case <-ex.done:
	default:
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out, outCut := tailLines(ex.stdout, n)
	errOut, errCut := tailLines(ex.stderr, n)
	v["status"], v["exit_status"] = "completed", ex.exit
	v["stdout"], v["stderr"] = string(out), string(errOut)
	v["stdout_truncated"], v["stderr_truncated"] = outCut, errCut
	return v
}

// tailLines keeps the last n lines of b.
func tailLines(b []byte, n int) ([]byte, bool) {
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) <= n {
		return b, false
	}
	return []byte(strings.Join(lines[len(lines)-n:], "")), true
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, args []string) {
	b := s.running(w, args[0])
	if b == nil {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	dest := ""
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, err.Error())
			return
		}
		switch part.FormName() {
		case "path":
			v, _ := io.ReadAll(part)
			dest = string(v)
		case "file":
			if dest == "" {
				apiError(w, http.StatusBadRequest, "path must come before file")
				return
			}
			if !filepath.IsAbs(dest) {
				dest = filepath.Join(b.home, dest)
			}
			if _, err := fakekit.WriteFile(dest, part); err != nil {
				apiError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
	}
	if dest == "" {
		apiError(w, http.StatusBadRequest, "path and file are required")
		return
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, args []string) {
	b := s.running(w, args[0])
	if b == nil {
		return
	}
	var in struct{ Path string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Path == "" {
		apiError(w, http.StatusBadRequest, "path is required")
		return
	}
	p := in.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(b.home, p)
	}
	f, err := os.Open(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Runloop documents the status of a missing file (404), not the wording of the
		// body: this one gives a client nothing to match but the status.
		fakekit.WriteJSON(w, http.StatusNotFound, map[string]any{"error_code": 404})
		return
	case err != nil:
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		apiError(w, http.StatusBadRequest, "path is a directory: "+in.Path)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, f)
}

func (s *Server) view(b *devbox) map[string]any {
	v := map[string]any{
		"id": b.ID, "name": b.Name, "status": b.Status, "metadata": b.Metadata, "capabilities": []string{},
		"create_time_ms": b.CreatedAt.UnixMilli(), "state_transitions": []any{},
		"launch_parameters": map[string]any{"keep_alive_time_seconds": b.KeepAlive, "resource_size_request": b.ResourceSize},
	}
	if b.FailureReason != "" {
		v["failure_reason"] = b.FailureReason
	}
	if b.BlueprintID != "" {
		v["blueprint_id"] = b.BlueprintID
	}
	if b.SnapshotID != "" {
		v["snapshot_id"] = b.SnapshotID
	}
	if b.Status == "shutdown" {
		v["shutdown_reason"] = "api_shutdown"
		v["end_time_ms"] = time.Now().UnixMilli()
	}
	return v
}

func apiError(w http.ResponseWriter, status int, msg string) {
	fakekit.WriteJSON(w, status, map[string]any{"message": msg})
}

func newID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
