// Package modal is the Modal sandbox provider: a gRPC client of its own for Modal's
// control plane (service modal.client.ModalClient) and for the per-task command router
// (modal.task_command_router.TaskCommandRouter), since Modal has no REST API and no Go
// SDK can be downloaded. The stubs come from a minimal schema in internal/modalpb.
//
// Calls it makes:
//
//	AuthTokenGet                          the auth token, refreshed 5 min before it expires
//	AppGetOrCreate                        the app sandboxes belong to ("talkops")
//	ImageGetOrCreate, ImageJoinStreaming  a registry image (FROM <image>); an im-… id is used as is
//	SecretGetOrCreate (EPHEMERAL)         Spec.Env, so it never travels as command text
//	SandboxCreate                         timeout_secs (the TTL backstop), workdir, a name unique
//	                                      to the create, and the tags talkops.run-id,
//	                                      talkops.expires-at, talkops.created-by
//	SandboxGetFromName                    the sandbox a failed or cut-short create made after all
//	SandboxGetTaskId                      readiness poll, Attach
//	TaskGetCommandRouterAccess            the router URL and its JWT (refreshed before expiry)
//	TaskExecStart, TaskExecStdioRead,     Exec through the router: start, stdout and stderr
//	TaskExecWait, TaskExecPoll            streamed with offsets, exit status
//	ContainerFilesystemExec(+GetOutput)   Upload (the workspace tar, one file) and Download
//	SandboxTerminate                      Close, Lister.Delete
//	SandboxList                           Lister.List, filtered by tag server-side
//
// Every control-plane call carries the token id and secret, the auth token, the client
// type and version, an idempotency key and the retry attempt; calls that fail with
// DEADLINE_EXCEEDED, UNAVAILABLE, CANCELED, INTERNAL or UNKNOWN are retried with
// backoff. TaskExecStart is never re-sent blindly: after a failure the client asks
// TaskExecPoll whether the exec exists, and sends it again only when it does not.
package modal

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/talkops/talkops/internal/backoff"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
	pb "github.com/talkops/talkops/providers/modal/internal/modalpb"
)

// Name is the provider's id.
const Name = "modal"

// Defaults.
const (
	DefaultServerURL    = "https://api.modal.com:443"
	DefaultAppName      = "talkops"
	DefaultWorkingDir   = "/workspace"
	DefaultImage        = "python:3.13-slim"
	DefaultReadyTimeout = 5 * time.Minute
	// DefaultTTL is the sandbox lifetime when Spec.TTL is 0; MaxTTL is Modal's limit.
	DefaultTTL = time.Hour
	MaxTTL     = 24 * time.Hour
	// builderVersion is the image builder the registry images are built with.
	builderVersion = "2025.06"
)

// Options configures the provider. Zero values take the defaults above or the
// documented environment variables.
type Options struct {
	// ServerURL is the control plane; default MODAL_SERVER_URL, the profile's
	// server_url, else DefaultServerURL.
	ServerURL string `toml:"server_url"`
	// Environment is the Modal environment; default MODAL_ENVIRONMENT, the profile's
	// environment, else the workspace default.
	Environment string `toml:"environment"`
	// AppName is the app the sandboxes are created in; default DefaultAppName.
	AppName string `toml:"app_name"`
	// Image is the registry image a sandbox runs when Spec.Snapshot is empty; an image
	// id (im-…) is used as is. Default DefaultImage.
	Image string `toml:"image"`
	// WorkingDir is the sandbox working directory; Spec.WorkDir overrides it.
	WorkingDir string `toml:"-"`
	// ReadyTimeout bounds the wait for the image build and the sandbox's task.
	ReadyTimeout time.Duration `toml:"ready_timeout"`
	// PollInterval is the pause of the readiness poll (default 500 ms).
	PollInterval time.Duration `toml:"-"`
	// TempDir is where command scripts stage files inside the sandbox; default /tmp.
	TempDir string `toml:"-"`
	// StreamGrace is how long the output streams may lag behind a command's exit before
	// they are reopened at their offsets; default 2 s.
	StreamGrace time.Duration `toml:"-"`
	// TLSConfig, Retry and Stats are transport knobs: TLSConfig replaces the system
	// roots (tests), Retry the backoff, Stats counts the RPCs.
	TLSConfig *tls.Config `toml:"-"`
	Retry     Retry       `toml:"-"`
	Stats     *Stats      `toml:"-"`
}

// Provider creates and attaches Modal sandboxes. It implements providers.Provider and
// providers.Lister.
type Provider struct {
	opts  Options
	creds account

	conn   *grpc.ClientConn
	api    pb.ModalClientClient
	auth   *tokenCache
	policy *callPolicy
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New checks the credentials and settings and returns a provider; nothing is contacted
// or created. Missing credentials are a *httpapi.ConfigError wrapping
// providers.ErrConfig that names MODAL_TOKEN_ID, MODAL_TOKEN_SECRET and the config file.
func New(opts Options, getenv func(string) string) (*Provider, error) {
	getenv = httpapi.Env(getenv)
	creds, err := loadCredentials(getenv)
	if err != nil {
		return nil, err
	}
	opts.ServerURL = cmp.Or(opts.ServerURL, creds.serverURL, DefaultServerURL)
	opts.Environment = cmp.Or(opts.Environment, creds.environment)
	opts.AppName = cmp.Or(opts.AppName, DefaultAppName)
	opts.Image = cmp.Or(opts.Image, DefaultImage)
	opts.WorkingDir = cmp.Or(opts.WorkingDir, DefaultWorkingDir)
	if err := httpapi.CheckSandboxDirs(Name, opts.WorkingDir, opts.TempDir); err != nil {
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
	if opts.StreamGrace <= 0 {
		opts.StreamGrace = 2 * time.Second
	}
	opts.Retry = opts.Retry.withDefaults()
	if opts.TLSConfig == nil {
		if opts.TLSConfig, err = extraRoots(getenv("SSL_CERT_FILE")); err != nil {
			return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"SSL_CERT_FILE"}, Problem: err.Error()}
		}
	}
	addr, tc, err := target(opts.ServerURL, opts.TLSConfig)
	if err != nil {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"server_url / MODAL_SERVER_URL"}, Problem: err.Error(), Hint: "for example " + DefaultServerURL}
	}
	p := &Provider{opts: opts, creds: creds}
	p.auth = &tokenCache{now: time.Now, fetch: p.fetchAuthToken}
	p.policy = &callPolicy{retry: opts.Retry, stats: opts.Stats, header: p.header,
		noRetry: map[string]bool{}, onUnauthenticated: p.auth.invalidate}
	// grpc.NewClient does not connect; the first call does.
	conn, err := dial(addr, tc, p.policy.unary, p.policy.stream)
	if err != nil {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"server_url / MODAL_SERVER_URL"}, Problem: err.Error()}
	}
	p.conn, p.api = conn, pb.NewModalClientClient(conn)
	return p, nil
}

// Name returns "modal".
func (p *Provider) Name() string { return Name }

const authTokenGetMethod = "/modal.client.ModalClient/AuthTokenGet"

// header is the metadata of a control-plane call.
func (p *Provider) header(ctx context.Context, method string) (metadata.MD, error) {
	md := metadata.Pairs(
		"x-modal-client-type", clientType,
		"x-modal-client-version", clientVersion,
		"x-modal-token-id", p.creds.tokenID,
		"x-modal-token-secret", p.creds.tokenSecret,
	)
	if method != authTokenGetMethod {
		tok, err := p.auth.get(ctx, authRefreshMargin)
		if err != nil {
			return nil, fmt.Errorf("modal: get an auth token: %w", err)
		}
		md.Set("x-modal-auth-token", tok)
	}
	return md, nil
}

func (p *Provider) fetchAuthToken(ctx context.Context) (string, error) {
	resp, err := p.api.AuthTokenGet(ctx, &pb.AuthTokenGetRequest{})
	if err != nil {
		return "", describe(err)
	}
	if resp.GetToken() == "" {
		return "", errors.New("AuthTokenGet returned no token")
	}
	return resp.GetToken(), nil
}

// Create provisions a sandbox: the app, the image, a secret for Spec.Env, the sandbox
// with its lifetime, working directory and tags; then it waits for the sandbox's task
// and creates the working directory. Spec.Snapshot is an image id (im-…) or a registry
// image; empty uses Options.Image. A sandbox that fails to start is terminated, and so
// is one a failed or cancelled SandboxCreate made after all (see terminateLate).
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("modal: create: %w", err)
	}
	workDir := cmp.Or(spec.WorkDir, p.opts.WorkingDir)
	app, err := p.api.AppGetOrCreate(ctx, &pb.AppGetOrCreateRequest{AppName: p.opts.AppName, EnvironmentName: p.opts.Environment,
		ObjectCreationType: pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING})
	if err != nil {
		return nil, fmt.Errorf("modal: create: app %q: %w", p.opts.AppName, describe(err))
	}
	imageID, err := p.image(ctx, app.GetAppId(), cmp.Or(spec.Snapshot, p.opts.Image))
	if err != nil {
		return nil, fmt.Errorf("modal: create: %w", err)
	}
	def := &pb.Sandbox{
		EntrypointArgs: []string{"sleep", "infinity"},
		ImageId:        imageID,
		TimeoutSecs:    ttlSeconds(spec.TTL),
		Workdir:        proto.String(workDir),
		Name:           proto.String(remote.Name(spec.RunID, 63)),
	}
	if len(spec.Env) > 0 {
		sec, err := p.api.SecretGetOrCreate(ctx, &pb.SecretGetOrCreateRequest{EnvironmentName: p.opts.Environment,
			ObjectCreationType: pb.ObjectCreationType_OBJECT_CREATION_TYPE_EPHEMERAL, EnvDict: spec.Env})
		if err != nil {
			return nil, fmt.Errorf("modal: create: secret for the sandbox environment: %w", describe(err))
		}
		def.SecretIds = []string{sec.GetSecretId()}
	}
	// The tags travel with the create, so a sandbox is never untagged: one the server
	// makes after talkops gave up on the call is still found by gc.
	var tags []*pb.SandboxTag
	for _, k := range slices.Sorted(maps.Keys(spec.Labels)) {
		tags = append(tags, &pb.SandboxTag{TagName: k, TagValue: spec.Labels[k]})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("modal: create: %w", err)
	}
	created, err := p.api.SandboxCreate(ctx, &pb.SandboxCreateRequest{AppId: app.GetAppId(), Definition: def, Tags: tags})
	if err != nil {
		err = fmt.Errorf("modal: create sandbox %s: %w", def.GetName(), describe(err))
		if ctx.Err() != nil || retryable(err) {
			// The outcome is unknown: the server may have made the sandbox anyway.
			err = errors.Join(err, p.terminateLate(ctx, def.GetName()))
		}
		return nil, err
	}
	id := created.GetSandboxId()
	if id == "" {
		return nil, errors.New("modal: create: SandboxCreate returned no sandbox id")
	}
	undo := func(cause error) error {
		return remote.Undo(ctx, cause, func(c context.Context) error { return p.Delete(c, id) })
	}
	taskID, err := p.waitTask(ctx, id)
	if err != nil {
		return nil, undo(err)
	}
	s := p.handle(id, taskID, workDir, true)
	res, err := s.Driver().Run(ctx, remote.Run{Script: "mkdir -p -- " + remote.Quote(workDir) + "\n", Timeout: time.Minute})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if err != nil {
		return nil, undo(fmt.Errorf("modal: sandbox %s: create working directory %s: %w", id, workDir, err))
	}
	return s, nil
}

// Bounds of the search for a sandbox a failed create made after all.
const (
	// lateCreateWindow bounds the whole search. It runs after ctx may have ended, so it
	// is short: gc finds what it misses, by the tags sent with the create.
	lateCreateWindow = 3 * time.Second
	// lateCreatePoll is the pause between lookups; lateLookupTimeout bounds one.
	lateCreatePoll    = 200 * time.Millisecond
	lateLookupTimeout = time.Second
)

// terminateLate terminates the sandbox called name when a SandboxCreate that failed or
// was cut short (a cancelled run, a deadline, a broken connection) made it after all.
// The server goes on with a create whose client gave up, so the sandbox can appear a
// moment later: its name, unique to this create, is looked up until lateCreateWindow
// passes. Not finding it is the common case and not an error.
func (p *Provider) terminateLate(ctx context.Context, name string) error {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateCreateWindow)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(lctx, lateLookupTimeout)
		resp, err := p.api.SandboxGetFromName(actx, &pb.SandboxGetFromNameRequest{SandboxName: name,
			AppName: p.opts.AppName, EnvironmentName: p.opts.Environment})
		acancel()
		switch {
		case err == nil && resp.GetSandboxId() != "":
			id := resp.GetSandboxId()
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), remote.CleanupTimeout)
			err := p.Delete(dctx, id)
			dcancel()
			if err != nil {
				return fmt.Errorf("modal: sandbox %s (%s) was made by the failed create, and terminating it failed (talkops sandbox gc finds it by its tags): %w", id, name, err)
			}
			return nil
		case lctx.Err() != nil:
			return nil
		case err != nil && status.Code(err) != codes.NotFound && status.Code(err) != codes.DeadlineExceeded:
			return fmt.Errorf("modal: look for sandbox %s after the failed create (talkops sandbox gc finds it by its tags): %w", name, describe(err))
		}
		if backoff.Sleep(lctx, lateCreatePoll) != nil {
			return nil
		}
	}
}

// image returns the id of ref: an image id as is, else the image built FROM ref,
// waiting for the build when it is not done.
func (p *Provider) image(ctx context.Context, appID, ref string) (string, error) {
	if strings.HasPrefix(ref, "im-") {
		return ref, nil
	}
	resp, err := p.api.ImageGetOrCreate(ctx, &pb.ImageGetOrCreateRequest{AppId: appID, BuilderVersion: builderVersion,
		Image: &pb.Image{DockerfileCommands: []string{"FROM " + ref}}})
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, describe(err))
	}
	result := resp.GetResult()
	if result == nil {
		if result, err = p.joinImage(ctx, resp.GetImageId()); err != nil {
			return "", fmt.Errorf("image %s (%s): %w", ref, resp.GetImageId(), err)
		}
	}
	if result.GetStatus() != pb.GenericResult_GENERIC_STATUS_SUCCESS {
		return "", fmt.Errorf("image %s (%s) did not build: %s", ref, resp.GetImageId(), describeResult(result))
	}
	return resp.GetImageId(), nil
}

// joinImage follows the build of imageID until it has a result, resuming after the
// last entry when the stream breaks, within ReadyTimeout.
func (p *Provider) joinImage(ctx context.Context, imageID string) (*pb.GenericResult, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReadyTimeout)
	defer cancel()
	lastEntry := ""
	for attempt := 0; ; {
		stream, err := p.api.ImageJoinStreaming(ctx, &pb.ImageJoinStreamingRequest{ImageId: imageID, Timeout: 55, LastEntryId: lastEntry})
		for err == nil {
			var msg *pb.ImageJoinStreamingResponse
			if msg, err = stream.Recv(); err != nil {
				break
			}
			if msg.GetEntryId() != "" {
				lastEntry = msg.GetEntryId()
			}
			if msg.GetResult() != nil && msg.GetResult().GetStatus() != pb.GenericResult_GENERIC_STATUS_UNSPECIFIED {
				return msg.GetResult(), nil
			}
			if msg.GetEof() {
				err = io.EOF
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("build not finished within %s: %w", p.opts.ReadyTimeout, ctx.Err())
		case errors.Is(err, io.EOF):
			// The server ends a stream after its timeout; ask again.
		case retryable(err) && attempt+1 < p.opts.Retry.Attempts:
			attempt++
		default:
			return nil, describe(err)
		}
		if err := backoff.Sleep(ctx, p.opts.Retry.delay(attempt)); err != nil {
			return nil, fmt.Errorf("build not finished within %s: %w", p.opts.ReadyTimeout, err)
		}
	}
}

// waitTask polls SandboxGetTaskId until the sandbox has a task (ready for exec and
// files), has finished, or ReadyTimeout passes.
func (p *Provider) waitTask(ctx context.Context, id string) (string, error) {
	var taskID string
	err := httpapi.Poll(ctx, p.opts.ReadyTimeout, p.opts.PollInterval, p.opts.PollInterval, func(ctx context.Context) (bool, error) {
		resp, err := p.api.SandboxGetTaskId(ctx, &pb.SandboxGetTaskIdRequest{SandboxId: id, Timeout: proto.Float32(10)})
		if status.Code(err) == codes.NotFound {
			return false, fmt.Errorf("modal: sandbox %s: %w: %w", id, providers.ErrNotFound, describe(err))
		}
		if err != nil {
			return false, fmt.Errorf("modal: sandbox %s: %w", id, describe(err))
		}
		if r := resp.GetTaskResult(); r != nil && r.GetStatus() != pb.GenericResult_GENERIC_STATUS_UNSPECIFIED {
			return false, fmt.Errorf("modal: sandbox %s has already finished: %s", id, describeResult(r))
		}
		taskID = resp.GetTaskId()
		return taskID != "", nil
	})
	if errors.Is(err, httpapi.ErrWaitTimeout) {
		return "", fmt.Errorf("modal: sandbox %s has no task within %s: %w", id, p.opts.ReadyTimeout, err)
	}
	return taskID, err
}

// Attach connects to a running sandbox by id (sb-…). Close on the handle never
// terminates it.
func (p *Provider) Attach(ctx context.Context, id string, opts providers.AttachOptions) (providers.Sandbox, error) {
	if id == "" {
		return nil, fmt.Errorf("modal: attach: empty sandbox id: %w", providers.ErrNotFound)
	}
	taskID, err := p.waitTask(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("modal: attach: %w", err)
	}
	return p.handle(id, taskID, cmp.Or(opts.WorkDir, p.opts.WorkingDir), false), nil
}

// List returns the running sandboxes tagged talkops.created-by=talkops in the
// environment (filtered by Modal), newest first, page by page.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	var out []providers.Info
	before := 0.0
	for page := 0; page < 1000; page++ {
		resp, err := p.api.SandboxList(ctx, &pb.SandboxListRequest{EnvironmentName: p.opts.Environment, BeforeTimestamp: before,
			Tags: []*pb.SandboxTag{{TagName: providers.LabelCreatedBy, TagValue: "talkops"}}})
		if err != nil {
			return out, fmt.Errorf("modal: list sandboxes: %w", describe(err))
		}
		sbs := resp.GetSandboxes()
		if len(sbs) == 0 {
			return out, nil
		}
		for _, sb := range sbs {
			labels := map[string]string{}
			for _, t := range sb.GetTags() {
				labels[t.GetTagName()] = t.GetTagValue()
			}
			state := "running"
			if sb.GetTaskInfo() == nil || sb.GetTaskInfo().GetId() == "" {
				state = "pending"
			}
			out = append(out, remote.InfoFromLabels(Name, sb.GetId(), state, unixTime(sb.GetCreatedAt()), labels))
		}
		before = sbs[len(sbs)-1].GetCreatedAt()
	}
	return out, errors.New("modal: list sandboxes: more than 1000 pages")
}

// Delete terminates a sandbox by id; one that is already gone is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	_, err := p.api.SandboxTerminate(ctx, &pb.SandboxTerminateRequest{SandboxId: id})
	if err != nil && status.Code(err) != codes.NotFound {
		return describe(err)
	}
	return nil
}

// Close releases the control-plane connection.
func (p *Provider) Close() error { return p.conn.Close() }

func (p *Provider) handle(id, taskID, workDir string, owned bool) *remote.Sandbox {
	d := &driver{p: p, sandboxID: id, taskID: taskID}
	return remote.New(remote.Config{
		Provider: Name,
		ID:       id,
		WorkDir:  workDir,
		Owned:    owned,
		// TaskExecStart arguments are limited to 64 KiB in all; longer scripts are
		// written to a file first.
		MaxScript: 60 << 10,
		TempDir:   p.opts.TempDir,
	}, d)
}

// extraRoots trusts the certificates of file (SSL_CERT_FILE, as OpenSSL and Go read
// it) besides the system roots; "" is the system roots alone.
func extraRoots(file string) (*tls.Config, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ttlSeconds is the sandbox's timeout_secs: Spec.TTL rounded up, within Modal's limit.
func ttlSeconds(ttl time.Duration) uint32 {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	ttl = min(ttl, MaxTTL)
	return uint32((ttl + time.Second - 1) / time.Second)
}

func unixTime(secs float64) time.Time {
	if secs <= 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(secs*1e9)).UTC()
}

// describe returns err with the gRPC code spelled out, so messages read
// "UNAVAILABLE: the text" rather than "rpc error: code = Unavailable desc = the text";
// status.Code still works on the result.
func describe(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	return &rpcError{st: st, wrapped: err}
}

type rpcError struct {
	st      *status.Status
	wrapped error
}

func (e *rpcError) Error() string {
	name := strings.ToUpper(codeName(e.st.Code()))
	msg := e.st.Message()
	if msg == "" {
		return name
	}
	return name + ": " + msg
}

func (e *rpcError) Unwrap() error { return e.wrapped }

// GRPCStatus lets status.Code and status.FromError see through the wrapper.
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

func codeName(c codes.Code) string {
	s := c.String()
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func describeResult(r *pb.GenericResult) string {
	s := strings.TrimPrefix(r.GetStatus().String(), "GENERIC_STATUS_")
	if r.GetException() != "" {
		s += ": " + r.GetException()
	}
	return s
}

// Capabilities says what the modal provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, Snapshot: true, OwnFilesystem: true, List: true, TTL: true}
}
