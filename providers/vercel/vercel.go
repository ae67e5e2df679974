// Package vercel is the Vercel Sandbox provider: a hand-written client for the Vercel
// Sandbox REST API (the v2/v3 "named sandbox + session" generation that @vercel/sandbox
// 3.x uses), since there is no Go SDK.
//
// Calls it makes (every one with ?teamId=):
//
//	POST   /v3/sandboxes (or /v2/sandboxes with a runtime)   create, persistent:false, tags, timeout
//	GET    /v2/sandboxes/sessions/{session}                  readiness poll
//	GET    /v2/sandboxes/{name}?projectId=&resume=true       Attach (resumes a stopped one)
//	DELETE /v2/sandboxes/{name}?projectId=                   Close, Lister.Delete (delete, never just stop)
//	GET    /v2/sandboxes?project=&tags=k:v&cursor=           Lister.List (filtered server-side)
//	POST   /v2/sandboxes/sessions/{session}/cmd              Exec (wait + logs: NDJSON, streamed live)
//	POST   /v2/sandboxes/sessions/{session}/fs/write         Upload (the workspace tar, one request; x-cwd "/", full paths)
//	POST   /v2/sandboxes/sessions/{session}/fs/read          Download
//
// Upload costs one request for the whole tree: fs/write takes a gzip tar natively. Close
// deletes the sandbox by name: stopping a Vercel sandbox keeps its snapshot (and bills for
// it), so talkops never relies on stop. The backstop for a sandbox a killed run leaves
// behind is the session timeout (Spec.TTL, milliseconds on the wire); with persistent:false
// nothing is snapshotted when it stops, and `talkops sandbox gc` deletes the name.
//
// The sandbox id talkops reports is the sandbox name.
package vercel

import (
	"archive/tar"
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// Name is the provider's id.
const Name = "vercel"

// Defaults.
const (
	DefaultAPIURL       = "https://vercel.com/api"
	DefaultWorkingDir   = "/vercel/sandbox"
	DefaultTimeout      = 30 * time.Minute
	DefaultReadyTimeout = 3 * time.Minute
	// MaxTags is Vercel's limit of tags per sandbox.
	MaxTags = 5
)

// Options configures the provider.
type Options struct {
	// APIURL is the API base; default DefaultAPIURL.
	APIURL string `toml:"api_url"`
	// Runtime ("node24", "python3.13", ...) selects a runtime image (the v2 create);
	// empty uses Image.
	Runtime string `toml:"runtime"`
	// Image is the container image when Runtime is empty; "" is Vercel's default
	// (vercel/sandbox/universal).
	Image string `toml:"image"`
	// VCPUs is the number of vCPUs (2048 MB of memory each); 0 is Vercel's default.
	VCPUs int `toml:"vcpus"`
	// Region ("iad1"); empty is Vercel's default.
	Region string `toml:"region"`
	// Timeout is the session lifetime when Spec.TTL is 0; default DefaultTimeout.
	Timeout time.Duration `toml:"timeout"`
	// ReadyTimeout bounds the wait for a session to run; default DefaultReadyTimeout.
	ReadyTimeout time.Duration `toml:"ready_timeout"`
	// PollInterval is the first pause of the readiness poll (default 500 ms).
	PollInterval time.Duration `toml:"-"`
	// RemoteOptions holds WorkingDir, TempDir and the HTTP transport.
	httpapi.RemoteOptions
}

// Provider creates and attaches Vercel sandboxes. It implements providers.Provider and
// providers.Lister.
type Provider struct {
	opts      Options
	api       *httpapi.Client
	teamID    string
	projectID string
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New checks credentials and settings and returns a provider; nothing is created.
// Credentials: VERCEL_OIDC_TOKEN (its claims give the team and project; VERCEL_PROJECT_ID
// fills in a missing project), or all three of VERCEL_TOKEN, VERCEL_TEAM_ID and
// VERCEL_PROJECT_ID. A missing or partial set, or an expired OIDC token, is a
// *httpapi.ConfigError wrapping providers.ErrConfig.
func New(opts Options, getenv func(string) string) (*Provider, error) {
	getenv = httpapi.Env(getenv)
	token, teamID, projectID, err := credentials(getenv, time.Now())
	if err != nil {
		return nil, err
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if err := httpapi.CheckURL(Name, "api_url", opts.APIURL, DefaultAPIURL); err != nil {
		return nil, err
	}
	if err := opts.Resolve(Name, DefaultWorkingDir); err != nil {
		return nil, err
	}
	if err := errors.Join(
		httpapi.CheckNotNegative(Name, "vcpus", opts.VCPUs),
		httpapi.CheckNotNegative(Name, "timeout", opts.Timeout),
	); err != nil {
		return nil, err
	}
	if opts.Runtime != "" && opts.Image != "" {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"runtime", "image"}, Problem: "are both set", Hint: "a sandbox runs either a runtime or an image"}
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
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
	header := http.Header{"Authorization": {"Bearer " + token}, "User-Agent": {"talkops"}}
	return &Provider{opts: opts, api: opts.NewClient(Name, opts.APIURL, header, decodeError), teamID: teamID, projectID: projectID}, nil
}

// credentials resolves the token, team and project from the environment.
func credentials(getenv func(string) string, now time.Time) (token, team, project string, err error) {
	if oidc := getenv("VERCEL_OIDC_TOKEN"); oidc != "" {
		claims, ok := decodeJWT(oidc)
		if !ok || claims.OwnerID == "" {
			return "", "", "", &httpapi.ConfigError{Provider: Name, Vars: []string{"VERCEL_OIDC_TOKEN"}, Problem: "is not a Vercel OIDC token (a JWT with an owner_id claim)", Hint: "pull a fresh one with `vercel env pull`"}
		}
		if claims.Exp > 0 && now.After(time.Unix(claims.Exp, 0)) {
			return "", "", "", &httpapi.ConfigError{Provider: Name, Vars: []string{"VERCEL_OIDC_TOKEN"}, Problem: "expired at " + time.Unix(claims.Exp, 0).UTC().Format(time.RFC3339), Hint: "pull a fresh one with `vercel env pull`, or use VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID"}
		}
		project = cmp.Or(claims.ProjectID, getenv("VERCEL_PROJECT_ID"))
		if project == "" {
			return "", "", "", &httpapi.ConfigError{Provider: Name, Vars: []string{"VERCEL_PROJECT_ID"}, Problem: "is not set and VERCEL_OIDC_TOKEN has no project_id claim"}
		}
		return oidc, claims.OwnerID, project, nil
	}
	token, team, project = getenv("VERCEL_TOKEN"), getenv("VERCEL_TEAM_ID"), getenv("VERCEL_PROJECT_ID")
	var missing []string
	for _, kv := range [][2]string{{"VERCEL_TOKEN", token}, {"VERCEL_TEAM_ID", team}, {"VERCEL_PROJECT_ID", project}} {
		if kv[1] == "" {
			missing = append(missing, kv[0])
		}
	}
	switch len(missing) {
	case 0:
		return token, team, project, nil
	case 3:
		return "", "", "", &httpapi.ConfigError{Provider: Name, Vars: []string{"VERCEL_OIDC_TOKEN"}, Problem: "is not set", Hint: "or set all three of VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID"}
	default:
		return "", "", "", &httpapi.ConfigError{Provider: Name, Vars: missing, Problem: "not set", Hint: "VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID are needed together"}
	}
}

type jwtClaims struct {
	OwnerID   string `json:"owner_id"`
	ProjectID string `json:"project_id"`
	Exp       int64  `json:"exp"`
}

// decodeJWT reads a JWT's claims without verifying it (Vercel verifies it).
func decodeJWT(tok string) (jwtClaims, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return jwtClaims{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return jwtClaims{}, false
	}
	var c jwtClaims
	if json.Unmarshal(raw, &c) != nil {
		return jwtClaims{}, false
	}
	return c, true
}

// Name returns "vercel".
func (p *Provider) Name() string { return Name }

type sandboxJSON struct {
	Name             string            `json:"name"`
	Status           string            `json:"status"`
	CurrentSessionID string            `json:"currentSessionId"`
	Cwd              string            `json:"cwd"`
	Tags             map[string]string `json:"tags"`
	CreatedAt        int64             `json:"createdAt"`
	ExpiresAt        int64             `json:"expiresAt"`
}

type sessionJSON struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Cwd     string `json:"cwd"`
	Timeout int64  `json:"timeout"`
}

type sandboxAndSession struct {
	Sandbox sandboxJSON `json:"sandbox"`
	Session sessionJSON `json:"session"`
}

type createRequest struct {
	ProjectID  string            `json:"projectId"`
	Name       string            `json:"name"`
	Runtime    string            `json:"runtime,omitempty"`
	Image      string            `json:"image,omitempty"`
	Source     *source           `json:"source,omitempty"`
	Timeout    int64             `json:"timeout"`
	Resources  *resources        `json:"resources,omitempty"`
	Persistent bool              `json:"persistent"`
	Tags       map[string]string `json:"tags,omitempty"`
	Region     string            `json:"region,omitempty"`
}

type source struct {
	Type       string `json:"type"`
	SnapshotID string `json:"snapshotId"`
}

type resources struct {
	VCPUs int `json:"vcpus"`
}

// Create provisions a sandbox and waits until its session runs. Spec.Snapshot must be a
// Vercel snapshot id ("snap_…"); Vercel has no named snapshots, so a name is rejected
// with providers.ErrNotSupported. A sandbox whose session does not start is deleted.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("vercel: create: %w", err)
	}
	req := createRequest{
		ProjectID: p.projectID,
		Name:      remote.Name(spec.RunID, 48),
		Runtime:   p.opts.Runtime,
		Image:     p.opts.Image,
		Timeout:   p.timeout(spec.TTL).Milliseconds(),
		Region:    p.opts.Region,
		// A persistent sandbox snapshots itself when it stops and is billed for that;
		// talkops sandboxes are throwaway.
		Persistent: false,
	}
	if spec.Snapshot != "" {
		if !strings.HasPrefix(spec.Snapshot, "snap_") {
			return nil, fmt.Errorf("vercel: create from snapshot %q: Vercel creates sandboxes from a snapshot id (snap_…), not a name: %w", spec.Snapshot, providers.ErrNotSupported)
		}
		req.Source = &source{Type: "snapshot", SnapshotID: spec.Snapshot}
	}
	if p.opts.VCPUs > 0 {
		req.Resources = &resources{VCPUs: p.opts.VCPUs}
	}
	tags, err := tagsFromLabels(spec.Labels)
	if err != nil {
		return nil, err
	}
	req.Tags = tags
	path := "v3/sandboxes"
	if req.Runtime != "" {
		path = "v2/sandboxes"
	}
	var created sandboxAndSession
	// The name is unique to this attempt, so retrying cannot create a second sandbox.
	err = p.api.JSON(ctx, httpapi.Request{Method: http.MethodPost, Path: path, Query: p.team(), JSON: req, Retry: httpapi.RetryIdempotent}, &created)
	if httpapi.StatusCode(err) == http.StatusConflict {
		if existing, gerr := p.get(ctx, req.Name, false); gerr == nil && existing.Sandbox.Tags[providers.LabelRunID] == tags[providers.LabelRunID] {
			created, err = existing, nil
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, remote.Undo(ctx, fmt.Errorf("vercel: create: %w", ctx.Err()), func(c context.Context) error { return p.Delete(c, req.Name) })
		}
		return nil, fmt.Errorf("vercel: create: %w", err)
	}
	name := cmp.Or(created.Sandbox.Name, req.Name)
	undo := func(cause error) error {
		return remote.Undo(ctx, cause, func(c context.Context) error { return p.Delete(c, name) })
	}
	if created.Session.ID == "" {
		return nil, undo(errors.New("vercel: create: the response has no session id"))
	}
	sess, err := p.waitRunning(ctx, name, created.Session)
	if err != nil {
		return nil, undo(err)
	}
	workDir := cmp.Or(spec.WorkDir, p.opts.WorkingDir)
	s := p.handle(name, sess.ID, workDir, spec.Env, true)
	if workDir != sess.Cwd {
		res, err := s.Driver().Run(ctx, remote.Run{Script: "mkdir -p -- " + remote.Quote(workDir) + "\n", Timeout: time.Minute, Repeatable: true})
		switch {
		case err != nil:
			return nil, undo(fmt.Errorf("vercel: create working directory %s: %w", workDir, err))
		case res.ExitCode != 0:
			return nil, undo(fmt.Errorf("vercel: create working directory %s: exit %d: %s", workDir, res.ExitCode, strings.TrimSpace(string(res.Stderr))))
		}
	}
	return s, nil
}

// Attach connects to a sandbox by name, resuming it if its session stopped. Close on the
// handle never deletes it.
func (p *Provider) Attach(ctx context.Context, name string, opts providers.AttachOptions) (providers.Sandbox, error) {
	if name == "" {
		return nil, fmt.Errorf("vercel: attach: empty sandbox name: %w", providers.ErrNotFound)
	}
	got, err := p.get(ctx, name, true)
	if err != nil {
		return nil, fmt.Errorf("vercel: attach %s: %w", name, err)
	}
	sess, err := p.waitRunning(ctx, name, got.Session)
	if err != nil {
		return nil, fmt.Errorf("vercel: attach %s: %w", name, err)
	}
	return p.handle(got.Sandbox.Name, sess.ID, cmp.Or(opts.WorkDir, p.opts.WorkingDir), nil, false), nil
}

// List returns the sandboxes tagged talkops.created-by=talkops (filtered by Vercel).
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	var out []providers.Info
	cursor := ""
	for page := 0; page < 1000; page++ {
		q := p.team()
		q.Set("project", p.projectID)
		q.Set("tags", providers.LabelCreatedBy+":talkops")
		q.Set("limit", "100")
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var resp struct {
			Sandboxes  []sandboxJSON `json:"sandboxes"`
			Pagination struct {
				Next *string `json:"next"`
			} `json:"pagination"`
		}
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "v2/sandboxes", Query: q}, &resp); err != nil {
			return out, fmt.Errorf("vercel: list sandboxes: %w", err)
		}
		for _, sb := range resp.Sandboxes {
			labels := labelsFromTags(sb.Tags)
			info := remote.InfoFromLabels(Name, sb.Name, sb.Status, time.UnixMilli(sb.CreatedAt).UTC(), labels)
			if info.ExpiresAt.IsZero() && sb.ExpiresAt > 0 {
				info.ExpiresAt = time.UnixMilli(sb.ExpiresAt).UTC()
			}
			out = append(out, info)
		}
		if resp.Pagination.Next == nil || *resp.Pagination.Next == "" || len(resp.Sandboxes) == 0 {
			return out, nil
		}
		cursor = *resp.Pagination.Next
	}
	return out, errors.New("vercel: list sandboxes: more than 1000 pages")
}

// Delete deletes a sandbox by name (stopping a running session, keeping no snapshot); one
// that is already gone is not an error.
func (p *Provider) Delete(ctx context.Context, name string) error {
	q := p.team()
	q.Set("projectId", p.projectID)
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodDelete, Path: "v2/sandboxes/" + url.PathEscape(name), Query: q}, nil)
	if err != nil && httpapi.StatusCode(err) != http.StatusNotFound {
		return err
	}
	return nil
}

func (p *Provider) team() url.Values { return url.Values{"teamId": {p.teamID}} }

func (p *Provider) timeout(ttl time.Duration) time.Duration {
	if ttl > 0 {
		return ttl
	}
	return p.opts.Timeout
}

func (p *Provider) get(ctx context.Context, name string, resume bool) (sandboxAndSession, error) {
	q := p.team()
	q.Set("projectId", p.projectID)
	if resume {
		q.Set("resume", "true")
	}
	var out sandboxAndSession
	err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "v2/sandboxes/" + url.PathEscape(name), Query: q}, &out)
	if httpapi.StatusCode(err) == http.StatusNotFound {
		return out, fmt.Errorf("%w: %w", providers.ErrNotFound, err)
	}
	return out, err
}

func (p *Provider) waitRunning(ctx context.Context, name string, sess sessionJSON) (sessionJSON, error) {
	if sess.Status == "running" {
		return sess, nil
	}
	last := sess.Status
	err := httpapi.Poll(ctx, p.opts.ReadyTimeout, p.opts.PollInterval, 5*time.Second, func(ctx context.Context) (bool, error) {
		var resp struct {
			Session sessionJSON `json:"session"`
		}
		if err := p.api.JSON(ctx, httpapi.Request{Method: http.MethodGet, Path: "v2/sandboxes/sessions/" + url.PathEscape(sess.ID), Query: p.team()}, &resp); err != nil {
			return false, err
		}
		sess, last = resp.Session, resp.Session.Status
		switch last {
		case "running":
			return true, nil
		case "failed", "aborted", "stopped", "stopping":
			return false, fmt.Errorf("vercel: sandbox %s session %s is %s", name, sess.ID, last)
		}
		return false, nil
	})
	if err != nil {
		if errors.Is(err, httpapi.ErrWaitTimeout) {
			return sess, fmt.Errorf("vercel: sandbox %s not running within %s (last status %q): %w", name, p.opts.ReadyTimeout, last, err)
		}
		return sess, fmt.Errorf("vercel: wait for sandbox %s: %w", name, err)
	}
	return sess, nil
}

func (p *Provider) handle(name, sessionID, workDir string, env map[string]string, owned bool) *remote.Sandbox {
	d := &driver{p: p, name: name, session: "v2/sandboxes/sessions/" + url.PathEscape(sessionID)}
	return remote.New(remote.Config{Provider: Name, ID: name, WorkDir: workDir, Owned: owned, Env: env, TempDir: p.opts.TempDir}, d)
}

// expiryTagLayout writes LabelExpiresAt without colons, which tag filters split on.
const expiryTagLayout = "20060102T150405Z"

// tagsFromLabels maps labels to at most MaxTags tags, talkops's own labels first.
func tagsFromLabels(labels map[string]string) (map[string]string, error) {
	tags := map[string]string{}
	for _, k := range []string{providers.LabelRunID, providers.LabelCreatedBy, providers.LabelExpiresAt} {
		if v, ok := labels[k]; ok {
			if k == providers.LabelExpiresAt {
				if t, err := time.Parse(time.RFC3339, v); err == nil {
					v = t.UTC().Format(expiryTagLayout)
				}
			}
			tags[k] = v
		}
	}
	rest := slices.Sorted(maps.Keys(labels))
	for _, k := range rest {
		if _, done := tags[k]; done {
			continue
		}
		if len(tags) == MaxTags {
			return nil, fmt.Errorf("vercel: create: %d labels, but a Vercel sandbox takes at most %d tags (talkops uses 3): %w", len(labels), MaxTags, providers.ErrNotSupported)
		}
		tags[k] = labels[k]
	}
	if len(tags) == 0 {
		return nil, nil
	}
	return tags, nil
}

// labelsFromTags reverses tagsFromLabels.
func labelsFromTags(tags map[string]string) map[string]string {
	labels := maps.Clone(tags)
	if v, ok := labels[providers.LabelExpiresAt]; ok {
		if t, err := time.Parse(expiryTagLayout, v); err == nil {
			labels[providers.LabelExpiresAt] = t.UTC().Format(time.RFC3339)
		}
	}
	return labels
}

// driver talks to one sandbox session.
type driver struct {
	p       *Provider
	name    string
	session string // path prefix of the session
}

type cmdRequest struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env"`
	Sudo    bool              `json:"sudo"`
	Wait    bool              `json:"wait"`
	Logs    bool              `json:"logs"`
	Timeout int64             `json:"timeout,omitempty"`
}

type commandJSON struct {
	ID       string `json:"id"`
	ExitCode *int   `json:"exitCode"`
}

// ndjsonLine is one line of the command stream: a command record, or a log line.
type ndjsonLine struct {
	Command *commandJSON    `json:"command"`
	Stream  string          `json:"stream"`
	Data    json.RawMessage `json:"data"`
}

func (d *driver) Run(ctx context.Context, r remote.Run) (remote.Result, error) {
	req := cmdRequest{Command: "bash", Args: []string{"-lc", r.Script}, Env: map[string]string{}, Wait: true, Logs: true}
	if r.Timeout > 0 {
		req.Timeout = r.Timeout.Milliseconds()
	}
	// cmd takes no idempotency key: a command that may have started is not sent again
	// (Run.Retry).
	resp, err := d.p.api.Do(ctx, httpapi.Request{Method: http.MethodPost, Path: d.session + "/cmd", Query: d.p.team(), JSON: req,
		Header: http.Header{"Accept": {"application/x-ndjson"}}, Retry: r.Retry()})
	if err != nil {
		return remote.Result{}, d.explain(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-ndjson") {
		return remote.Result{}, fmt.Errorf("vercel: run command: expected a stream of command data, got content type %q", ct)
	}
	var stdout, stderr []byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var line ndjsonLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return remote.Result{}, fmt.Errorf("vercel: run command: bad stream line: %w", err)
		}
		switch {
		case line.Command != nil:
			if line.Command.ExitCode != nil {
				return remote.Result{Stdout: stdout, Stderr: stderr, ExitCode: *line.Command.ExitCode, Streamed: true}, nil
			}
		case line.Stream == "stdout" || line.Stream == "stderr":
			var data string
			if err := json.Unmarshal(line.Data, &data); err != nil {
				return remote.Result{}, fmt.Errorf("vercel: run command: bad %s line: %w", line.Stream, err)
			}
			w := r.Stdout
			if line.Stream == "stdout" {
				stdout = append(stdout, data...)
			} else {
				stderr = append(stderr, data...)
				w = r.Stderr
			}
			if w != nil {
				_, _ = io.WriteString(w, data)
			}
		case line.Stream == "error":
			var e struct{ Code, Message string }
			_ = json.Unmarshal(line.Data, &e)
			return remote.Result{}, fmt.Errorf("vercel: run command: %s (%s)", e.Message, e.Code)
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return remote.Result{}, ctx.Err()
		}
		return remote.Result{}, fmt.Errorf("vercel: run command: read stream: %w", err)
	}
	if ctx.Err() != nil {
		return remote.Result{}, ctx.Err()
	}
	return remote.Result{}, errors.New("vercel: run command: the stream ended before the command finished")
}

// WriteFile writes one file through fs/write, as a one-entry gzip tar extracted at "/".
func (d *driver) WriteFile(ctx context.Context, path string, body *httpapi.Body) error {
	if body.Size < 0 {
		return errors.New("vercel: write file: unknown size")
	}
	name := strings.TrimLeft(path, "/")
	tgz := gzipTarFrom(body, func(w io.Writer, src io.Reader) error {
		aw := archive.NewWriter(w)
		if err := aw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: body.Size, Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return err
		}
		if _, err := io.Copy(aw, src); err != nil {
			return err
		}
		return aw.Close()
	})
	return d.UploadTarGz(ctx, "/", tgz)
}

// UploadTarGz hands the gzip tar to fs/write to extract under dir. It sends it the way
// @vercel/sandbox does, the only form known to work: x-cwd "/" and every entry named by
// its full path without the leading "/", so the entries are renamed on the way.
func (d *driver) UploadTarGz(ctx context.Context, dir string, body *httpapi.Body) error {
	if prefix := strings.Trim(path.Clean("/"+dir), "/"); prefix != "" {
		body = underDir(body, prefix)
	}
	err := d.p.api.JSON(ctx, httpapi.Request{
		Method: http.MethodPost,
		Path:   d.session + "/fs/write",
		Query:  d.p.team(),
		Header: http.Header{"X-Cwd": {"/"}},
		Body:   &httpapi.Body{Open: body.Open, Size: body.Size, ContentType: "application/gzip"},
		// Extracting the same archive twice gives the same files.
		Retry: httpapi.RetryIdempotent,
	}, nil)
	return d.explain(err)
}

// underDir returns body, a gzip tar, with prefix (a path relative to "/") put in front
// of every entry name and hard link target. It streams: the archive is never held whole.
func underDir(body *httpapi.Body, prefix string) *httpapi.Body {
	return gzipTarFrom(body, func(w io.Writer, src io.Reader) error { return renameEntries(w, src, prefix) })
}

// gzipTarFrom returns a gzip tar body of unknown size that write produces from a fresh
// reader of body on every attempt, streamed through a pipe.
func gzipTarFrom(body *httpapi.Body, write func(w io.Writer, src io.Reader) error) *httpapi.Body {
	return &httpapi.Body{Size: -1, ContentType: "application/gzip", Open: func() (io.ReadCloser, error) {
		src, err := body.Open()
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			defer src.Close()
			pw.CloseWithError(write(pw, src))
		}()
		return pr, nil
	}}
}

func renameEntries(w io.Writer, tgz io.Reader, prefix string) error {
	zr, err := gzip.NewReader(tgz)
	if err != nil {
		return fmt.Errorf("vercel: upload: not a gzip stream: %w", err)
	}
	// The level workspace packs with: renaming must not cost more time than the sync.
	tw, err := archive.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	buf := make([]byte, 32<<10) // one copy buffer for all entries, not one each
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("vercel: upload: read archive: %w", err)
		}
		if hdr.Typeflag != tar.TypeXGlobalHeader {
			if hdr.Name, err = joinEntry(prefix, hdr.Name); err != nil {
				return err
			}
			if hdr.Typeflag == tar.TypeLink {
				if hdr.Linkname, err = joinEntry(prefix, hdr.Linkname); err != nil {
					return err
				}
			}
		}
		// The names are set above; stale PAX copies of them would win, and the writer
		// picks the format the new, longer names need.
		delete(hdr.PAXRecords, "path")
		delete(hdr.PAXRecords, "linkpath")
		hdr.Format = tar.FormatUnknown
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("vercel: upload: archive entry %q: %w", hdr.Name, err)
		}
		if _, err := io.CopyBuffer(tw, tr, buf); err != nil {
			return fmt.Errorf("vercel: upload: archive entry %q: %w", hdr.Name, err)
		}
	}
	return tw.Close()
}

// joinEntry puts prefix in front of an archive entry name, refusing a name that would
// leave the directory (absolute, or with a ".." element).
func joinEntry(prefix, name string) (string, error) {
	if strings.HasPrefix(name, "/") || slices.Contains(strings.Split(name, "/"), "..") {
		return "", fmt.Errorf("vercel: upload: archive entry %q would land outside the target directory", name)
	}
	joined := path.Join(prefix, name)
	if strings.HasSuffix(name, "/") {
		joined += "/"
	}
	return joined, nil
}

func (d *driver) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := d.p.api.Do(ctx, httpapi.Request{Method: http.MethodPost, Path: d.session + "/fs/read", Query: d.p.team(),
		JSON: map[string]string{"path": path}, Retry: httpapi.RetryIdempotent, Accept: []int{http.StatusNotFound},
		Header: http.Header{"Accept": {"application/octet-stream"}}})
	if err != nil {
		return nil, d.explain(err)
	}
	if resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		return nil, fmt.Errorf("vercel: %s: %w", path, fs.ErrNotExist)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "application/octet-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("vercel: read file %s: unexpected content type %q: %s", path, ct, b)
	}
	return resp.Body, nil
}

func (d *driver) Delete(ctx context.Context) error { return d.p.Delete(ctx, d.name) }

// explain adds what a 410 sandbox_stopped means for a talkops run.
func (d *driver) explain(err error) error {
	if err != nil && httpapi.ErrorCode(err) == "sandbox_stopped" {
		return fmt.Errorf("%w (the session of sandbox %s has stopped, usually because its timeout passed: raise the run's TTL)", err, d.name)
	}
	return err
}

// decodeError reads {"error":{"code","message"}}.
func decodeError(_ int, body []byte) (code, message string) {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	return e.Error.Code, e.Error.Message
}

// Capabilities says what the vercel provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true}
}
