// Package daytona is the Daytona sandbox provider: a hand-written client for Daytona's v0
// REST API (the control plane at DAYTONA_API_URL and the per-sandbox toolbox behind
// toolboxProxyUrl), since no Go SDK can be downloaded.
//
// Calls it makes:
//
//	POST   {api}/sandbox                         create (labels, snapshot or image, auto-stop/-delete)
//	GET    {api}/sandbox/{id}                    readiness poll, Attach
//	POST   {api}/sandbox/{id}/start              Attach to a stopped, archived or paused sandbox
//	DELETE {api}/sandbox/{id}                    Close, Lister.Delete
//	GET    {api}/sandbox?labels={json}&cursor=   Lister.List (filtered server-side)
//	POST   {toolbox}/{id}/process/execute        Exec (one request per command)
//	POST   {toolbox}/{id}/files/upload?path=     Upload (the workspace tar, one request), large stdin
//	GET    {toolbox}/{id}/files/download?path=   Download
//
// /process/execute returns stdout and stderr combined; the command script sends stderr to
// a file and prints it after a random marker, so Exec still returns them apart. Upload
// sends the gzip tar as one file and unpacks it with one exec of tar: two requests for the
// whole tree, instead of one multipart request per batch of files.
//
// The backstop for a sandbox a killed run leaves behind is Daytona's idle timer:
// autoStopInterval (minutes, derived from Spec.TTL) followed by autoDeleteInterval 0
// (delete as soon as it stops). Daytona v0 has no wall-clock lifetime.
package daytona

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
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// Name is the provider's id.
const Name = "daytona"

// Defaults.
const (
	DefaultAPIURL       = "https://app.daytona.io/api"
	DefaultWorkingDir   = "/home/daytona"
	DefaultReadyTimeout = 3 * time.Minute
	// DefaultAutoStop is the idle auto-stop (minutes) when Spec.TTL is 0.
	DefaultAutoStop = 60
)

// Options configures the provider. Zero values take the defaults above or the
// documented environment variables.
type Options struct {
	// APIURL is the control-plane URL; default DAYTONA_API_URL (or the legacy
	// DAYTONA_SERVER_URL), else DefaultAPIURL.
	APIURL string `toml:"api_url"`
	// Target is the region ("us", "eu"); default DAYTONA_TARGET, else the org default.
	Target string `toml:"target"`
	// Image builds the sandbox from a container image (buildInfo "FROM <image>") when
	// Spec.Snapshot is empty. Empty: the org's default snapshot.
	Image string `toml:"image"`
	// CPU (cores), MemoryGB and DiskGB apply when building from Image; Daytona ignores
	// them for snapshots.
	CPU      int `toml:"cpu"`
	MemoryGB int `toml:"memory_gb"`
	DiskGB   int `toml:"disk_gb"`
	// AutoStopMinutes is the idle time after which Daytona stops (and then deletes) the
	// sandbox; 0 derives it from Spec.TTL, or DefaultAutoStop.
	AutoStopMinutes int `toml:"auto_stop_minutes"`
	// ReadyTimeout bounds the wait for the sandbox to start; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration `toml:"ready_timeout"`
	// PollInterval is the first pause of the readiness poll (default 500 ms); it grows to
	// 5 s.
	PollInterval time.Duration `toml:"-"`
	// RemoteOptions holds WorkingDir, TempDir and the HTTP transport.
	httpapi.RemoteOptions
}

// Provider creates and attaches Daytona sandboxes. It implements providers.Provider and
// providers.Lister.
type Provider struct {
	opts Options
	api  *httpapi.Client
	// tb carries the toolbox's auth; its BaseURL is unused (toolbox URLs are absolute).
	tb *httpapi.Client
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New checks the credentials and settings and returns a provider; nothing is created.
// A missing DAYTONA_API_KEY (or DAYTONA_JWT_TOKEN with DAYTONA_ORGANIZATION_ID) is a
// *httpapi.ConfigError wrapping providers.ErrConfig.
func New(opts Options, getenv func(string) string) (*Provider, error) {
	getenv = httpapi.Env(getenv)
	header := http.Header{}
	switch key, jwt, org := getenv("DAYTONA_API_KEY"), getenv("DAYTONA_JWT_TOKEN"), getenv("DAYTONA_ORGANIZATION_ID"); {
	case key != "":
		header.Set("Authorization", "Bearer "+key)
	case jwt != "" && org != "":
		header.Set("Authorization", "Bearer "+jwt)
		header.Set("X-Daytona-Organization-ID", org)
	case jwt != "":
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"DAYTONA_ORGANIZATION_ID"}, Problem: "is not set", Hint: "DAYTONA_JWT_TOKEN needs the organization id; or set DAYTONA_API_KEY"}
	default:
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"DAYTONA_API_KEY"}, Problem: "is not set", Hint: "create an API key in the Daytona dashboard under Keys"}
	}
	header.Set("X-Daytona-Source", "talkops")
	if opts.APIURL == "" {
		opts.APIURL = cmp.Or(getenv("DAYTONA_API_URL"), getenv("DAYTONA_SERVER_URL"), DefaultAPIURL)
	}
	if err := httpapi.CheckURL(Name, "api_url / DAYTONA_API_URL", opts.APIURL, DefaultAPIURL); err != nil {
		return nil, err
	}
	if opts.Target == "" {
		opts.Target = getenv("DAYTONA_TARGET")
	}
	if err := opts.Resolve(Name, DefaultWorkingDir); err != nil {
		return nil, err
	}
	if err := errors.Join(
		httpapi.CheckNotNegative(Name, "cpu", opts.CPU),
		httpapi.CheckNotNegative(Name, "memory_gb", opts.MemoryGB),
		httpapi.CheckNotNegative(Name, "disk_gb", opts.DiskGB),
		httpapi.CheckNotNegative(Name, "auto_stop_minutes", opts.AutoStopMinutes),
	); err != nil {
		return nil, err
	}
	if err := httpapi.CheckNotNegative(Name, "ready_timeout", opts.ReadyTimeout); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	return &Provider{opts: opts, api: opts.NewClient(Name, opts.APIURL, header, decodeError), tb: opts.NewClient(Name, "", header, decodeError)}, nil
}

// Name returns "daytona".
func (p *Provider) Name() string { return Name }

// sandboxJSON is the part of Daytona's Sandbox object the client reads.
type sandboxJSON struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	State           string            `json:"state"`
	ErrorReason     string            `json:"errorReason"`
	Labels          map[string]string `json:"labels"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
	CreatedAt       string            `json:"createdAt"`
}

type createRequest struct {
	Name                string            `json:"name,omitempty"`
	Snapshot            string            `json:"snapshot,omitempty"`
	BuildInfo           *buildInfo        `json:"buildInfo,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	Target              string            `json:"target,omitempty"`
	CPU                 int               `json:"cpu,omitempty"`
	Memory              int               `json:"memory,omitempty"`
	Disk                int               `json:"disk,omitempty"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval,omitempty"`
}

type buildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

// Create provisions a sandbox, waits until it is started and its toolbox answers, and
// returns it. Spec.Snapshot is a Daytona snapshot name or id; empty uses Options.Image, or
// the organization's default snapshot. A sandbox that fails to start is deleted.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("daytona: create: %w", err)
	}
	workDir := p.opts.WorkingDir
	if spec.WorkDir != "" {
		workDir = spec.WorkDir
	}
	req := createRequest{
		Name:               remote.Name(spec.RunID, 63),
		Snapshot:           spec.Snapshot,
		Labels:             spec.Labels,
		Target:             p.opts.Target,
		AutoStopInterval:   p.autoStop(spec.TTL),
		AutoDeleteInterval: 0,
	}
	if spec.Snapshot == "" && p.opts.Image != "" {
		req.BuildInfo = &buildInfo{DockerfileContent: "FROM " + p.opts.Image + "\n"}
		req.CPU, req.Memory, req.Disk = p.opts.CPU, p.opts.MemoryGB, p.opts.DiskGB
	}
	var sb sandboxJSON
	// The name is unique to this attempt, so a retried create cannot make a second
	// sandbox: it gets 409, and the sandbox the first attempt made is adopted.
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "sandbox", JSON: req, Retry: httpapi.RetryIdempotent}, &sb)
	if httpapi.StatusCode(err) == http.StatusConflict {
		var existing sandboxJSON
		if gerr := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "sandbox/" + url.PathEscape(req.Name)}, &existing); gerr == nil && existing.Labels[providers.LabelRunID] == spec.RunID {
			sb, err = existing, nil
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// The request may have reached the server: delete by our unique name.
			return nil, remote.Undo(ctx, fmt.Errorf("daytona: create: %w", ctx.Err()), func(c context.Context) error { return p.Delete(c, req.Name) })
		}
		return nil, fmt.Errorf("daytona: create: %w", err)
	}
	if sb.ID == "" {
		return nil, remote.Undo(ctx, errors.New("daytona: create: the response has no sandbox id"), func(c context.Context) error { return p.Delete(c, req.Name) })
	}
	undo := func(cause error) error {
		return remote.Undo(ctx, cause, func(c context.Context) error { return p.Delete(c, sb.ID) })
	}
	ready, err := p.waitStarted(ctx, sb)
	if err != nil {
		return nil, undo(err)
	}
	s, err := p.handle(ready, workDir, spec.Env, true)
	if err != nil {
		return nil, undo(err)
	}
	if err := p.probe(ctx, s, workDir); err != nil {
		return nil, undo(err)
	}
	return s, nil
}

// Attach connects to an existing sandbox by id or name, starting it if it is stopped,
// archived or paused (the states Daytona's start accepts). Close on the handle never
// deletes it.
func (p *Provider) Attach(ctx context.Context, id string, opts providers.AttachOptions) (providers.Sandbox, error) {
	if id == "" {
		return nil, fmt.Errorf("daytona: attach: empty sandbox id: %w", providers.ErrNotFound)
	}
	sb, err := p.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("daytona: attach %s: %w", id, err)
	}
	switch sb.State {
	case "started":
	case "stopped", "archived", "paused":
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: "sandbox/" + url.PathEscape(sb.ID) + "/start", Retry: httpapi.RetryIdempotent}, nil); err != nil {
			return nil, fmt.Errorf("daytona: attach %s: start the %s sandbox: %w", id, sb.State, err)
		}
		if sb, err = p.waitStarted(ctx, sb); err != nil {
			return nil, fmt.Errorf("daytona: attach %s: %w", id, err)
		}
	default:
		if sb, err = p.waitStarted(ctx, sb); err != nil {
			return nil, fmt.Errorf("daytona: attach %s: %w", id, err)
		}
	}
	return p.handle(sb, cmp.Or(opts.WorkDir, p.opts.WorkingDir), nil, false)
}

// List returns the sandboxes labelled talkops.created-by=talkops (filtered by Daytona).
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	labels, _ := json.Marshal(map[string]string{providers.LabelCreatedBy: "talkops"})
	var out []providers.Info
	cursor := ""
	for page := 0; page < 1000; page++ {
		q := url.Values{"labels": {string(labels)}, "limit": {"200"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var resp struct {
			Items      []sandboxJSON `json:"items"`
			NextCursor *string       `json:"nextCursor"`
		}
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "sandbox", Query: q}, &resp); err != nil {
			return out, fmt.Errorf("daytona: list sandboxes: %w", err)
		}
		for _, sb := range resp.Items {
			created, _ := time.Parse(time.RFC3339, sb.CreatedAt)
			out = append(out, remote.InfoFromLabels(Name, sb.ID, sb.State, created, sb.Labels))
		}
		if resp.NextCursor == nil || *resp.NextCursor == "" || len(resp.Items) == 0 {
			return out, nil
		}
		cursor = *resp.NextCursor
	}
	return out, errors.New("daytona: list sandboxes: more than 1000 pages")
}

// Delete deletes a sandbox by id or name; one that is already gone is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodDelete, Path: "sandbox/" + url.PathEscape(id)}, nil)
	if err != nil && httpapi.StatusCode(err) != http.StatusNotFound {
		return err
	}
	return nil
}

func (p *Provider) get(ctx context.Context, id string) (sandboxJSON, error) {
	var sb sandboxJSON
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "sandbox/" + url.PathEscape(id)}, &sb)
	if httpapi.StatusCode(err) == http.StatusNotFound {
		return sb, fmt.Errorf("%w: %w", providers.ErrNotFound, err)
	}
	return sb, err
}

// waitStarted polls the sandbox until it is started, failed, or the bound passes.
func (p *Provider) waitStarted(ctx context.Context, sb sandboxJSON) (sandboxJSON, error) {
	if sb.State == "started" {
		return sb, nil
	}
	last := sb.State
	err := httpapi.Poll(ctx, p.opts.ReadyTimeout, p.opts.PollInterval, 5*time.Second, func(ctx context.Context) (bool, error) {
		cur, err := p.get(ctx, sb.ID)
		if err != nil {
			return false, err
		}
		sb, last = cur, cur.State
		switch cur.State {
		case "started":
			return true, nil
		case "error", "build_failed", "destroyed", "destroying":
			reason := cur.ErrorReason
			if reason == "" {
				reason = "no reason given"
			}
			return false, fmt.Errorf("daytona: sandbox %s is %s: %s", cur.ID, cur.State, reason)
		}
		return false, nil
	})
	if err != nil {
		if errors.Is(err, httpapi.ErrWaitTimeout) {
			return sb, fmt.Errorf("daytona: sandbox %s not started within %s (last state %q): %w", sb.ID, p.opts.ReadyTimeout, last, err)
		}
		return sb, fmt.Errorf("daytona: wait for sandbox %s: %w", sb.ID, err)
	}
	return sb, nil
}

// probe checks that the toolbox answers and creates the working directory.
func (p *Provider) probe(ctx context.Context, s *remote.Sandbox, workDir string) error {
	var lastErr error
	err := httpapi.Poll(ctx, p.opts.ReadyTimeout, p.opts.PollInterval, 5*time.Second, func(ctx context.Context) (bool, error) {
		res, err := s.Driver().Run(ctx, remote.Run{Script: "mkdir -p -- " + remote.Quote(workDir) + "\n", Timeout: time.Minute, Repeatable: true})
		if err != nil {
			lastErr = err
			if s := httpapi.StatusCode(err); s == http.StatusUnauthorized || s == http.StatusForbidden {
				return false, err
			}
			return false, nil // the toolbox may lag behind the "started" state
		}
		if res.ExitCode != 0 {
			return false, fmt.Errorf("daytona: create working directory %s: exit %d: %s", workDir, res.ExitCode, strings.TrimSpace(string(res.Stdout)))
		}
		return true, nil
	})
	if err != nil && lastErr != nil && errors.Is(err, httpapi.ErrWaitTimeout) {
		return fmt.Errorf("daytona: toolbox of sandbox %s did not answer: %w (last error: %w)", s.ID(), err, lastErr)
	}
	return err
}

func (p *Provider) handle(sb sandboxJSON, workDir string, env map[string]string, owned bool) (*remote.Sandbox, error) {
	if sb.ToolboxProxyURL == "" {
		return nil, fmt.Errorf("daytona: sandbox %s has no toolboxProxyUrl", sb.ID)
	}
	d := &driver{p: p, id: sb.ID, toolbox: strings.TrimRight(sb.ToolboxProxyURL, "/") + "/" + url.PathEscape(sb.ID)}
	return remote.New(remote.Config{
		Provider:    Name,
		ID:          sb.ID,
		WorkDir:     workDir,
		Owned:       owned,
		Env:         env,
		SplitStderr: true,
		TempDir:     p.opts.TempDir,
	}, d), nil
}

func (p *Provider) autoStop(ttl time.Duration) int {
	if p.opts.AutoStopMinutes > 0 {
		return p.opts.AutoStopMinutes
	}
	if ttl <= 0 {
		return DefaultAutoStop
	}
	return max(1, int((ttl+time.Minute-1)/time.Minute))
}

// driver talks to one sandbox's toolbox.
type driver struct {
	p       *Provider
	id      string
	toolbox string
}

type executeRequest struct {
	Command string `json:"command"`
	Timeout uint32 `json:"timeout,omitempty"`
}

type executeResponse struct {
	ExitCode *int   `json:"exitCode"`
	Code     *int   `json:"code"` // daemons before the rename
	Result   string `json:"result"`
}

func (d *driver) Run(ctx context.Context, r remote.Run) (remote.Result, error) {
	req := executeRequest{Command: "sh -c " + remote.Quote(r.Script)}
	if r.Timeout > 0 {
		req.Timeout = uint32((r.Timeout + time.Second - 1) / time.Second)
	}
	var resp executeResponse
	// process/execute takes no idempotency key: a command that may have started is not
	// sent again (Run.Retry).
	err := d.p.tb.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: d.toolbox + "/process/execute", JSON: req, Retry: r.Retry()}, &resp)
	if httpapi.StatusCode(err) == http.StatusRequestTimeout {
		return remote.Result{ExitCode: 124, TimedOut: true, Stdout: []byte{}}, nil
	}
	if err != nil {
		return remote.Result{}, err
	}
	code := resp.ExitCode
	if code == nil {
		code = resp.Code
	}
	if code == nil {
		return remote.Result{}, errors.New("daytona: process/execute: response has no exit code")
	}
	if *code == -1 {
		return remote.Result{}, fmt.Errorf("daytona: process/execute: the command could not be started: %s", strings.TrimSpace(resp.Result))
	}
	return remote.Result{Stdout: []byte(resp.Result), ExitCode: *code}, nil
}

func (d *driver) WriteFile(ctx context.Context, path string, body *httpapi.Body) error {
	mp, err := httpapi.MultipartFile(nil, "file", "file", body)
	if err != nil {
		return err
	}
	return d.p.tb.JSON(ctx, httpapi.Request{
		Method: http.MethodPost,
		Path:   d.toolbox + "/files/upload",
		Query:  url.Values{"path": {path}},
		Body:   mp,
		// Writing the same bytes to the same path twice is harmless.
		Retry: httpapi.RetryIdempotent,
	}, nil)
}

func (d *driver) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := d.p.tb.Do(ctx, httpapi.Request{
		Method: http.MethodGet,
		Path:   d.toolbox + "/files/download",
		Query:  url.Values{"path": {path}},
		Header: http.Header{"Accept": {"application/octet-stream"}},
	})
	if httpapi.StatusCode(err) == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (d *driver) Delete(ctx context.Context) error { return d.p.Delete(ctx, d.id) }

// decodeError reads both error shapes: the API's NestJS body {statusCode, error,
// message (string or list)} and the toolbox's {statusCode, message, code}.
func decodeError(_ int, body []byte) (code, message string) {
	var e struct {
		Error   string          `json:"error"`
		Code    string          `json:"code"`
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	var s string
	var list []string
	switch {
	case json.Unmarshal(e.Message, &s) == nil:
	case json.Unmarshal(e.Message, &list) == nil:
		s = strings.Join(list, "; ")
	}
	if s == "" {
		s = e.Error
	}
	return e.Code, s
}

// Capabilities says what the daytona provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true}
}
