// Package langsmithfake is an in-process fake of the LangSmith Sandboxes API for tests:
// the control plane under /v2/sandboxes and one data plane per sandbox under /dp/{name}
// (returned as dataplane_url), with the X-Api-Key header, LangSmith's JSON shapes and its
// error bodies ({"detail": {"error", "message"}}, pydantic lists, and the flat 403
// FeatureDisabled body of an organisation without sandboxes).
//
// Covered: POST/GET /v2/sandboxes/boxes (create; list with repeated label=k=v,
// name_contains, limit, offset), GET/DELETE /v2/sandboxes/boxes/{name}, GET …/{name}/status,
// POST …/{name}/start and /stop, GET/POST /v2/sandboxes/snapshots, GET …/snapshots/{id},
// and on the data plane POST /execute, POST /upload?path= and GET /download?path=. Left
// out: the /execute/ws WebSocket, PATCH, service URLs, tunnels, registries, snapshot
// capture, proxy and mount configs.
//
// State: a sandbox is "provisioning" and turns "ready" after ReadyAfter status polls;
// NeverReady keeps it provisioning; FailWith makes it "failed" with that status_message.
// A snapshot is "building" for SnapshotBuildPolls polls. FeatureDisabled answers every
// control-plane call with the 403. Delete kills the sandbox's commands and forgets it.
//
// Commands run for real: `{shell} -c {command}` in a new process group with the request's
// env and cwd; the timeout (seconds) kills the group and answers 408 CommandTimeout.
// Files are the host's files: the fake does not jail paths.
package langsmithfake

import (
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
	// ReadyAfter is the number of status polls before a sandbox is ready.
	ReadyAfter int
	// NeverReady keeps sandboxes provisioning; FailWith fails them with that message.
	NeverReady bool
	FailWith   string
	// FeatureDisabled answers control-plane calls with 403 FeatureDisabled.
	FeatureDisabled bool
	// LabelFilterUnsupported answers a list with label= by 422, as accounts without
	// label filtering do.
	LabelFilterUnsupported bool
	// ListEchoesOffset makes a list answer carry the offset it was asked for instead of
	// the offset of the next page: the API documents the field only as an offset, and
	// LangSmith's SDK pages without reading it.
	ListEchoesOffset bool
	// SnapshotBuildPolls is how many polls a new snapshot stays "building".
	SnapshotBuildPolls int
	// Faults fails calls by endpoint: "create", "list", "get", "status", "delete",
	// "start", "stop", "snapshots", "snapshot-create", "snapshot-get", "execute",
	// "upload", "download".
	Faults fakekit.Faults

	mu        sync.Mutex
	boxes     fakekit.Boxes[*box] // by name
	snapshots map[string]*snapshot
}

// Call is one request the fake received.
type Call = fakekit.Call

type box struct {
	ID, Name, Status, StatusMessage string
	Labels                          map[string]string
	Snapshot, SnapshotID            string
	IdleTTLSeconds, DeleteAfterStop int
	VCPUs                           int
	MemBytes, FSBytes               int64
	CreatedAt                       time.Time
	polls                           int
	home                            string
	procs                           *fakekit.Procs
}

type snapshot struct {
	ID, Name, Status, Image string
	FSBytes                 int64
	polls                   int
}

// New starts a fake with the given API key. Close it when done.
func New(apiKey string) *Server {
	s := &Server{APIKey: apiKey, snapshots: map[string]*snapshot{}}
	s.Start(s.route)
	return s
}

// APIURL is the endpoint to give the client (it appends /v2/sandboxes).
func (s *Server) APIURL() string { return s.URL }

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

// AddSnapshot seeds a snapshot with the given status and returns its id.
func (s *Server) AddSnapshot(name, status string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := &snapshot{ID: newUUID(), Name: name, Status: status}
	s.snapshots[sn.ID] = sn
	return sn.ID
}

// AddSandbox seeds a ready sandbox with the given name and labels, as if created earlier
// (by another run, or by someone else when labels lack talkops's).
func (s *Server) AddSandbox(name string, labels map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.boxes.Add(name, &box{ID: newUUID(), Name: name, Status: "ready", Labels: labels, IdleTTLSeconds: 600,
		DeleteAfterStop: 60, CreatedAt: time.Now().UTC(), procs: &fakekit.Procs{}})
}

// Snapshot describes a snapshot by name, for assertions.
type Snapshot struct{ ID, Name, Status, Image string }

// Snapshots returns every snapshot.
func (s *Server) Snapshots() []Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Snapshot
	for _, sn := range s.snapshots {
		out = append(out, Snapshot{ID: sn.ID, Name: sn.Name, Status: sn.Status, Image: sn.Image})
	}
	return out
}

// Ledger is the fake's record of sandboxes; Alive holds names, in creation order.
type Ledger = fakekit.Ledger

// Ledger returns the record of sandboxes.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boxes.Ledger()
}

// Sandbox describes a live sandbox, for assertions.
type Sandbox struct {
	Name, Status, Snapshot, SnapshotID string
	Labels                             map[string]string
	IdleTTLSeconds, DeleteAfterStop    int
	VCPUs                              int
	MemBytes, FSBytes                  int64
}

// Sandbox returns a live sandbox by name.
func (s *Server) Sandbox(name string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes.Get(name)
	if !ok {
		return Sandbox{}, false
	}
	return Sandbox{Name: b.Name, Status: b.Status, Snapshot: b.Snapshot, SnapshotID: b.SnapshotID, Labels: b.Labels,
		IdleTTLSeconds: b.IdleTTLSeconds, DeleteAfterStop: b.DeleteAfterStop, VCPUs: b.VCPUs, MemBytes: b.MemBytes, FSBytes: b.FSBytes}, true
}

// box returns the live sandbox name, or nil.
func (s *Server) box(name string) *box {
	b, _ := s.boxes.Get(name)
	return b
}

var (
	reBox      = regexp.MustCompile(`^/v2/sandboxes/boxes/([^/]+)(/status|/start|/stop)?$`)
	reSnapshot = regexp.MustCompile(`^/v2/sandboxes/snapshots/([^/]+)$`)
	reDP       = regexp.MustCompile(`^/dp/([^/]+)/(execute|upload|download)$`)
)

func (s *Server) route(w http.ResponseWriter, r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/api")
	endpoint, h, args := s.match(r.Method, p)
	if h == nil {
		fakekit.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
		return "unknown"
	}
	if !strings.EqualFold(r.Header.Get("X-Api-Key"), s.APIKey) || r.Header.Get("X-Api-Key") == "" {
		fakekit.WriteJSON(w, http.StatusUnauthorized, map[string]any{"detail": "Invalid token"})
		return endpoint
	}
	// FeatureDisabled turns off the control plane; the data plane (/dp/) still answers.
	if s.FeatureDisabled && !strings.HasPrefix(p, "/dp/") {
		fakekit.WriteJSON(w, http.StatusForbidden, map[string]any{"error": "FeatureDisabled", "message": "Sandbox feature is not enabled for this organization"})
		return endpoint
	}
	s.Faults.Serve(w, endpoint, func(w http.ResponseWriter, status int) { detail(w, status, "InternalError", "injected fault") },
		func(w http.ResponseWriter) { h(w, r, args) })
	return endpoint
}

// match finds the endpoint for a method and a path (without /api): its name, its
// handler (nil when there is none) and the arguments cut out of the path.
func (s *Server) match(method, p string) (endpoint string, h func(http.ResponseWriter, *http.Request, []string), args []string) {
	pattern := p
	if g := reBox.FindStringSubmatch(p); g != nil {
		pattern, args = "/v2/sandboxes/boxes/{id}"+g[2], g[1:2]
	} else if g := reSnapshot.FindStringSubmatch(p); g != nil {
		pattern, args = "/v2/sandboxes/snapshots/{id}", g[1:]
	} else if g := reDP.FindStringSubmatch(p); g != nil {
		pattern, args = "/dp/{id}/"+g[2], g[1:2]
	}
	switch method + " " + pattern {
	case "POST /v2/sandboxes/boxes":
		return "create", s.create, args
	case "GET /v2/sandboxes/boxes":
		return "list", s.list, args
	case "GET /v2/sandboxes/boxes/{id}":
		return "get", s.get, args
	case "DELETE /v2/sandboxes/boxes/{id}":
		return "delete", s.delete, args
	case "GET /v2/sandboxes/boxes/{id}/status":
		return "status", s.status, args
	case "POST /v2/sandboxes/boxes/{id}/start":
		return "start", s.startStop, args
	case "POST /v2/sandboxes/boxes/{id}/stop":
		return "stop", s.startStop, args
	case "GET /v2/sandboxes/snapshots":
		return "snapshots", s.listSnapshots, args
	case "POST /v2/sandboxes/snapshots":
		return "snapshot-create", s.createSnapshot, args
	case "GET /v2/sandboxes/snapshots/{id}":
		return "snapshot-get", s.getSnapshot, args
	case "POST /dp/{id}/execute":
		return "execute", s.execute, args
	case "POST /dp/{id}/upload":
		return "upload", s.upload, args
	case "GET /dp/{id}/download":
		return "download", s.download, args
	}
	return "", nil, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, _ []string) {
	var in struct {
		Name                   string            `json:"name"`
		Snapshot               string            `json:"snapshot"`
		SnapshotName           string            `json:"snapshot_name"`
		SnapshotID             string            `json:"snapshot_id"`
		IdleTTLSeconds         *int              `json:"idle_ttl_seconds"`
		DeleteAfterStopSeconds *int              `json:"delete_after_stop_seconds"`
		VCPUs                  int               `json:"vcpus"`
		MemBytes               int64             `json:"mem_bytes"`
		FSCapacityBytes        int64             `json:"fs_capacity_bytes"`
		Labels                 map[string]string `json:"labels"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		validation(w, "body", "Invalid JSON: "+err.Error())
		return
	}
	for field, v := range map[string]*int{"idle_ttl_seconds": in.IdleTTLSeconds, "delete_after_stop_seconds": in.DeleteAfterStopSeconds} {
		if v != nil && (*v < 0 || *v%60 != 0) {
			validation(w, field, "Value error, must be a non-negative multiple of 60")
			return
		}
	}
	ref := cmp.Or(in.Snapshot, in.SnapshotName)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref != "" && in.SnapshotID != "" {
		validation(w, "snapshot_id", "Value error, at most one of snapshot_id and snapshot may be set")
		return
	}
	if ref != "" {
		name := strings.TrimSuffix(ref, ":latest")
		found := false
		for _, sn := range s.snapshots {
			if sn.Name == name && sn.Status == "ready" {
				found = true
			}
		}
		if !found {
			notFound(w, "Snapshot", ref)
			return
		}
	}
	if in.SnapshotID != "" {
		if sn, ok := s.snapshots[in.SnapshotID]; !ok || sn.Status != "ready" {
			notFound(w, "Snapshot", in.SnapshotID)
			return
		}
	}
	if in.Name == "" {
		in.Name = "sandbox-" + newUUID()[:8]
	}
	if _, taken := s.boxes.Get(in.Name); taken {
		detail(w, http.StatusConflict, "Conflict", fmt.Sprintf("Sandbox '%s' already exists", in.Name))
		return
	}
	home, err := os.MkdirTemp("", "langsmithfake-")
	if err != nil {
		detail(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	b := &box{ID: newUUID(), Name: in.Name, Status: "provisioning", Labels: in.Labels, Snapshot: ref, SnapshotID: in.SnapshotID,
		IdleTTLSeconds: 600, DeleteAfterStop: 1209600, VCPUs: in.VCPUs, MemBytes: in.MemBytes, FSBytes: in.FSCapacityBytes,
		CreatedAt: time.Now().UTC(), home: home, procs: &fakekit.Procs{}}
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	if in.IdleTTLSeconds != nil {
		b.IdleTTLSeconds = *in.IdleTTLSeconds
	}
	if in.DeleteAfterStopSeconds != nil {
		b.DeleteAfterStop = *in.DeleteAfterStopSeconds
	}
	s.boxes.Add(b.Name, b)
	fakekit.WriteJSON(w, http.StatusCreated, s.view(b))
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.box(args[0])
	if b == nil {
		notFound(w, "Sandbox", args[0])
		return
	}
	b.polls++
	if b.Status == "provisioning" && !s.NeverReady && b.polls > s.ReadyAfter {
		if s.FailWith != "" {
			b.Status, b.StatusMessage = "failed", s.FailWith
		} else {
			b.Status = "ready"
		}
	}
	out := map[string]any{"status": b.Status, "status_message": nil}
	if b.StatusMessage != "" {
		out["status_message"] = b.StatusMessage
	}
	fakekit.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.box(args[0])
	if b == nil {
		notFound(w, "Sandbox", args[0])
		return
	}
	fakekit.WriteJSON(w, http.StatusOK, s.view(b))
}

func (s *Server) startStop(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	b := s.box(args[0])
	if b == nil {
		s.mu.Unlock()
		notFound(w, "Sandbox", args[0])
		return
	}
	stop := strings.HasSuffix(r.URL.Path, "/stop")
	procs := b.procs
	if stop {
		b.Status = "stopped"
		b.procs = &fakekit.Procs{}
	} else if b.Status == "stopped" {
		b.Status, b.polls = "provisioning", 0
	}
	v := s.view(b)
	s.mu.Unlock()
	if stop {
		procs.KillAll()
	}
	fakekit.WriteJSON(w, http.StatusOK, v)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	b := s.box(args[0])
	if b == nil {
		s.mu.Unlock()
		notFound(w, "Sandbox", args[0])
		return
	}
	s.boxes.Delete(b.Name)
	s.mu.Unlock()
	b.procs.KillAll()
	os.RemoveAll(b.home)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ []string) {
	q := r.URL.Query()
	if len(q["label"]) > 0 && s.LabelFilterUnsupported {
		validation(w, "label", "Extra inputs are not permitted")
		return
	}
	limit, offset := 50, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			validation(w, "limit", "Input should be less than or equal to 500")
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		offset, _ = strconv.Atoi(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*box
	for _, b := range s.boxes.Live() {
		if !strings.Contains(b.Name, q.Get("name_contains")) {
			continue
		}
		all := true
		for _, l := range q["label"] {
			k, v, hasValue := strings.Cut(l, "=")
			got, present := b.Labels[k]
			if !present || (hasValue && got != v) {
				all = false
			}
		}
		if all {
			match = append(match, b)
		}
	}
	end := min(offset+limit, len(match))
	views := []any{}
	for _, b := range match[min(offset, len(match)):end] {
		views = append(views, s.view(b))
	}
	next := end
	if s.ListEchoesOffset {
		next = offset
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"sandboxes": views, "offset": next})
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request, _ []string) {
	name := r.URL.Query().Get("name_contains")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []any{}
	for _, sn := range s.snapshots {
		if strings.Contains(sn.Name, name) {
			out = append(out, snapshotView(sn))
		}
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"snapshots": out, "offset": len(out)})
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, _ []string) {
	var in struct {
		Name            string `json:"name"`
		DockerImage     string `json:"docker_image"`
		FSCapacityBytes int64  `json:"fs_capacity_bytes"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" || in.DockerImage == "" || in.FSCapacityBytes <= 0 {
		validation(w, "body", "name, docker_image and fs_capacity_bytes are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sn := range s.snapshots {
		if sn.Name == in.Name {
			detail(w, http.StatusConflict, "Conflict", fmt.Sprintf("Snapshot '%s' already exists", in.Name))
			return
		}
	}
	sn := &snapshot{ID: newUUID(), Name: in.Name, Status: "building", Image: in.DockerImage, FSBytes: in.FSCapacityBytes}
	s.snapshots[sn.ID] = sn
	fakekit.WriteJSON(w, http.StatusCreated, snapshotView(sn))
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[args[0]]
	if !ok {
		notFound(w, "Snapshot", args[0])
		return
	}
	sn.polls++
	if sn.Status == "building" && sn.polls > s.SnapshotBuildPolls {
		sn.Status = "ready"
	}
	fakekit.WriteJSON(w, http.StatusOK, snapshotView(sn))
}

func snapshotView(sn *snapshot) map[string]any {
	return map[string]any{"id": sn.ID, "name": sn.Name, "status": sn.Status, "docker_image": sn.Image, "fs_capacity_bytes": sn.FSBytes}
}

// ready returns the ready sandbox or answers the data plane's error.
func (s *Server) ready(w http.ResponseWriter, name string) *box {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.box(name)
	if b == nil {
		notFound(w, "Sandbox", name)
		return nil
	}
	if b.Status != "ready" {
		detail(w, http.StatusBadRequest, "SandboxNotReady", fmt.Sprintf("Sandbox '%s' is %s", name, b.Status))
		return nil
	}
	return b
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, args []string) {
	b := s.ready(w, args[0])
	if b == nil {
		return
	}
	var in struct {
		Command string            `json:"command"`
		Timeout *int              `json:"timeout"`
		Shell   string            `json:"shell"`
		Env     map[string]string `json:"env"`
		Cwd     string            `json:"cwd"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Command == "" {
		validation(w, "command", "Field required")
		return
	}
	if in.Timeout == nil || *in.Timeout <= 0 {
		validation(w, "timeout", "Input should be greater than 0")
		return
	}
	c := fakekit.Command{Path: cmp.Or(in.Shell, "/bin/bash"), Args: []string{"-c", in.Command}, Dir: cmp.Or(in.Cwd, b.home),
		Env: fakekit.BaseEnv(b.home), Timeout: time.Duration(*in.Timeout) * time.Second}
	for k, v := range in.Env {
		c.Env = append(c.Env, k+"="+v)
	}
	o := b.procs.Run(context.WithoutCancel(r.Context()), c)
	switch {
	case errors.Is(o.StartErr, fakekit.ErrKilled):
		detail(w, http.StatusBadRequest, "SandboxNotReady", "Sandbox is being deleted")
	case o.StartErr != nil:
		detail(w, http.StatusInternalServerError, "ExecError", o.StartErr.Error())
	case o.TimedOut:
		detail(w, http.StatusRequestTimeout, "CommandTimeout", fmt.Sprintf("Command timed out after %d seconds", *in.Timeout))
	default:
		fakekit.WriteJSON(w, http.StatusOK, map[string]any{"stdout": string(o.Stdout), "stderr": string(o.Stderr), "exit_code": o.ExitCode})
	}
}

// filePath returns the host path the data plane's ?path= names (relative to the
// sandbox's home), or answers the error.
func (s *Server) filePath(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	b := s.ready(w, name)
	if b == nil {
		return "", false
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		validation(w, "path", "Field required")
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(b.home, p)
	}
	return p, true
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, args []string) {
	dest, ok := s.filePath(w, r, args[0])
	if !ok {
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		validation(w, "file", "Field required")
		return
	}
	defer f.Close()
	if _, err := fakekit.WriteFile(dest, f); err != nil {
		detail(w, http.StatusBadRequest, "UploadError", err.Error())
		return
	}
	fakekit.WriteJSON(w, http.StatusOK, map[string]any{"path": dest})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, args []string) {
	p, ok := s.filePath(w, r, args[0])
	if !ok {
		return
	}
	f, err := os.Open(p)
	if err != nil {
		detail(w, http.StatusNotFound, "NotFound", "File not found: "+r.URL.Query().Get("path"))
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		detail(w, http.StatusBadRequest, "InvalidPath", "Path is a directory")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, f)
}

func (s *Server) view(b *box) map[string]any {
	v := map[string]any{
		"id": b.ID, "name": b.Name, "status": b.Status, "status_message": nil, "labels": b.Labels,
		"idle_ttl_seconds": b.IdleTTLSeconds, "delete_after_stop_seconds": b.DeleteAfterStop,
		"created_at": b.CreatedAt.Format(time.RFC3339), "updated_at": time.Now().UTC().Format(time.RFC3339),
		"vcpus": b.VCPUs, "mem_bytes": b.MemBytes, "fs_capacity_bytes": b.FSBytes, "snapshot_id": b.SnapshotID,
		"dataplane_url": nil,
	}
	if b.StatusMessage != "" {
		v["status_message"] = b.StatusMessage
	}
	if b.Status == "ready" {
		v["dataplane_url"] = s.URL + "/dp/" + b.Name
	}
	return v
}

// notFound answers 404 the way LangSmith does for a missing sandbox or snapshot.
func notFound(w http.ResponseWriter, kind, name string) {
	detail(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s '%s' not found", kind, name))
}

func detail(w http.ResponseWriter, status int, errType, msg string) {
	fakekit.WriteJSON(w, status, map[string]any{"detail": map[string]any{"error": errType, "message": msg}})
}

func validation(w http.ResponseWriter, field, msg string) {
	fakekit.WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{map[string]any{"loc": []string{"body", field}, "msg": msg, "type": "value_error"}}})
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
