// Package agentcore is the AWS Bedrock AgentCore Code Interpreter provider, built on the
// official Go SDK (github.com/aws/aws-sdk-go-v2/service/bedrockagentcore) and the AWS
// default credential chain.
//
// A sandbox is one code interpreter session. Calls it makes:
//
//	StartCodeInterpreterSession   Create (name carries the run id and expiry; sessionTimeoutSeconds = Spec.TTL)
//	GetCodeInterpreterSession     Create (bounded wait for READY), Attach, Delete of an ended session
//	InvokeCodeInterpreter         executeCommand: Exec, the working-directory probe, tar extraction
//	                              writeFiles:     Upload (the workspace archive as base64 blobs), large stdin/scripts
//	                              readFiles:      Download, and exact output of commands that printed non-UTF-8
//	StopCodeInterpreterSession    Close, Lister.Delete
//	ListCodeInterpreterSessions   Lister.List (the session name is filtered client-side)
//
// AgentCore has no labels: the session name is "talkops-<expiry unix>-<random>-<run id>",
// and List keeps the READY sessions whose name parses. The backstop is
// sessionTimeoutSeconds, a hard lifetime (60 s to 8 h): a session ends then whatever
// happens to talkops. There is no snapshot or image choice, so Spec.Snapshot is refused
// with providers.ErrNotSupported.
//
// The service puts no time limit on a command: Cmd.Timeout is enforced inside the session
// with `timeout` and again on the client, which also bounds every call with its context.
// The file tools resolve paths against the session's own working directory (not /tmp, and
// not the root): the provider learns it with `pwd` when it creates or attaches a session,
// keeps its scratch files there, and moves files between it and any other path with
// executeCommand. Every command carries a run-once guard, so a request the SDK retries
// after the service already ran it cannot run the command a second time.
//
// Retries are the SDK's: the standard (or adaptive) retryer with Options.MaxAttempts,
// which honours throttling and retries 5xx answers. Errors name the operation, the HTTP
// status, the service's error code and message, the request id and the attempts made.
package agentcore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
)

// Name is the provider's id.
const Name = "agentcore"

// Defaults and limits.
const (
	// DefaultCodeInterpreter is the AWS-managed code interpreter.
	DefaultCodeInterpreter = "aws.codeinterpreter.v1"
	// DefaultWorkingDir is where commands run (the upstream integrations use /tmp).
	DefaultWorkingDir = "/tmp"
	// DefaultSessionTimeout is the session lifetime when Spec.TTL is 0.
	DefaultSessionTimeout = time.Hour
	// MinSessionTimeout and MaxSessionTimeout bound sessionTimeoutSeconds.
	MinSessionTimeout = time.Minute
	MaxSessionTimeout = 8 * time.Hour
	// DefaultReadyTimeout bounds the wait for a new session to be READY.
	DefaultReadyTimeout = 2 * time.Minute
	// DefaultMaxAttempts is the SDK retryer's attempts per call, the first included.
	DefaultMaxAttempts = 5
	// DefaultCredentialTimeout bounds loading the AWS configuration and credentials in New.
	DefaultCredentialTimeout = 20 * time.Second
	// DefaultUploadChunk is the most archive bytes sent in one writeFiles request.
	DefaultUploadChunk = 16 << 20
	// MaxUploadChunk keeps a writeFiles request (base64, 4/3 of the bytes) under the
	// documented 100 MB inline limit.
	MaxUploadChunk = 72 << 20

	namePrefix = "talkops-"
	maxNameLen = 100 // StartCodeInterpreterSession name: 1-100 characters
)

// Options configures the provider. The toml names are the keys of the
// [providers.agentcore] config table.
type Options struct {
	// Region is the AWS region; default AWS_REGION, AWS_DEFAULT_REGION, then the profile's.
	Region string `toml:"region"`
	// Profile is the shared-config profile; default AWS_PROFILE.
	Profile string `toml:"profile"`
	// CodeInterpreter is the interpreter identifier; default DefaultCodeInterpreter. A
	// custom one (made with the control plane's CreateCodeInterpreter) sets network mode
	// and execution role.
	CodeInterpreter string `toml:"code_interpreter"`
	// WorkingDir is where commands run; default DefaultWorkingDir. Spec.WorkDir overrides it.
	WorkingDir string `toml:"working_dir"`
	// SessionTimeout is the session lifetime when Spec.TTL is 0; default
	// DefaultSessionTimeout. Either is clamped to 60 s..8 h.
	SessionTimeout time.Duration `toml:"session_timeout"`
	// ReadyTimeout bounds the wait for READY after the start; default DefaultReadyTimeout.
	ReadyTimeout time.Duration `toml:"ready_timeout"`
	// Endpoint overrides the regional endpoint (a VPC endpoint, a test server).
	Endpoint string `toml:"endpoint"`
	// MaxAttempts is the SDK retryer's attempts per call; default DefaultMaxAttempts.
	MaxAttempts int `toml:"max_attempts"`
	// RetryMode is "standard" (default) or "adaptive" (client-side rate limiting on
	// throttling, for accounts that share a low TPS quota).
	RetryMode string `toml:"retry_mode"`
	// MaxBackoff caps the pause between attempts; default the SDK's 20 s.
	MaxBackoff time.Duration `toml:"max_backoff"`
	// UploadChunk is the most bytes sent in one writeFiles request; default
	// DefaultUploadChunk, at most MaxUploadChunk.
	UploadChunk int `toml:"upload_chunk"`
	// CredentialTimeout bounds loading the configuration and credentials in New; default
	// DefaultCredentialTimeout.
	CredentialTimeout time.Duration `toml:"credential_timeout"`

	// Credentials replaces the default credential chain (tests, embedding).
	Credentials aws.CredentialsProvider `toml:"-"`
	// HTTPClient replaces the SDK's HTTP client.
	HTTPClient *http.Client `toml:"-"`
	// PollInterval is the first pause of the READY wait (default 250 ms, growing to 2 s).
	PollInterval time.Duration `toml:"-"`
}

// Provider creates and attaches AgentCore Code Interpreter sessions. It implements
// providers.Provider and providers.Lister.
type Provider struct {
	opts   Options
	client *bedrockagentcore.Client
	region string
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Lister   = (*Provider)(nil)
)

// New checks the settings, loads the AWS configuration and resolves credentials (with
// Options.CredentialTimeout), and returns a provider; nothing is created. A missing
// region or credentials, or an invalid setting, is a *httpapi.ConfigError wrapping
// providers.ErrConfig.
//
// getenv supplies AWS_REGION, AWS_DEFAULT_REGION, AWS_PROFILE and static keys
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); the rest of the default
// chain (shared files, SSO, web identity, container and instance credentials) reads the
// process environment, as the SDK always does.
func New(opts Options, getenv func(string) string) (*Provider, error) {
	getenv = httpapi.Env(getenv)
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	region := cmp.Or(opts.Region, getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"))
	profile := cmp.Or(opts.Profile, getenv("AWS_PROFILE"))
	var load []func(*config.LoadOptions) error
	if region != "" {
		load = append(load, config.WithRegion(region))
	}
	if profile != "" {
		load = append(load, config.WithSharedConfigProfile(profile))
	}
	switch key, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"); {
	case opts.Credentials != nil:
		load = append(load, config.WithCredentialsProvider(opts.Credentials))
	case key != "" && secret != "":
		load = append(load, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(key, secret, getenv("AWS_SESSION_TOKEN"))))
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.CredentialTimeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"AWS_PROFILE", "AWS_CONFIG_FILE"},
			Problem: "could not be loaded: " + err.Error(), Hint: "check the profile name and the shared config files"}
	}
	if cfg.Region == "" {
		return nil, &httpapi.ConfigError{Provider: Name, Vars: []string{"AWS_REGION", "region"}, Problem: "is not set",
			Hint: "the region of the AgentCore endpoint, for example us-west-2: set AWS_REGION, a region in the AWS profile, or region in [providers.agentcore]"}
	}
	if cfg.Credentials == nil {
		return nil, credentialsError(errors.New("no credential provider is configured"))
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, credentialsError(err)
	}
	client := bedrockagentcore.NewFromConfig(cfg, func(o *bedrockagentcore.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.Retryer = opts.retryer()
		if opts.HTTPClient != nil {
			// Set here, not in the shared config: a custom CA bundle (AWS_CA_BUNDLE) can
			// only be applied to the SDK's own client.
			o.HTTPClient = opts.HTTPClient
		}
		o.HTTPClient = bodyGuard{o.HTTPClient}
	})
	return &Provider{opts: opts, client: client, region: cfg.Region}, nil
}

func credentialsError(err error) error {
	return &httpapi.ConfigError{Provider: Name, Vars: []string{"AWS credentials"}, Problem: "could not be resolved: " + err.Error(),
		Hint: "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (run `aws sso login` first for an SSO profile); in GitHub Actions use aws-actions/configure-aws-credentials with OIDC"}
}

// normalize fills in defaults and checks every setting.
func (o *Options) normalize() error {
	bad := func(key, problem, hint string) error {
		return &httpapi.ConfigError{Provider: Name, Vars: []string{key}, Problem: problem, Hint: hint}
	}
	o.CodeInterpreter = cmp.Or(o.CodeInterpreter, DefaultCodeInterpreter)
	if strings.ContainsAny(o.CodeInterpreter, "/?# ") {
		return bad("code_interpreter", fmt.Sprintf("is %q, not an identifier", o.CodeInterpreter), "for example "+DefaultCodeInterpreter+" or the id of a custom code interpreter")
	}
	o.WorkingDir = cmp.Or(o.WorkingDir, DefaultWorkingDir)
	if !path.IsAbs(o.WorkingDir) {
		return bad("working_dir", fmt.Sprintf("is %q, not an absolute path", o.WorkingDir), "for example "+DefaultWorkingDir)
	}
	o.WorkingDir = path.Clean(o.WorkingDir)
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.SessionTimeout < MinSessionTimeout || o.SessionTimeout > MaxSessionTimeout {
		return bad("session_timeout", fmt.Sprintf("is %s", o.SessionTimeout), "between 1m and 8h (AgentCore's sessionTimeoutSeconds range)")
	}
	if o.ReadyTimeout < 0 {
		return bad("ready_timeout", fmt.Sprintf("is %s", o.ReadyTimeout), "a positive duration")
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Endpoint != "" {
		if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("endpoint", fmt.Sprintf("is %q, not an http(s) URL", o.Endpoint), "for example https://bedrock-agentcore.us-west-2.amazonaws.com")
		}
	}
	if o.MaxAttempts < 0 || o.MaxAttempts > 20 {
		return bad("max_attempts", fmt.Sprintf("is %d", o.MaxAttempts), "between 1 and 20")
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	switch o.RetryMode {
	case "":
		o.RetryMode = "standard"
	case "standard", "adaptive":
	default:
		return bad("retry_mode", fmt.Sprintf("is %q", o.RetryMode), "standard or adaptive")
	}
	if o.MaxBackoff < 0 {
		return bad("max_backoff", fmt.Sprintf("is %s", o.MaxBackoff), "a positive duration")
	}
	if o.UploadChunk < 0 || o.UploadChunk > MaxUploadChunk || (o.UploadChunk > 0 && o.UploadChunk < 1024) {
		return bad("upload_chunk", fmt.Sprintf("is %d", o.UploadChunk), fmt.Sprintf("between 1024 and %d bytes", MaxUploadChunk))
	}
	if o.UploadChunk == 0 {
		o.UploadChunk = DefaultUploadChunk
	}
	if o.CredentialTimeout < 0 {
		return bad("credential_timeout", fmt.Sprintf("is %s", o.CredentialTimeout), "a positive duration")
	}
	if o.CredentialTimeout == 0 {
		o.CredentialTimeout = DefaultCredentialTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	return nil
}

// retryer builds the SDK retryer: throttling and 5xx answers are retried with jittered
// exponential backoff, MaxAttempts attempts in all.
func (o Options) retryer() aws.Retryer {
	std := func(so *retry.StandardOptions) {
		so.MaxAttempts = o.MaxAttempts
		if o.MaxBackoff > 0 {
			so.MaxBackoff = o.MaxBackoff
		}
	}
	if o.RetryMode == "adaptive" {
		return retry.NewAdaptiveMode(func(ao *retry.AdaptiveModeOptions) {
			ao.StandardOptions = append(ao.StandardOptions, std)
		})
	}
	return retry.NewStandard(std)
}

// Name returns "agentcore".
func (p *Provider) Name() string { return Name }

// Region returns the AWS region the provider talks to.
func (p *Provider) Region() string { return p.region }

// Create starts a session and waits until it is READY and its working directory exists. A
// session that does not get there is stopped. Spec.Snapshot is not supported.
func (p *Provider) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("agentcore: create: %w", err)
	}
	if spec.Snapshot != "" {
		return nil, fmt.Errorf("agentcore: create from snapshot %q: AgentCore code interpreter sessions have no snapshots or images (a custom code interpreter is chosen with code_interpreter): %w", spec.Snapshot, providers.ErrNotSupported)
	}
	timeout := p.opts.SessionTimeout
	if spec.TTL > 0 {
		timeout = min(max(spec.TTL, MinSessionTimeout), MaxSessionTimeout)
	}
	expires := time.Now().Add(timeout).UTC()
	if t, err := time.Parse(time.RFC3339, spec.Labels[providers.LabelExpiresAt]); err == nil {
		expires = t
	}
	name := SessionName(spec.RunID, expires)
	out, err := p.client.StartCodeInterpreterSession(ctx, &bedrockagentcore.StartCodeInterpreterSessionInput{
		CodeInterpreterIdentifier: aws.String(p.opts.CodeInterpreter),
		Name:                      aws.String(name),
		SessionTimeoutSeconds:     aws.Int32(int32(timeout / time.Second)),
		// The SDK fills in a clientToken once, so its retries start one session.
	})
	if err != nil {
		if ctx.Err() != nil {
			// The start may have reached AgentCore; find the session by its unique name.
			return nil, remote.Undo(ctx, fmt.Errorf("agentcore: create: %w", ctx.Err()), func(c context.Context) error { return p.stopByName(c, name) })
		}
		return nil, fmt.Errorf("agentcore: create: %w", apiError("StartCodeInterpreterSession", err))
	}
	id := aws.ToString(out.SessionId)
	if id == "" {
		return nil, errors.New("agentcore: create: StartCodeInterpreterSession answered without a sessionId")
	}
	undo := func(cause error) error {
		return remote.Undo(ctx, cause, func(c context.Context) error { return p.Delete(c, id) })
	}
	if err := p.waitReady(ctx, id); err != nil {
		return nil, undo(err)
	}
	workDir := cmp.Or(spec.WorkDir, p.opts.WorkingDir)
	sb, err := p.handle(ctx, id, workDir, spec.Env, true)
	if err != nil {
		return nil, undo(err)
	}
	return sb, nil
}

// waitReady polls GetCodeInterpreterSession until the session is READY.
func (p *Provider) waitReady(ctx context.Context, id string) error {
	last := "no status"
	err := httpapi.Poll(ctx, p.opts.ReadyTimeout, p.opts.PollInterval, 2*time.Second, func(ctx context.Context) (bool, error) {
		out, err := p.client.GetCodeInterpreterSession(ctx, &bedrockagentcore.GetCodeInterpreterSessionInput{
			CodeInterpreterIdentifier: aws.String(p.opts.CodeInterpreter), SessionId: aws.String(id)})
		if err != nil {
			return false, apiError("GetCodeInterpreterSession", err)
		}
		switch out.Status {
		case types.CodeInterpreterSessionStatusReady:
			return true, nil
		case types.CodeInterpreterSessionStatusTerminated:
			return false, fmt.Errorf("session %s terminated before it was ready", id)
		case "":
		default:
			last = string(out.Status)
		}
		return false, nil
	})
	if err != nil {
		if errors.Is(err, httpapi.ErrWaitTimeout) {
			return fmt.Errorf("agentcore: session %s not READY within %s (last status: %s): %w", id, p.opts.ReadyTimeout, last, err)
		}
		return fmt.Errorf("agentcore: wait for session %s: %w", id, err)
	}
	return nil
}

// Attach connects to a READY session of the configured code interpreter by session id.
// Close on the handle never stops it.
func (p *Provider) Attach(ctx context.Context, id string, opts providers.AttachOptions) (providers.Sandbox, error) {
	if id == "" {
		return nil, fmt.Errorf("agentcore: attach: empty session id: %w", providers.ErrNotFound)
	}
	out, err := p.client.GetCodeInterpreterSession(ctx, &bedrockagentcore.GetCodeInterpreterSessionInput{
		CodeInterpreterIdentifier: aws.String(p.opts.CodeInterpreter), SessionId: aws.String(id)})
	if err != nil {
		if notFound(err) || invalid(err) {
			return nil, fmt.Errorf("agentcore: attach %s: no such session of code interpreter %s: %w: %w", id, p.opts.CodeInterpreter, providers.ErrNotFound, apiError("GetCodeInterpreterSession", err))
		}
		return nil, fmt.Errorf("agentcore: attach %s: %w", id, apiError("GetCodeInterpreterSession", err))
	}
	if out.Status != types.CodeInterpreterSessionStatusReady {
		return nil, fmt.Errorf("agentcore: attach %s: the session is %s, not READY: %w", id, cmp.Or(string(out.Status), "starting"), providers.ErrNotFound)
	}
	sb, err := p.handle(ctx, id, cmp.Or(opts.WorkDir, p.opts.WorkingDir), nil, false)
	if err != nil {
		return nil, fmt.Errorf("agentcore: attach %s: %w", id, err)
	}
	return sb, nil
}

// handle probes the session's own working directory (where the file tools resolve paths),
// creates workDir and the scratch directory, and returns the Sandbox.
func (p *Provider) handle(ctx context.Context, id, workDir string, env map[string]string, owned bool) (*remote.Sandbox, error) {
	d := &driver{p: p, id: id}
	script := "pwd && mkdir -p -- " + scratchDir + "/once " + remote.Quote(workDir)
	res, err := d.execute(ctx, "sh -c "+remote.Quote(script))
	if err != nil {
		return nil, fmt.Errorf("agentcore: probe session %s: %w", id, err)
	}
	home := strings.TrimSpace(string(res.stdout))
	if res.exitCode != 0 || !path.IsAbs(home) || strings.Contains(home, "\n") {
		return nil, fmt.Errorf("agentcore: probe session %s: `%s` exited %d; stdout %q, stderr %q", id, script, res.exitCode, clip(res.stdout, 500), clip(res.stderr, 500))
	}
	d.home = path.Clean(home)
	return remote.New(remote.Config{
		Provider: Name, ID: id, WorkDir: workDir, Owned: owned, Env: env,
		TempDir: path.Join(d.home, scratchDir),
		// `sh -c <script>` is one argument: keep it far below Linux's 128 KiB per
		// argument even when quoting quadruples every single quote.
		MaxScript: 24 << 10,
	}, d), nil
}

// List returns the READY sessions of the configured code interpreter whose name talkops
// gave them. AgentCore cannot filter by name; this filters locally.
func (p *Provider) List(ctx context.Context) ([]providers.Info, error) {
	var out []providers.Info
	err := p.eachSession(ctx, types.CodeInterpreterSessionStatusReady, func(s types.CodeInterpreterSessionSummary) {
		runID, expires, ok := ParseSessionName(aws.ToString(s.Name))
		if !ok {
			return
		}
		info := providers.Info{Provider: Name, ID: aws.ToString(s.SessionId), RunID: runID, ExpiresAt: expires,
			State: string(s.Status), Labels: map[string]string{
				providers.LabelRunID: runID, providers.LabelExpiresAt: expires.Format(time.RFC3339), providers.LabelCreatedBy: "talkops",
			}}
		if s.CreatedAt != nil {
			info.CreatedAt = s.CreatedAt.UTC()
		}
		out = append(out, info)
	})
	if err != nil {
		return out, fmt.Errorf("agentcore: list sessions of %s: %w", p.opts.CodeInterpreter, err)
	}
	return out, nil
}

// eachSession pages through the sessions of the configured interpreter with that status
// ("" for all).
func (p *Provider) eachSession(ctx context.Context, status types.CodeInterpreterSessionStatus, fn func(types.CodeInterpreterSessionSummary)) error {
	var token *string
	for page := 0; ; page++ {
		if page == 1000 {
			return errors.New("more than 1000 pages of sessions")
		}
		out, err := p.client.ListCodeInterpreterSessions(ctx, &bedrockagentcore.ListCodeInterpreterSessionsInput{
			CodeInterpreterIdentifier: aws.String(p.opts.CodeInterpreter),
			Status:                    status,
			MaxResults:                aws.Int32(100),
			NextToken:                 token,
		})
		if err != nil {
			return apiError("ListCodeInterpreterSessions", err)
		}
		for _, s := range out.Items {
			fn(s)
		}
		if aws.ToString(out.NextToken) == "" || len(out.Items) == 0 {
			return nil
		}
		token = out.NextToken
	}
}

// Delete stops a session (AgentCore's only way to end one); one that is already
// terminated or unknown is not an error.
func (p *Provider) Delete(ctx context.Context, id string) error {
	_, err := p.client.StopCodeInterpreterSession(ctx, &bedrockagentcore.StopCodeInterpreterSessionInput{
		CodeInterpreterIdentifier: aws.String(p.opts.CodeInterpreter), SessionId: aws.String(id)})
	if err == nil || notFound(err) {
		return nil
	}
	if ctx.Err() == nil {
		// Stopping an ended session may be refused; that is success here.
		out, gerr := p.client.GetCodeInterpreterSession(ctx, &bedrockagentcore.GetCodeInterpreterSessionInput{
			CodeInterpreterIdentifier: aws.String(p.opts.CodeInterpreter), SessionId: aws.String(id)})
		if (gerr == nil && out.Status == types.CodeInterpreterSessionStatusTerminated) || notFound(gerr) {
			return nil
		}
	}
	return fmt.Errorf("agentcore: stop session %s: %w", id, apiError("StopCodeInterpreterSession", err))
}

// stopByName stops the sessions with that name that have not ended (a start whose answer
// was lost).
func (p *Provider) stopByName(ctx context.Context, name string) error {
	var ids []string
	if err := p.eachSession(ctx, "", func(s types.CodeInterpreterSessionSummary) {
		if aws.ToString(s.Name) == name && s.Status != types.CodeInterpreterSessionStatusTerminated {
			ids = append(ids, aws.ToString(s.SessionId))
		}
	}); err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, p.Delete(ctx, id))
	}
	return errors.Join(errs...)
}

// SessionName encodes a run id and an expiry into a session name:
// "talkops-<expiry unix seconds>-<8 random hex digits>-<run id>". Characters of the run id
// other than letters, digits, ".", "_" and "-" become "_", and the run id is cut to fit
// AgentCore's 100-character limit.
func SessionName(runID string, expires time.Time) string {
	var b strings.Builder
	for _, r := range runID {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := namePrefix + strconv.FormatInt(expires.Unix(), 10) + "-" + hex.EncodeToString(rnd[:]) + "-" + b.String()
	if len(name) > maxNameLen {
		name = name[:maxNameLen]
	}
	return name
}

// ParseSessionName decodes a name made by SessionName; ok is false for any other name.
func ParseSessionName(name string) (runID string, expires time.Time, ok bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return "", time.Time{}, false
	}
	exp, rest, ok1 := strings.Cut(rest, "-")
	rnd, runID, ok2 := strings.Cut(rest, "-")
	secs, err := strconv.ParseInt(exp, 10, 64)
	if !ok1 || !ok2 || err != nil || secs <= 0 || len(rnd) != 8 {
		return "", time.Time{}, false
	}
	if _, err := hex.DecodeString(rnd); err != nil {
		return "", time.Time{}, false
	}
	return runID, time.Unix(secs, 0).UTC(), true
}

func clip(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Capabilities says what the agentcore provider can do; see providers.Capabilities.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Attach: true, OwnFilesystem: true, List: true, TTL: true}
}
