// Package runloop is the Runloop provider: a hand-written client for Runloop's devbox REST
// API (no Go SDK exists; the official SDKs are Python and TypeScript).
//
// Calls it makes:
//
//	POST /v1/devboxes                                     create (metadata labels, blueprint or snapshot, keep_alive_time_seconds)
//	GET  /v1/blueprints?name=                             check a blueprint name before create
//	POST /v1/devboxes/{id}/wait_for_status                readiness long-poll (408 = not yet)
//	GET  /v1/devboxes/{id}                                Attach
//	POST /v1/devboxes/{id}/resume                         Attach to a suspended devbox
//	POST /v1/devboxes/{id}/shutdown                       Close, Lister.Delete
//	GET  /v1/devboxes?status=&starting_after=             Lister.List (metadata filtered client-side)
//	POST /v1/devboxes/{id}/execute                        Exec (UUIDv7 command_id, optimistic wait)
//	POST /v1/devboxes/{id}/executions/{eid}/wait_for_status   Exec of a long command (long-poll)
//	POST /v1/devboxes/{id}/upload_file                    Upload (the workspace tar, one request), large stdin
//	POST /v1/devboxes/{id}/download_file                  Download, and full output of a long command
//
// Runloop has no server-side command timeout; Cmd.Timeout is enforced inside the devbox
// and on the client. Execute returns only the last 100 lines of output; the command
// script keeps longer output in files, which the client downloads when Runloop reports
// truncation. Every execute carries a fresh UUIDv7 command_id, and every create an
// idempotency key in x-request-id, so a retried request does not run the command or
// create the devbox twice. Runloop cannot delete a devbox: Close shuts it down, and a
// shut-down devbox stays listable with status "shutdown". The backstop is
// keep_alive_time_seconds (Spec.TTL, at most 48 h), a hard lifetime.
package runloop

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// Name is the provider's id.
const Name = "runloop"

// Defaults and limits.
const (
	DefaultAPIURL       = "https://api.runloop.ai"
	DefaultWorkingDir   = "/home/user"
	DefaultKeepAlive    = time.Hour
	MaxKeepAlive        = 48 * time.Hour
	DefaultReadyTimeout = 3 * time.Minute
	// DefaultLongPoll is how long one wait_for_status call asks the server to hold
	// (Runloop's maximum is 25 s for executions, 30 s for devboxes).
	DefaultLongPoll = 25 * time.Second
	// outputLines is how many trailing lines execute returns.
	outputLines = 100
)

// idempotencyHeader carries the idempotency key of a create, as in Runloop's
// Stainless-generated SDKs (not the more common Idempotency-Key).
const idempotencyHeader = "X-Request-Id"

// ResourceSizes are the accepted values of Options.ResourceSize.
var ResourceSizes = []string{"X_SMALL", "SMALL", "MEDIUM", "LARGE", "X_LARGE", "XX_LARGE"}

// Options configures the provider.
type Options struct {
	// APIURL is the API base; default RUNLOOP_BASE_URL, else DefaultAPIURL.
	APIURL string `toml:"api_url"`
	// ResourceSize is one of ResourceSizes; empty is Runloop's default.
	ResourceSize string `toml:"resource_size"`
	// Architecture is "x86_64" or "arm64"; empty is Runloop's default.
	Architecture string `toml:"architecture"`
	// KeepAlive is the devbox lifetime when Spec.TTL is 0; default DefaultKeepAlive.
	KeepAlive time.Duration `toml:"keep_alive"`
	// ReadyTimeout bounds the wait for a devbox to run; default DefaultReadyTimeout.
	ReadyTimeout time.Duration `toml:"ready_timeout"`
	// LongPoll is the hold asked of each wait_for_status call; default DefaultLongPoll.
	LongPoll time.Duration `toml:"-"`
	// RemoteOptions holds WorkingDir, TempDir and the HTTP transport.
	httpapi.RemoteOptions
}

// Provider creates and attaches Runloop devboxes. It implements providers.Provider and
// providers.Lister.
type Provider struct {
	opts Options
	api  *httpapi.Client
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New checks the credentials and settings and returns a provider; nothing is created. A
// missing RUNLOOP_API_KEY is a *httpapi.ConfigError wrapping providers.ErrConfig.
func New(opts Options, getenv func(string) string) (*Provider, error) {
	getenv = httpapi.Env(getenv)
	key := getenv("RUNLOOP_API_KEY")
	if key == "" {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"RUNLOOP_API_KEY"}, Problem: "is not set", Hint: "create an API key in the Runloop dashboard under Settings"}
	}
	if opts.APIURL == "" {
		opts.APIURL = cmp.Or(getenv("RUNLOOP_BASE_URL"), DefaultAPIURL)
	}
	if err := httpapi.CheckURL(Name, "api_url / RUNLOOP_BASE_URL", opts.APIURL, DefaultAPIURL); err != nil {
		return nil, err
	}
	if err := opts.Resolve(Name, DefaultWorkingDir); err != nil {
		return nil, err
	}
	if opts.ResourceSize != "" && !slices.Contains(ResourceSizes, opts.ResourceSize) {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"resource_size"}, Problem: fmt.Sprintf("is %q", opts.ResourceSize), Hint: "one of " + strings.Join(ResourceSizes, ", ")}
	}
	if opts.Architecture != "" && opts.Architecture != "x86_64" && opts.Architecture != "arm64" {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"architecture"}, Problem: fmt.Sprintf("is %q", opts.Architecture), Hint: "x86_64 or arm64"}
	}
	if opts.KeepAlive < 0 || opts.KeepAlive > MaxKeepAlive {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"keep_alive"}, Problem: fmt.Sprintf("is %s", opts.KeepAlive), Hint: "between 1s and 48h"}
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if err := httpapi.CheckNotNegative(Name, "ready_timeout", opts.ReadyTimeout); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.LongPoll <= 0 || opts.LongPoll > DefaultLongPoll {
		opts.LongPoll = DefaultLongPoll
	}
	header := http.Header{"Authorization": {"Bearer " + key}, "User-Agent": {"talkops"}}
	return &Provider{opts: opts, api: opts.NewClient(Name, opts.APIURL, header, decodeError)}, nil
}

// Name returns "runloop".
func (p *Provider) Name() string { return Name }

type devboxJSON struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Status        string            `json:"status"`
	Metadata      map[string]string `json:"metadata"`
	FailureReason string            `json:"failure_reason"`
	CreateTimeMs  int64             `json:"create_time_ms"`
}

type createRequest struct {
	Name             string            `json:"name,omitempty"`
	BlueprintID      string            `json:"blueprint_id,omitempty"`
	BlueprintName    string            `json:"blueprint_name,omitempty"`
	SnapshotID       string            `json:"snapshot_id,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	LaunchParameters launchParameters  `json:"launch_parameters"`
}

type launchParameters struct {
	KeepAliveTimeSeconds int    `json:"keep_alive_time_seconds"`
	ResourceSizeRequest  string `json:"resource_size_request,omitempty"`
	Architecture         string `json:"architecture,omitempty"`
}

// Create provisions a devbox and waits until it runs. Spec.Snapshot is a blueprint name, a
// blueprint id (bpt_…) or a disk snapshot id (snp_…); a blueprint name is checked first,
// so a missing one fails before anything is created. A devbox that does not start is
// shut down.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("runloop: create: %w", err)
	}
	keep := p.opts.KeepAlive
	if spec.TTL > 0 {
		keep = min(spec.TTL, MaxKeepAlive)
	}
	req := createRequest{
		Name:     remote.Name(spec.RunID, 63),
		Metadata: spec.Labels,
		LaunchParameters: launchParameters{
			KeepAliveTimeSeconds: max(1, int((keep+time.Second-1)/time.Second)),
			ResourceSizeRequest:  p.opts.ResourceSize,
			Architecture:         p.opts.Architecture,
		},
	}
	switch s := spec.Snapshot; {
	case s == "":
	case strings.HasPrefix(s, "bpt_"):
		req.BlueprintID = s
	case strings.HasPrefix(s, "snp_"):
		req.SnapshotID = s
	default:
		if err := p.checkBlueprint(ctx, s); err != nil {
			return nil, err
		}
		req.BlueprintName = s
	}
	var dbx devboxJSON
	// The idempotency key makes a retried create return the devbox of the first attempt.
	// Runloop reads it from x-request-id, the header its SDKs send it in.
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "v1/devboxes", JSON: req,
		Header: http.Header{idempotencyHeader: {"talkops-" + uuid7()}}, Retry: httpapi.RetryIdempotent}, &dbx)
	if err != nil {
		if ctx.Err() != nil {
			// The request may have reached Runloop; find the devbox by its unique name.
			return nil, remote.Undo(ctx, fmt.Errorf("runloop: create: %w", ctx.Err()), func(c context.Context) error { return p.deleteByName(c, req.Name) })
		}
		return nil, fmt.Errorf("runloop: create: %w", err)
	}
	if dbx.ID == "" {
		return nil, errors.New("runloop: create: the response has no devbox id")
	}
	undo := func(cause error) error {
		return remote.Undo(ctx, cause, func(c context.Context) error { return p.Delete(c, dbx.ID) })
	}
	if err := p.waitRunning(ctx, dbx); err != nil {
		return nil, undo(err)
	}
	workDir := cmp.Or(spec.WorkDir, p.opts.WorkingDir)
	s := p.handle(dbx.ID, workDir, spec.Env, true)
	if workDir != DefaultWorkingDir {
		res, err := s.Driver().Run(ctx, remote.Run{Script: "mkdir -p -- " + remote.Quote(workDir) + "\n"})
		switch {
		case err != nil:
			return nil, undo(fmt.Errorf("runloop: create working directory %s: %w", workDir, err))
		case res.ExitCode != 0:
			return nil, undo(fmt.Errorf("runloop: create working directory %s: exit %d: %s", workDir, res.ExitCode, strings.TrimSpace(string(res.Stderr))))
		}
	}
	return s, nil
}

// checkBlueprint makes sure a blueprint with that name has been built.
func (p *Provider) checkBlueprint(ctx context.Context, name string) error {
	var resp struct {
		Blueprints []struct {
			ID     string `json:"id"`
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"blueprints"`
	}
	if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "v1/blueprints", Query: url.Values{"name": {name}, "limit": {"50"}}}, &resp); err != nil {
		return fmt.Errorf("runloop: look up blueprint %q: %w", name, err)
	}
	var states []string
	for _, b := range resp.Blueprints {
		if b.Name != name {
			continue
		}
		if b.Status == "build_complete" {
			return nil
		}
		states = append(states, b.ID+" "+b.Status)
	}
	if len(states) > 0 {
		return fmt.Errorf("runloop: blueprint %q has no finished build (%s): wait for the build or fix it", name, strings.Join(states, ", "))
	}
	return fmt.Errorf("runloop: blueprint %q does not exist in this account: build it first (POST /v1/blueprints or the Runloop dashboard), or set the snapshot to a bpt_/snp_ id or leave it empty for Runloop's default image: %w", name, providers.ErrNotFound)
}

// Attach connects to a devbox by id, resuming it when it is suspended. Close on the handle
// never shuts it down.
func (p *Provider) Attach(ctx context.Context, id string, opts providers.AttachOptions) (providers.Sandbox, error) {
	if id == "" {
		return nil, fmt.Errorf("runloop: attach: empty devbox id: %w", providers.ErrNotFound)
	}
	dbx, err := p.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("runloop: attach %s: %w", id, err)
	}
	switch dbx.Status {
	case "shutdown", "failure":
		return nil, fmt.Errorf("runloop: attach %s: the devbox is %s: %w", id, dbx.Status, providers.ErrNotFound)
	case "suspended", "suspending":
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "v1/devboxes/" + url.PathEscape(id) + "/resume", Retry: httpapi.RetryIdempotent}, nil); err != nil {
			return nil, fmt.Errorf("runloop: attach %s: resume: %w", id, err)
		}
		dbx.Status = "resuming"
	}
	if err := p.waitRunning(ctx, dbx); err != nil {
		return nil, fmt.Errorf("runloop: attach %s: %w", id, err)
	}
	return p.handle(id, cmp.Or(opts.WorkDir, p.opts.WorkingDir), nil, false), nil
}

// liveStatuses are the devbox states that still hold (or will hold) resources: all but
// failure and shutdown. A devbox whose create was answered to a client that died is
// still provisioning when gc looks.
var liveStatuses = []string{"queued", "provisioning", "initializing", "running", "suspending", "suspended", "resuming"}

// List returns the live devboxes (liveStatuses) whose metadata carries
// talkops.created-by=talkops (Runloop cannot filter on metadata; this filters locally).
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	var out []providers.Info
	for _, status := range liveStatuses {
		after := ""
		for page := 0; ; page++ {
			if page == 1000 {
				return out, errors.New("runloop: list devboxes: more than 1000 pages")
			}
			q := url.Values{"status": {status}, "limit": {"500"}, "include_total_count": {"false"}}
			if after != "" {
				q.Set("starting_after", after)
			}
			var resp struct {
				Devboxes []devboxJSON `json:"devboxes"`
				HasMore  bool         `json:"has_more"`
			}
			if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "v1/devboxes", Query: q}, &resp); err != nil {
				return out, fmt.Errorf("runloop: list devboxes: %w", err)
			}
			for _, d := range resp.Devboxes {
				if d.Metadata[providers.LabelCreatedBy] != "talkops" {
					continue
				}
				out = append(out, remote.InfoFromLabels(Name, d.ID, d.Status, time.UnixMilli(d.CreateTimeMs).UTC(), d.Metadata))
			}
			if !resp.HasMore || len(resp.Devboxes) == 0 {
				break
			}
			after = resp.Devboxes[len(resp.Devboxes)-1].ID
		}
	}
	return out, nil
}

// Delete shuts a devbox down (Runloop's only way to end one); one that is already shut
// down or unknown is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "v1/devboxes/" + url.PathEscape(id) + "/shutdown", Retry: httpapi.RetryIdempotent}, nil)
	switch st := httpapi.StatusCode(err); {
	case err == nil, st == http.StatusNotFound:
		return nil
	case st == http.StatusBadRequest || st == http.StatusConflict || st == http.StatusUnprocessableEntity:
		// Shutting down a devbox that already ended is refused; that is success here.
		if dbx, gerr := p.get(ctx, id); gerr == nil && (dbx.Status == "shutdown" || dbx.Status == "failure") {
			return nil
		}
	}
	return err
}

// deleteByName shuts down the devboxes with that name (a create whose answer was lost).
func (p *Provider) deleteByName(ctx context.Context, name string) error {
	var errs []error
	for _, status := range []string{"provisioning", "initializing", "running", "queued"} {
		var resp struct {
			Devboxes []devboxJSON `json:"devboxes"`
		}
		q := url.Values{"status": {status}, "limit": {"500"}, "include_total_count": {"false"}}
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "v1/devboxes", Query: q}, &resp); err != nil {
			return err
		}
		for _, d := range resp.Devboxes {
			if d.Name == name {
				errs = append(errs, p.Delete(ctx, d.ID))
			}
		}
	}
	return errors.Join(errs...)
}

func (p *Provider) get(ctx context.Context, id string) (devboxJSON, error) {
	var dbx devboxJSON
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "v1/devboxes/" + url.PathEscape(id)}, &dbx)
	if httpapi.StatusCode(err) == http.StatusNotFound {
		return dbx, fmt.Errorf("%w: %w", providers.ErrNotFound, err)
	}
	return dbx, err
}

// waitRunning long-polls wait_for_status until the devbox runs, fails, or the bound passes.
func (p *Provider) waitRunning(ctx context.Context, dbx devboxJSON) error {
	deadline := time.Now().Add(p.opts.ReadyTimeout)
	last := dbx.Status
	for last != "running" {
		switch last {
		case "failure", "shutdown":
			reason := cmp.Or(dbx.FailureReason, "no reason given")
			return fmt.Errorf("runloop: devbox %s is %s: %s", dbx.ID, last, reason)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("runloop: devbox %s not running within %s (last status %q): %w", dbx.ID, p.opts.ReadyTimeout, last, httpapi.ErrWaitTimeout)
		}
		hold := min(p.opts.LongPoll, left.Round(time.Second))
		if hold < time.Second {
			hold = time.Second
		}
		resp, err := p.api.Do(ctx, httpapi.Request{
			Method:  http.MethodPost,
			Path:    "v1/devboxes/" + url.PathEscape(dbx.ID) + "/wait_for_status",
			JSON:    map[string]any{"statuses": []string{"running", "failure", "shutdown"}, "timeout_seconds": int(hold / time.Second)},
			Retry:   httpapi.RetryIdempotent,
			Timeout: hold + 10*time.Second,
			Accept:  []int{http.StatusRequestTimeout},
		})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("runloop: wait for devbox %s: %w", dbx.ID, ctx.Err())
			}
			return fmt.Errorf("runloop: wait for devbox %s: %w", dbx.ID, err)
		}
		if resp.StatusCode == http.StatusRequestTimeout {
			resp.Body.Close()
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&dbx)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("runloop: wait for devbox %s: decode: %w", dbx.ID, err)
		}
		last = dbx.Status
	}
	return nil
}

func (p *Provider) handle(id, workDir string, env map[string]string, owned bool) *remote.Sandbox {
	d := &driver{p: p, id: id, base: "v1/devboxes/" + url.PathEscape(id)}
	return remote.New(remote.Config{
		Provider: Name, ID: id, WorkDir: workDir, Owned: owned, Env: env, TempDir: p.opts.TempDir,
		KeepLines: outputLines - 1, KeepBytes: 64 << 10,
	}, d)
}

// driver talks to one devbox.
type driver struct {
	p    *Provider
	id   string
	base string
}

type executionJSON struct {
	ExecutionID     string `json:"execution_id"`
	Status          string `json:"status"`
	ExitStatus      *int   `json:"exit_status"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
}

func (d *driver) Run(ctx context.Context, r remote.Run) (remote.Result, error) {
	hold := d.p.opts.LongPoll
	var ex executionJSON
	err := d.p.api.JSON(ctx, httpapi.Request{
		Method: http.MethodPost,
		Path:   d.base + "/execute",
		Query:  url.Values{"last_n": {fmt.Sprint(outputLines)}},
		JSON: map[string]any{
			"command":            "sh -c " + remote.Quote(r.Script),
			"command_id":         uuid7(),
			"optimistic_timeout": int(hold / time.Second),
		},
		// The command_id makes a repeated request the same command.
		Retry:   httpapi.RetryIdempotent,
		Timeout: hold + 10*time.Second,
	}, &ex)
	if err != nil {
		return remote.Result{}, err
	}
	for ex.Status != "completed" {
		resp, err := d.p.api.Do(ctx, httpapi.Request{
			Method:  http.MethodPost,
			Path:    d.base + "/executions/" + url.PathEscape(ex.ExecutionID) + "/wait_for_status",
			Query:   url.Values{"last_n": {fmt.Sprint(outputLines)}},
			JSON:    map[string]any{"statuses": []string{"completed"}, "timeout_seconds": int(hold / time.Second)},
			Retry:   httpapi.RetryIdempotent,
			Timeout: hold + 10*time.Second,
			Accept:  []int{http.StatusRequestTimeout},
		})
		if err != nil {
			return remote.Result{}, err
		}
		if resp.StatusCode == http.StatusRequestTimeout {
			resp.Body.Close()
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&ex)
		resp.Body.Close()
		if err != nil {
			return remote.Result{}, fmt.Errorf("runloop: wait for execution %s: decode: %w", ex.ExecutionID, err)
		}
	}
	if ex.ExitStatus == nil {
		return remote.Result{}, fmt.Errorf("runloop: execution %s completed without an exit status", ex.ExecutionID)
	}
	return remote.Result{
		Stdout: []byte(ex.Stdout), Stderr: []byte(ex.Stderr), ExitCode: *ex.ExitStatus,
		Truncated: ex.StdoutTruncated || ex.StderrTruncated,
	}, nil
}

func (d *driver) WriteFile(ctx context.Context, path string, body *httpapi.Body) error {
	mp, err := httpapi.MultipartFile([][2]string{{"path", path}}, "file", "file", body)
	if err != nil {
		return err
	}
	return d.p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: d.base + "/upload_file", Body: mp,
		// Writing the same bytes to the same path twice is harmless.
		Retry: httpapi.RetryIdempotent}, nil)
}

func (d *driver) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := d.p.api.Do(ctx, httpapi.Request{Method: http.MethodPost, Path: d.base + "/download_file",
		JSON: map[string]string{"path": path}, Retry: httpapi.RetryIdempotent,
		Header: http.Header{"Accept": {"application/octet-stream"}}})
	if err != nil {
		if missingFile(err) {
			return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
		}
		return nil, err
	}
	return resp.Body, nil
}

// missingFile recognises the refused download of a file that does not exist by its
// status, 404, whatever the body says: Runloop documents no error body, and its SDKs map
// 404 to NotFoundError. The only fallback is a 400 whose message names a missing file,
// in case a deployment answers that way; the wording never turns another refusal (an
// unknown key, a devbox that is not running) into a missing file.
func missingFile(err error) bool {
	var e *httpapi.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Status {
	case http.StatusNotFound:
		return true
	case http.StatusBadRequest:
		m := strings.ToLower(e.Message)
		for _, phrase := range []string{"no such file", "file not found", "file does not exist"} {
			if strings.Contains(m, phrase) {
				return true
			}
		}
	}
	return false
}

func (d *driver) Delete(ctx context.Context) error { return d.p.Delete(ctx, d.id) }

// decodeError reads the error bodies Runloop has been seen to send: {"message"},
// {"error": "..."}, {"error": {"message"}} and {"detail"}.
func decodeError(_ int, body []byte) (code, message string) {
	var e struct {
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Error   json.RawMessage `json:"error"`
		Code    string          `json:"code"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	if e.Message != "" {
		return e.Code, e.Message
	}
	var s string
	if json.Unmarshal(e.Error, &s) == nil && s != "" {
		return e.Code, s
	}
	var nested struct{ Message, Code string }
	if json.Unmarshal(e.Error, &nested) == nil && nested.Message != "" {
		return nested.Code, nested.Message
	}
	if json.Unmarshal(e.Detail, &s) == nil {
		return e.Code, s
	}
	return e.Code, ""
}

// uuid7 returns a random UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, then
// random bits.
func uuid7() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ms := uint64(time.Now().UnixMilli())
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], ms)
	copy(b[0:6], ts[2:8])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Capabilities says what the runloop provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true}
}
