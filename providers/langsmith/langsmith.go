// Package langsmith is the LangSmith Sandboxes provider: a hand-written client for the
// LangSmith sandbox REST API (control plane under {endpoint}/v2/sandboxes, one data plane
// per sandbox at its dataplane_url), since the Go SDK cannot be downloaded.
//
// Calls it makes:
//
//	POST   {api}/boxes                       create (labels, snapshot, idle TTL + delete-after-stop)
//	GET    {api}/boxes/{name}/status         readiness poll (the light endpoint)
//	GET    {api}/boxes/{name}                dataplane_url, Attach
//	POST   {api}/boxes/{name}/start          Attach to a stopped sandbox
//	DELETE {api}/boxes/{name}                Close, Lister.Delete
//	GET    {api}/boxes?label=k=v&offset=     Lister.List (filtered server-side)
//	GET    {api}/snapshots?name_contains=    find the snapshot to boot from (with Options.SnapshotImage)
//	POST   {api}/snapshots, GET {api}/snapshots/{id}   build a missing snapshot (with Options.SnapshotImage)
//	POST   {dataplane}/execute               Exec (one request per command)
//	POST   {dataplane}/upload?path=          Upload (the workspace tar, one request), large stdin
//	GET    {dataplane}/download?path=        Download
//
// Sandboxes are gated per organisation: a 403 FeatureDisabled is returned verbatim. The
// backstop for a sandbox a killed run leaves behind is LangSmith's idle timer:
// idle_ttl_seconds (Spec.TTL rounded up to whole minutes) stops it, and
// delete_after_stop_seconds (one minute) deletes it; LangSmith has no wall-clock lifetime.
//
// The sandbox id talkops reports is the sandbox name.
package langsmith

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// Name is the provider's id.
const Name = "langsmith"

// Defaults.
const (
	DefaultEndpoint   = "https://api.smith.langchain.com"
	DefaultWorkingDir = "/root"
	// DefaultIdleTTL is the idle stop when Spec.TTL is 0.
	DefaultIdleTTL       = 10 * time.Minute
	DefaultReadyTimeout  = 3 * time.Minute
	DefaultBuildTimeout  = 15 * time.Minute
	DefaultCommandLimit  = time.Hour
	defaultSnapshotBytes = 16 << 30
)

// Options configures the provider.
type Options struct {
	// APIURL is the LangSmith endpoint (default LANGSMITH_ENDPOINT, else
	// DefaultEndpoint); "/v2/sandboxes" is appended unless it is already there.
	APIURL string `toml:"api_url"`
	// VCPUs, MemBytes and DiskBytes size the sandbox; 0 is LangSmith's default.
	VCPUs     int   `toml:"vcpus"`
	MemBytes  int64 `toml:"memory_bytes"`
	DiskBytes int64 `toml:"disk_bytes"`
	// SnapshotImage, when set, builds a snapshot named Spec.Snapshot from this image
	// if no snapshot of that name exists (the seeds' "talkops-aws-agent" from
	// "python:3.12-slim"); empty means a missing snapshot is an error.
	SnapshotImage string `toml:"-"`
	// SnapshotDiskBytes is the disk of a built snapshot; default 16 GiB.
	SnapshotDiskBytes int64 `toml:"-"`
	// CommandLimit is the server-side bound sent with a command that has no
	// Cmd.Timeout (the API needs one); default DefaultCommandLimit.
	CommandLimit time.Duration `toml:"command_limit"`
	// ReadyTimeout bounds the wait for a sandbox; BuildTimeout the wait for a snapshot.
	ReadyTimeout time.Duration `toml:"ready_timeout"`
	BuildTimeout time.Duration `toml:"build_timeout"`
	// PollInterval is the first pause of the polls (default 1 s).
	PollInterval time.Duration `toml:"-"`
	// RemoteOptions holds WorkingDir, TempDir and the HTTP transport.
	httpapi.RemoteOptions
}

// Provider creates and attaches LangSmith sandboxes. It implements providers.Provider and
// providers.Lister.
type Provider struct {
	opts Options
	api  *httpapi.Client
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New checks the credentials and settings and returns a provider; nothing is created. The
// key is LANGSMITH_SANDBOX_API_KEY, LANGSMITH_API_KEY or LANGCHAIN_API_KEY, the first set;
// LANGSMITH_TENANT_ID picks a workspace. A missing key is a *httpapi.ConfigError wrapping
// providers.ErrConfig.
func New(opts Options, getenv func(string) string) (*Provider, error) {
	getenv = httpapi.Env(getenv)
	key := cmp.Or(getenv("LANGSMITH_SANDBOX_API_KEY"), getenv("LANGSMITH_API_KEY"), getenv("LANGCHAIN_API_KEY"))
	if key == "" {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"LANGSMITH_API_KEY"}, Problem: "is not set", Hint: "create a key in LangSmith under Settings > API Keys; LANGSMITH_SANDBOX_API_KEY takes precedence when set"}
	}
	if opts.APIURL == "" {
		opts.APIURL = cmp.Or(getenv("LANGSMITH_ENDPOINT"), getenv("LANGCHAIN_ENDPOINT"), DefaultEndpoint)
	}
	if err := httpapi.CheckURL(Name, "api_url / LANGSMITH_ENDPOINT", opts.APIURL, DefaultEndpoint); err != nil {
		return nil, err
	}
	base := strings.TrimRight(opts.APIURL, "/")
	if !strings.HasSuffix(base, "/v2/sandboxes") {
		base += "/v2/sandboxes"
	}
	if err := opts.Resolve(Name, DefaultWorkingDir); err != nil {
		return nil, err
	}
	if err := errors.Join(
		httpapi.CheckNotNegative(Name, "vcpus", opts.VCPUs),
		httpapi.CheckNotNegative(Name, "memory_bytes", opts.MemBytes),
		httpapi.CheckNotNegative(Name, "disk_bytes", opts.DiskBytes),
		httpapi.CheckNotNegative(Name, "snapshot disk bytes", opts.SnapshotDiskBytes), // set by code, not the table
		httpapi.CheckNotNegative(Name, "command_limit", opts.CommandLimit),
	); err != nil {
		return nil, err
	}
	if opts.SnapshotDiskBytes == 0 {
		opts.SnapshotDiskBytes = defaultSnapshotBytes
	}
	if opts.CommandLimit == 0 {
		opts.CommandLimit = DefaultCommandLimit
	}
	if err := httpapi.CheckNotNegative(Name, "ready_timeout", opts.ReadyTimeout); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if err := httpapi.CheckNotNegative(Name, "build_timeout", opts.BuildTimeout); err != nil {
		return nil, err
	}
	if opts.BuildTimeout <= 0 {
		opts.BuildTimeout = DefaultBuildTimeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	header := http.Header{"X-Api-Key": {key}, "User-Agent": {"talkops"}}
	if tenant := getenv("LANGSMITH_TENANT_ID"); tenant != "" {
		header.Set("X-Tenant-Id", tenant)
	}
	return &Provider{opts: opts, api: opts.NewClient(Name, base, header, decodeError)}, nil
}

// Name returns "langsmith".
func (p *Provider) Name() string { return Name }

type sandboxJSON struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Status        string            `json:"status"`
	StatusMessage string            `json:"status_message"`
	DataplaneURL  string            `json:"dataplane_url"`
	Labels        map[string]string `json:"labels"`
	CreatedAt     string            `json:"created_at"`
}

type createRequest struct {
	Name                   string            `json:"name"`
	Snapshot               string            `json:"snapshot,omitempty"`
	SnapshotID             string            `json:"snapshot_id,omitempty"`
	WaitForReady           bool              `json:"wait_for_ready"`
	IdleTTLSeconds         int               `json:"idle_ttl_seconds"`
	DeleteAfterStopSeconds int               `json:"delete_after_stop_seconds"`
	VCPUs                  int               `json:"vcpus,omitempty"`
	MemBytes               int64             `json:"mem_bytes,omitempty"`
	FSCapacityBytes        int64             `json:"fs_capacity_bytes,omitempty"`
	Labels                 map[string]string `json:"labels,omitempty"`
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Create provisions a sandbox and waits until it is ready. Spec.Snapshot is a snapshot id
// (UUID) or name[:tag]; with Options.SnapshotImage a missing named snapshot is built first.
// A sandbox that does not become ready is deleted.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("langsmith: create: %w", err)
	}
	idle := DefaultIdleTTL
	if spec.TTL > 0 {
		idle = spec.TTL
	}
	req := createRequest{
		Name:                   remote.Name(spec.RunID, 63),
		IdleTTLSeconds:         int((idle+time.Minute-1)/time.Minute) * 60,
		DeleteAfterStopSeconds: 60,
		VCPUs:                  p.opts.VCPUs,
		MemBytes:               p.opts.MemBytes,
		FSCapacityBytes:        p.opts.DiskBytes,
		Labels:                 spec.Labels,
	}
	switch s := spec.Snapshot; {
	case s == "":
	case uuidRE.MatchString(s):
		req.SnapshotID = s
	case p.opts.SnapshotImage != "":
		id, err := p.ensureSnapshot(ctx, s)
		if err != nil {
			return nil, err
		}
		req.SnapshotID = id
	default:
		req.Snapshot = s
	}
	var sb sandboxJSON
	// The name is unique to this attempt, so a retry cannot create a second sandbox.
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "boxes", JSON: req, Retry: httpapi.RetryIdempotent}, &sb)
	if httpapi.StatusCode(err) == http.StatusConflict {
		if existing, gerr := p.get(ctx, req.Name); gerr == nil && existing.Labels[providers.LabelRunID] == spec.Labels[providers.LabelRunID] {
			sb, err = existing, nil
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, remote.Undo(ctx, fmt.Errorf("langsmith: create: %w", ctx.Err()), func(c context.Context) error { return p.Delete(c, req.Name) })
		}
		return nil, fmt.Errorf("langsmith: create: %w", err)
	}
	name := cmp.Or(sb.Name, req.Name)
	undo := func(cause error) error {
		return remote.Undo(ctx, cause, func(c context.Context) error { return p.Delete(c, name) })
	}
	if sb, err = p.waitReady(ctx, name, sb); err != nil {
		return nil, undo(err)
	}
	workDir := cmp.Or(spec.WorkDir, p.opts.WorkingDir)
	s, err := p.handle(sb, workDir, spec.Env, true)
	if err != nil {
		return nil, undo(err)
	}
	if workDir != DefaultWorkingDir {
		res, err := s.Driver().Run(ctx, remote.Run{Script: "mkdir -p -- " + remote.Quote(workDir) + "\n", Timeout: time.Minute, Repeatable: true})
		switch {
		case err != nil:
			return nil, undo(fmt.Errorf("langsmith: create working directory %s: %w", workDir, err))
		case res.ExitCode != 0:
			return nil, undo(fmt.Errorf("langsmith: create working directory %s: exit %d: %s", workDir, res.ExitCode, strings.TrimSpace(string(res.Stderr))))
		}
	}
	return s, nil
}

type snapshotJSON struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	Status        string `json:"status"`
	StatusMessage string `json:"status_message"`
}

// ensureSnapshot returns the id of the ready snapshot called name, building it from
// Options.SnapshotImage when there is none, and waiting for one that is building.
func (p *Provider) ensureSnapshot(ctx context.Context, name string) (string, error) {
	var list struct {
		Snapshots []snapshotJSON `json:"snapshots"`
	}
	if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "snapshots", Query: url.Values{"name_contains": {name}, "limit": {"100"}}}, &list); err != nil {
		return "", fmt.Errorf("langsmith: look up snapshot %q: %w", name, err)
	}
	var snap *snapshotJSON
	for i, s := range list.Snapshots {
		if s.Name != name {
			continue
		}
		if s.Status == "ready" {
			return s.ID, nil
		}
		if s.Status == "building" {
			snap = &list.Snapshots[i]
		}
	}
	if snap == nil {
		var created snapshotJSON
		err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "snapshots", JSON: map[string]any{
			"name": name, "docker_image": p.opts.SnapshotImage, "fs_capacity_bytes": p.opts.SnapshotDiskBytes,
		}}, &created)
		if err != nil {
			return "", fmt.Errorf("langsmith: build snapshot %q from %s: %w", name, p.opts.SnapshotImage, err)
		}
		snap = &created
	}
	id := snap.ID
	err := httpapi.Poll(ctx, p.opts.BuildTimeout, p.opts.PollInterval, 10*time.Second, func(ctx context.Context) (bool, error) {
		var s snapshotJSON
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "snapshots/" + url.PathEscape(id)}, &s); err != nil {
			return false, err
		}
		switch s.Status {
		case "ready":
			return true, nil
		case "failed":
			return false, fmt.Errorf("langsmith: snapshot %q (%s) failed to build: %s", name, id, cmp.Or(s.StatusMessage, "no reason given"))
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("langsmith: wait for snapshot %q: %w", name, err)
	}
	return id, nil
}

// Attach connects to a sandbox by name, starting it if it is stopped. Close on the handle
// never deletes it.
func (p *Provider) Attach(ctx context.Context, name string, opts providers.AttachOptions) (providers.Sandbox, error) {
	if name == "" {
		return nil, fmt.Errorf("langsmith: attach: empty sandbox name: %w", providers.ErrNotFound)
	}
	sb, err := p.get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("langsmith: attach %s: %w", name, err)
	}
	if sb.Status == "stopped" {
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "boxes/" + url.PathEscape(name) + "/start", JSON: map[string]any{}, Retry: httpapi.RetryIdempotent}, nil); err != nil {
			return nil, fmt.Errorf("langsmith: attach %s: start: %w", name, err)
		}
		sb.Status = "provisioning"
	}
	if sb, err = p.waitReady(ctx, name, sb); err != nil {
		return nil, fmt.Errorf("langsmith: attach %s: %w", name, err)
	}
	return p.handle(sb, cmp.Or(opts.WorkDir, p.opts.WorkingDir), nil, false)
}

// List returns the sandboxes labelled talkops.created-by=talkops, filtered by LangSmith;
// where an account does not support label filters, it lists by name prefix and filters
// locally.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	out, err := p.list(ctx, url.Values{"label": {providers.LabelCreatedBy + "=talkops"}})
	if st := httpapi.StatusCode(err); st == http.StatusBadRequest || st == http.StatusUnprocessableEntity {
		out, err = p.list(ctx, url.Values{"name_contains": {"talkops-"}})
	}
	return out, err
}

// listPage is how many sandboxes one list request asks for.
const listPage = 100

// list pages through the sandboxes the way LangSmith's SDK does: the next offset is the
// offset sent plus the sandboxes received, until a page comes back empty. The "offset"
// in the answer is not used: some servers echo the offset they were given.
func (p *Provider) list(ctx context.Context, filter url.Values) ([]providers.Info, error) {
	var out []providers.Info
	seen := map[string]bool{}
	offset := 0
	for page := 0; page < 1000; page++ {
		q := url.Values{"limit": {fmt.Sprint(listPage)}, "offset": {fmt.Sprint(offset)}}
		for k, v := range filter {
			q[k] = v
		}
		var resp struct {
			Sandboxes []sandboxJSON `json:"sandboxes"`
		}
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "boxes", Query: q}, &resp); err != nil {
			return out, fmt.Errorf("langsmith: list sandboxes: %w", err)
		}
		fresh := 0
		for _, sb := range resp.Sandboxes {
			if seen[sb.Name] {
				continue // the list shifted between pages (a sandbox was deleted)
			}
			seen[sb.Name] = true
			fresh++
			if sb.Labels[providers.LabelCreatedBy] != "talkops" {
				continue
			}
			created, _ := time.Parse(time.RFC3339, sb.CreatedAt)
			out = append(out, remote.InfoFromLabels(Name, sb.Name, sb.Status, created, sb.Labels))
		}
		if fresh == 0 {
			// An empty page ends the list; so does one that repeats what came before (a
			// server that ignores offset), instead of asking for it 1000 times.
			return out, nil
		}
		offset += len(resp.Sandboxes)
	}
	return out, errors.New("langsmith: list sandboxes: more than 1000 pages")
}

// Delete deletes a sandbox by name; one that is already gone is not an error.
func (p *Provider) Delete(ctx context.Context, name string) error {
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodDelete, Path: "boxes/" + url.PathEscape(name)}, nil)
	if err != nil && httpapi.StatusCode(err) != http.StatusNotFound {
		return err
	}
	return nil
}

func (p *Provider) get(ctx context.Context, name string) (sandboxJSON, error) {
	var sb sandboxJSON
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "boxes/" + url.PathEscape(name)}, &sb)
	if httpapi.StatusCode(err) == http.StatusNotFound {
		return sb, fmt.Errorf("%w: %w", providers.ErrNotFound, err)
	}
	return sb, err
}

// waitReady polls the status endpoint until the sandbox is ready, then reads it whole
// (for its dataplane_url).
func (p *Provider) waitReady(ctx context.Context, name string, sb sandboxJSON) (sandboxJSON, error) {
	if sb.Status == "ready" && sb.DataplaneURL != "" {
		return sb, nil
	}
	last := sb.Status
	err := httpapi.Poll(ctx, p.opts.ReadyTimeout, p.opts.PollInterval, 5*time.Second, func(ctx context.Context) (bool, error) {
		var st struct {
			Status        string `json:"status"`
			StatusMessage string `json:"status_message"`
		}
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "boxes/" + url.PathEscape(name) + "/status"}, &st); err != nil {
			return false, err
		}
		last = st.Status
		switch st.Status {
		case "ready":
			return true, nil
		case "failed", "stopped", "deleting":
			return false, fmt.Errorf("langsmith: sandbox %s is %s: %s", name, st.Status, cmp.Or(st.StatusMessage, "no reason given"))
		}
		return false, nil
	})
	if err != nil {
		if errors.Is(err, httpapi.ErrWaitTimeout) {
			return sb, fmt.Errorf("langsmith: sandbox %s not ready within %s (last status %q): %w", name, p.opts.ReadyTimeout, last, err)
		}
		return sb, fmt.Errorf("langsmith: wait for sandbox %s: %w", name, err)
	}
	return p.get(ctx, name)
}

func (p *Provider) handle(sb sandboxJSON, workDir string, env map[string]string, owned bool) (*remote.Sandbox, error) {
	if sb.DataplaneURL == "" {
		return nil, fmt.Errorf("langsmith: sandbox %s has no dataplane_url", sb.Name)
	}
	d := &driver{p: p, name: sb.Name, dataplane: strings.TrimRight(sb.DataplaneURL, "/")}
	return remote.New(remote.Config{Provider: Name, ID: sb.Name, WorkDir: workDir, Owned: owned, Env: env, TempDir: p.opts.TempDir}, d), nil
}

// driver talks to one sandbox's data plane.
type driver struct {
	p         *Provider
	name      string
	dataplane string
}

func (d *driver) Run(ctx context.Context, r remote.Run) (remote.Result, error) {
	limit := r.Timeout
	if limit <= 0 {
		limit = d.p.opts.CommandLimit
	}
	var out struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode *int   `json:"exit_code"`
	}
	err := d.p.api.JSON(ctx, httpapi.Request{
		Method: http.MethodPost,
		Path:   d.dataplane + "/execute",
		JSON:   map[string]any{"command": r.Script, "timeout": int((limit + time.Second - 1) / time.Second), "shell": "/bin/sh"},
		// /execute takes no idempotency key: a command that may have started is not sent
		// again (Run.Retry).
		Retry: r.Retry(),
	}, &out)
	if st := httpapi.StatusCode(err); st == http.StatusRequestTimeout || httpapi.ErrorCode(err) == "CommandTimeout" {
		return remote.Result{ExitCode: 124, TimedOut: true}, nil
	}
	if err != nil {
		return remote.Result{}, err
	}
	if out.ExitCode == nil {
		return remote.Result{}, errors.New("langsmith: execute: response has no exit_code")
	}
	return remote.Result{Stdout: []byte(out.Stdout), Stderr: []byte(out.Stderr), ExitCode: *out.ExitCode}, nil
}

func (d *driver) WriteFile(ctx context.Context, path string, body *httpapi.Body) error {
	mp, err := httpapi.MultipartFile(nil, "file", "file", body)
	if err != nil {
		return err
	}
	return d.p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: d.dataplane + "/upload", Query: url.Values{"path": {path}}, Body: mp,
		// Writing the same bytes to the same path twice is harmless.
		Retry: httpapi.RetryIdempotent}, nil)
}

func (d *driver) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := d.p.api.Do(ctx, httpapi.Request{Method: http.MethodGet, Path: d.dataplane + "/download", Query: url.Values{"path": {path}},
		Header: http.Header{"Accept": {"application/octet-stream"}}})
	if httpapi.StatusCode(err) == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (d *driver) Delete(ctx context.Context) error { return d.p.Delete(ctx, d.name) }

// decodeError reads LangSmith's error bodies: {"detail": {"error", "message"}}, pydantic's
// {"detail": [{"msg"}]}, {"detail": "..."}, and the flat {"error", "message"} of a 403
// FeatureDisabled.
func decodeError(_ int, body []byte) (code, message string) {
	var e struct {
		Detail  json.RawMessage `json:"detail"`
		Error   string          `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	var obj struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		ErrorID string `json:"error_id"`
	}
	var list []struct {
		Msg string `json:"msg"`
		Loc []any  `json:"loc"`
	}
	var s string
	switch {
	case len(e.Detail) == 0:
		return e.Error, e.Message
	case json.Unmarshal(e.Detail, &obj) == nil && (obj.Error != "" || obj.Message != ""):
		if obj.ErrorID != "" {
			obj.Message += " (error_id=" + obj.ErrorID + ")"
		}
		return obj.Error, obj.Message
	case json.Unmarshal(e.Detail, &list) == nil && len(list) > 0:
		var msgs []string
		for _, d := range list {
			m := d.Msg
			if len(d.Loc) > 0 {
				m = fmt.Sprint(d.Loc[len(d.Loc)-1]) + ": " + m
			}
			msgs = append(msgs, m)
		}
		return "", strings.Join(msgs, "; ")
	case json.Unmarshal(e.Detail, &s) == nil:
		return "", s
	}
	return e.Error, e.Message
}

// Capabilities says what the langsmith provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, Snapshot: true, DefaultSnapshot: true, OwnFilesystem: true, List: true, TTL: true}
}
