package modal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/internal/cloudtest"
	"github.com/talkops/talkops/providers/modal"
	"github.com/talkops/talkops/providers/modal/modalfake"
)

func spec(runID string) providers.Spec {
	return cloudtest.Spec(runID)
}

func TestNewConfigErrors(t *testing.T) {
	dir := t.TempDir()
	noFile := filepath.Join(dir, "none.toml")
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[default\ntoken_id = 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	noToken := filepath.Join(dir, "notoken.toml")
	if err := os.WriteFile(noToken, []byte("[default]\nenvironment = \"main\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts modal.Options
		env  func(string) string
		want []string
	}{
		{"NoCredentials", modal.Options{}, env("MODAL_CONFIG_PATH", noFile), []string{"MODAL_TOKEN_ID / MODAL_TOKEN_SECRET", noFile}},
		{"DefaultFileIsInHome", modal.Options{}, env("HOME", dir), []string{"MODAL_TOKEN_ID", filepath.Join(dir, ".modal.toml")}},
		{"OnlyTheID", modal.Options{}, env("MODAL_CONFIG_PATH", noFile, "MODAL_TOKEN_ID", "ak-1"), []string{"MODAL_TOKEN_SECRET"}},
		{"ProfileWithoutToken", modal.Options{}, env("MODAL_CONFIG_PATH", noToken), []string{`profile "default" of ` + noToken}},
		{"UnreadableFile", modal.Options{}, env("MODAL_CONFIG_PATH", bad), []string{bad, "cannot be read"}},
		{"UnknownProfile", modal.Options{}, env("MODAL_CONFIG_PATH", noToken, "MODAL_PROFILE", "ci"), []string{"MODAL_PROFILE is \"ci\""}},
		{"BadServerURL", modal.Options{}, env("MODAL_CONFIG_PATH", noFile, "MODAL_TOKEN_ID", "a", "MODAL_TOKEN_SECRET", "b", "MODAL_SERVER_URL", "api.modal.com"), []string{"server_url / MODAL_SERVER_URL"}},
		{"RelativeWorkDir", modal.Options{WorkingDir: "work"}, env("MODAL_CONFIG_PATH", noFile, "MODAL_TOKEN_ID", "a", "MODAL_TOKEN_SECRET", "b"), []string{"working_dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := modal.New(tc.opts, tc.env)
			for _, w := range tc.want {
				cloudtest.WantConfigError(t, err, w)
			}
			var ce *httpapi.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("New() error = %v, want a *httpapi.ConfigError", err)
			}
			if strings.Contains(err.Error(), "as-") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

// TestCredentialsFromProfile: without MODAL_TOKEN_*, the active profile of the config
// file gives the token, the environment and the server; MODAL_PROFILE picks another.
func TestCredentialsFromProfile(t *testing.T) {
	srv := newServer(t)
	cfg := filepath.Join(t.TempDir(), "modal.toml")
	content := "[other]\ntoken_id = \"wrong\"\ntoken_secret = \"wrong\"\n\n" +
		"[work]\nactive = true\ntoken_id = \"" + tokenID + "\"\ntoken_secret = \"" + tokenSecret + "\"\nenvironment = \"dev\"\nserver_url = \"" + srv.URL + "\"\n"
	if err := os.WriteFile(cfg, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := options(t, srv)
	opts.ServerURL = ""
	p, err := modal.New(opts, env("MODAL_CONFIG_PATH", cfg))
	if err != nil {
		t.Fatal(err)
	}
	sb := cloudtest.Create(t, p, spec("run-profile"))
	got, _ := srv.Sandbox(sb.ID())
	if got.Environment != "dev" {
		t.Errorf("environment = %q, want the profile's %q", got.Environment, "dev")
	}

	p2, err := modal.New(opts, env("MODAL_CONFIG_PATH", cfg, "MODAL_PROFILE", "other", "MODAL_SERVER_URL", srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p2.Create(t.Context(), spec("run-other"))
	if err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
		t.Errorf("Create with profile other = %v, want UNAUTHENTICATED (its token is wrong)", err)
	}
}

func TestCreateSendsDefinitionAndTags(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, func(o *modal.Options) { o.Environment = "ci" })
	s := spec("run-def")
	s.Env = map[string]string{"API_TOKEN": "s3cret"}
	s.TTL = 90 * time.Second
	sb := cloudtest.Create(t, p, s)
	got, ok := srv.Sandbox(sb.ID())
	if !ok {
		t.Fatalf("the fake has no sandbox %s", sb.ID())
	}
	if !strings.HasPrefix(got.ID, "sb-") || got.TimeoutSecs != 90 || got.Workdir != sb.WorkDir() || got.Environment != "ci" {
		t.Errorf("sandbox = %+v; want an sb- id, timeout_secs 90, workdir %s, environment ci", got, sb.WorkDir())
	}
	if !strings.HasPrefix(got.Name, "talkops-run-def-") {
		t.Errorf("name = %q, want prefix talkops-run-def-", got.Name)
	}
	if diff := cmp.Diff(s.Labels, got.Tags); diff != "" {
		t.Errorf("tags mismatch (-want +got):\n%s", diff)
	}
	if len(got.SecretIDs) != 1 || srv.Secret(got.SecretIDs[0])["API_TOKEN"] != "s3cret" {
		t.Errorf("secret ids %v: want one ephemeral secret holding Spec.Env", got.SecretIDs)
	}
	res, err := sb.Exec(t.Context(), providers.Shell(`printf %s "$API_TOKEN"`))
	if err != nil || string(res.Stdout) != "s3cret" {
		t.Errorf("Spec.Env in a command = %q, %v", res.Stdout, err)
	}
	// The environment never travels in metadata.
	for _, c := range srv.Calls() {
		for _, vs := range c.Metadata {
			for _, v := range vs {
				if strings.Contains(v, "s3cret") {
					t.Errorf("%s metadata carries the secret", c.Method)
				}
			}
		}
	}
}

func TestCreateFromImage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot string
		setup    func(*modalfake.Server)
		wantErr  string
		imageGet int
		joins    int
	}{
		{"RegistryImage", "python:3.12-slim", nil, "", 1, 0},
		{"ImageID", "im-0123456789", nil, "", 0, 0},
		{"BuildTakesTwoJoins", "debian:12", func(s *modalfake.Server) { s.BuildAfter = 2 }, "", 1, 2},
		{"BuildFails", "nosuch/image", func(s *modalfake.Server) { s.ImageFailure = "pull access denied" }, "did not build: FAILURE: pull access denied", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			if tc.setup != nil {
				tc.setup(srv)
			}
			p := newProvider(t, srv, nil)
			s := spec("run-img")
			s.Snapshot = tc.snapshot
			sb, err := p.Create(t.Context(), s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Create() = %v, want %q", err, tc.wantErr)
				}
				if l := srv.Ledger(); l.Created != 0 {
					t.Errorf("a failed build created %d sandboxes", l.Created)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			got, _ := srv.Sandbox(sb.ID())
			if tc.snapshot == "im-0123456789" && got.ImageID != tc.snapshot {
				t.Errorf("image id = %q, want %q as given", got.ImageID, tc.snapshot)
			}
			if n := srv.Count("ImageGetOrCreate"); n != tc.imageGet {
				t.Errorf("ImageGetOrCreate calls = %d, want %d", n, tc.imageGet)
			}
			if n := srv.Count("ImageJoinStreaming"); n != tc.joins {
				t.Errorf("ImageJoinStreaming calls = %d, want %d", n, tc.joins)
			}
		})
	}
}

// TestFaults: the create sequence under injected faults; whatever was created is
// terminated unless the terminate itself fails.
func TestFaults(t *testing.T) {
	cloudtest.FaultTable[*modalfake.Server, modal.Options]{
		NewServer: newServer,
		NewProvider: func(t *testing.T, srv *modalfake.Server, mod func(*modal.Options)) providers.Provider {
			return newProvider(t, srv, func(o *modal.Options) { o.ReadyTimeout = 300 * time.Millisecond; mod(o) })
		},
		Ledger: func(srv *modalfake.Server) (int, []string) { l := srv.Ledger(); return l.Created, l.Alive },
	}.Run(t, []cloudtest.FaultCase[*modalfake.Server, modal.Options]{
		{
			Name: "CreateUnavailableThenOK",
			Setup: func(s *modalfake.Server) {
				s.Faults.Inject("SandboxCreate", 1, modalfake.Fault{Code: codes.Unavailable})
			},
			WantCall: map[string]int{"SandboxCreate": 2, "SandboxTerminate": 1},
		},
		{
			// The first create was served but its answer lost: the retry carries the same
			// idempotency key and gets the same sandbox, so only one exists.
			Name: "CreateAnswerLost",
			Setup: func(s *modalfake.Server) {
				s.Faults.Inject("SandboxCreate", 1, modalfake.Fault{Code: codes.Unavailable, AfterAct: true})
			},
			WantCall: map[string]int{"SandboxCreate": 2, "SandboxTerminate": 1},
		},
		{
			Name: "CreateDeadlineExceededTwice",
			Setup: func(s *modalfake.Server) {
				s.Faults.Inject("SandboxCreate", 1, modalfake.Fault{Code: codes.DeadlineExceeded})
				s.Faults.Inject("SandboxCreate", 2, modalfake.Fault{Code: codes.Internal})
			},
			WantCall: map[string]int{"SandboxCreate": 3},
		},
		{
			Name: "CreateAlwaysUnavailable",
			Setup: func(s *modalfake.Server) {
				s.Faults.InjectAll("SandboxCreate", modalfake.Fault{Code: codes.Unavailable, Message: "server overloaded"})
			},
			WantErr:  "UNAVAILABLE: server overloaded [gave up after 4 attempts]",
			WantCall: map[string]int{"SandboxCreate": 4, "SandboxTerminate": 0},
		},
		{
			Name: "QuotaIsNotRetried",
			Setup: func(s *modalfake.Server) {
				s.Faults.InjectAll("SandboxCreate", modalfake.Fault{Code: codes.ResourceExhausted, Message: "sandbox limit reached"})
			},
			WantErr:  "RESOURCE_EXHAUSTED: sandbox limit reached",
			WantCall: map[string]int{"SandboxCreate": 1},
		},
		{
			Name:     "WrongToken",
			Setup:    func(s *modalfake.Server) { s.TokenSecret = "another" },
			WantErr:  "UNAUTHENTICATED: Token ID or secret is invalid",
			WantCall: map[string]int{"SandboxCreate": 0},
		},
		{
			Name:     "NoTask",
			Setup:    func(s *modalfake.Server) { s.NeverReady = true },
			WantErr:  "has no task within 300ms",
			WantCall: map[string]int{"SandboxCreate": 1, "SandboxTerminate": 1},
		},
		{
			Name:     "SlowGetTaskId",
			Setup:    func(s *modalfake.Server) { s.TaskDelay = 400 * time.Millisecond },
			WantErr:  "has no task within 300ms",
			WantCall: map[string]int{"SandboxCreate": 1, "SandboxTerminate": 1},
		},
		{
			// Every answer to the create is lost, though the first attempt made the
			// sandbox: the client gives up, finds the sandbox by its name and terminates it.
			Name: "CreateAnswerAlwaysLost",
			Setup: func(s *modalfake.Server) {
				s.Faults.InjectAll("SandboxCreate", modalfake.Fault{Code: codes.Unavailable, AfterAct: true})
			},
			WantErr:  "UNAVAILABLE: connection reset after the call was served [gave up after 4 attempts]",
			WantCall: map[string]int{"SandboxCreate": 4, "SandboxGetFromName": 1, "SandboxTerminate": 1},
		},
		{
			// A create the server refused made nothing: there is nothing to look for.
			Name: "CreateRefused",
			Setup: func(s *modalfake.Server) {
				s.Faults.InjectAll("SandboxCreate", modalfake.Fault{Code: codes.InvalidArgument, Message: "bad definition"})
			},
			WantErr:  "INVALID_ARGUMENT: bad definition",
			WantCall: map[string]int{"SandboxCreate": 1, "SandboxGetFromName": 0, "SandboxTerminate": 0},
		},
		{
			Name: "NoTaskAndTerminateFails",
			Setup: func(s *modalfake.Server) {
				s.NeverReady = true
				s.Faults.InjectAll("SandboxTerminate", modalfake.Fault{Code: codes.Unavailable})
			},
			WantErr:  "deleting the half-created sandbox failed",
			WantCall: map[string]int{"SandboxCreate": 1, "SandboxTerminate": 4},
			Alive:    1,
		},
	})
}

// TestExecStartNeverRunsTwice: a start that fails before the server acted is sent again
// (TaskExecPoll says NOT_FOUND); one whose answer was lost after the command started is
// not (TaskExecPoll finds it), and its output is read.
func TestExecStartNeverRunsTwice(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-exec"))
	for _, f := range []modalfake.Fault{
		{Code: codes.Unavailable},
		{Code: codes.Unavailable, AfterAct: true},
		{Code: codes.Internal, AfterAct: true},
	} {
		base := srv.Count("TaskExecStart")
		srv.Faults.Inject("TaskExecStart", base+1, f)
		res, err := sb.Exec(t.Context(), providers.Shell("echo x >> n; cat n; rm n"))
		if err != nil || string(res.Stdout) != "x\n" {
			t.Fatalf("Exec after %+v = %q, %v; want it run exactly once", f, res.Stdout, err)
		}
		want := 1
		if !f.AfterAct {
			want = 2
		}
		if got := srv.Count("TaskExecStart") - base; got != want {
			t.Errorf("after %+v: TaskExecStart calls = %d, want %d", f, got, want)
		}
	}
	// When the poll cannot tell, the start is not sent again.
	base := srv.Count("TaskExecStart")
	srv.Faults.Inject("TaskExecStart", base+1, modalfake.Fault{Code: codes.Unavailable})
	srv.Faults.InjectAll("TaskExecPoll", modalfake.Fault{Code: codes.PermissionDenied, Message: "no"})
	_, err := sb.Exec(t.Context(), providers.Shell("true"))
	if err == nil || !strings.Contains(err.Error(), "not sent again") {
		t.Errorf("Exec with an unknown start state = %v, want an error saying it is not sent again", err)
	}
	if got := srv.Count("TaskExecStart") - base; got != 1 {
		t.Errorf("TaskExecStart calls = %d, want 1", got)
	}
}

// TestStalledStreamResumesAtOffset: an output stream that goes quiet after the command
// exited is reopened at its offset; the output is whole, not doubled.
func TestStalledStreamResumesAtOffset(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-stall"))
	base := srv.Count("TaskExecStdioRead")
	srv.Faults.Inject("TaskExecStdioRead", base+1, modalfake.Fault{Stall: true})
	srv.Faults.Inject("TaskExecStdioRead", base+2, modalfake.Fault{Stall: true})
	res, err := sb.Exec(t.Context(), providers.Shell("echo out; echo err >&2"))
	if err != nil || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("Exec with stalled streams = %q / %q, %v", res.Stdout, res.Stderr, err)
	}
	if got := srv.Count("TaskExecStdioRead") - base; got != 4 {
		t.Errorf("TaskExecStdioRead calls = %d, want 4 (two stalled, two reopened)", got)
	}
}

// TestHungCallIsBoundedByContext: a call that never answers ends with the caller's
// deadline.
func TestHungCallIsBoundedByContext(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-hang"))
	srv.Faults.InjectAll("TaskExecWait", modalfake.Fault{Hang: true})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := sb.Exec(ctx, providers.Shell("true"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec with a hung wait = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Exec returned after %s", d)
	}
}

// TestTokensAreRefreshed: an auth token within five minutes of expiry, and a router JWT
// within thirty seconds of it, are replaced before the next call.
func TestTokensAreRefreshed(t *testing.T) {
	for _, tc := range []struct {
		name               string
		tokenTTL, jwtTTL   time.Duration
		moreTokens, moreJW bool
	}{
		{"LongLived", time.Hour, time.Hour, false, false},
		{"ShortLived", 4 * time.Minute, 20 * time.Second, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			srv.TokenTTL, srv.RouterTTL = tc.tokenTTL, tc.jwtTTL
			p := newProvider(t, srv, nil)
			sb := cloudtest.Create(t, p, spec("run-tok"))
			tokens, jwts := srv.Count("AuthTokenGet"), srv.Count("TaskGetCommandRouterAccess")
			for range 3 {
				if _, err := sb.Exec(t.Context(), providers.Shell("true")); err != nil {
					t.Fatal(err)
				}
			}
			if got := srv.Count("AuthTokenGet") > tokens; got != tc.moreTokens {
				t.Errorf("auth token fetched again: %v, want %v", got, tc.moreTokens)
			}
			if got := srv.Count("TaskGetCommandRouterAccess") > jwts; got != tc.moreJW {
				t.Errorf("router JWT fetched again: %v, want %v", got, tc.moreJW)
			}
		})
	}
}

// TestMetadata: every control-plane call carries the client identity and the token;
// every call but AuthTokenGet the auth token; retries carry the same idempotency key
// and a growing attempt number.
func TestMetadata(t *testing.T) {
	srv := newServer(t)
	srv.Faults.Inject("AppGetOrCreate", 1, modalfake.Fault{Code: codes.Unavailable})
	p := newProvider(t, srv, nil)
	cloudtest.Create(t, p, spec("run-md"))
	var keys, attempts []string
	for _, c := range srv.Calls() {
		md := c.Metadata
		if strings.HasPrefix(c.Method, "TaskExec") {
			if !strings.HasPrefix(strings.Join(md.Get("authorization"), ""), "Bearer ") {
				t.Errorf("%s has no router JWT", c.Method)
			}
			continue
		}
		for _, k := range []string{"x-modal-client-type", "x-modal-client-version", "x-modal-token-id", "x-modal-token-secret", "x-idempotency-key", "x-retry-attempt"} {
			if len(md.Get(k)) != 1 {
				t.Errorf("%s metadata %s = %v, want one value", c.Method, k, md.Get(k))
			}
		}
		if hasToken := len(md.Get("x-modal-auth-token")) == 1; hasToken == (c.Method == "AuthTokenGet") {
			t.Errorf("%s: x-modal-auth-token present = %v", c.Method, hasToken)
		}
		if c.Method == "AppGetOrCreate" {
			keys = append(keys, md.Get("x-idempotency-key")...)
			attempts = append(attempts, md.Get("x-retry-attempt")...)
		}
	}
	if len(keys) != 2 || keys[0] != keys[1] || !slices.Equal(attempts, []string{"0", "1"}) {
		t.Errorf("AppGetOrCreate retry: keys %v, attempts %v; want one key and attempts 0, 1", keys, attempts)
	}
}

func TestListByTagsAndPaging(t *testing.T) {
	srv := newServer(t)
	srv.PageSize = 1
	p := newProvider(t, srv, nil)
	var ids []string
	for _, run := range []string{"run-a", "run-b", "run-c"} {
		ids = append(ids, cloudtest.Create(t, p, spec(run)).ID())
		time.Sleep(5 * time.Millisecond) // distinct created_at
	}
	other := spec("not-ours")
	other.Labels = map[string]string{"team": "x"}
	cloudtest.Create(t, p, other)

	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range infos {
		got = append(got, in.ID+"/"+in.RunID)
		if in.Provider != "modal" || in.ExpiresAt.IsZero() || in.CreatedAt.IsZero() || in.State != "running" {
			t.Errorf("info %+v lacks provider, expiry, creation time or state", in)
		}
	}
	want := []string{ids[2] + "/run-c", ids[1] + "/run-b", ids[0] + "/run-a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}
	if n := srv.Count("SandboxList"); n != 4 {
		t.Errorf("SandboxList calls = %d, want 4 (three pages of one, then an empty one)", n)
	}
	if err := p.Delete(t.Context(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), ids[0]); err != nil {
		t.Errorf("Delete of a terminated sandbox = %v, want nil", err)
	}
	if err := p.Delete(t.Context(), "sb-unknown"); err != nil {
		t.Errorf("Delete(unknown) = %v, want nil", err)
	}
}

func TestUploadIsOneFile(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-up"))
	tgz := tarGz(t, 50)
	before := len(srv.Calls())
	if err := sb.Upload(t.Context(), "proj", strings.NewReader(string(tgz))); err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, c := range srv.Calls()[before:] {
		methods = append(methods, c.Method)
	}
	// open, one write, close (each with its output), then one exec of tar.
	want := []string{"ContainerFilesystemExec", "ContainerFilesystemExecGetOutput", "ContainerFilesystemExec", "ContainerFilesystemExecGetOutput",
		"ContainerFilesystemExec", "ContainerFilesystemExecGetOutput", "TaskExecStart", "TaskExecStdioRead", "TaskExecStdioRead", "TaskExecWait"}
	slices.Sort(methods)
	slices.Sort(want)
	if diff := cmp.Diff(want, methods); diff != "" {
		t.Errorf("Upload calls mismatch (-want +got):\n%s", diff)
	}
	b, err := os.ReadFile(filepath.Join(sb.WorkDir(), "proj", "d", "f49.txt"))
	if err != nil || string(b) != "file 49" {
		t.Errorf("extracted d/f49.txt = %q, %v", b, err)
	}
}

// TestTTLBackstop: the fake terminates a sandbox when its timeout_secs passes, as Modal
// does; the handle's Close then still succeeds.
func TestTTLBackstop(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	s := spec("run-ttl")
	s.TTL = time.Second
	sb, err := p.Create(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Ledger().Alive) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive := srv.Ledger().Alive; len(alive) > 0 {
		t.Fatalf("sandbox alive after its timeout_secs: %v", alive)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("Close after the TTL = %v, want nil", err)
	}
}

// slowWriter's first Write signals started and then takes a while; busy says whether a
// Write is in progress.
type slowWriter struct {
	started chan struct{}
	once    sync.Once
	busy    atomic.Bool
}

func (w *slowWriter) Write(b []byte) (int, error) {
	w.busy.Store(true)
	defer w.busy.Store(false)
	w.once.Do(func() {
		close(w.started)
		time.Sleep(time.Second)
	})
	return len(b), nil
}

// TestFailedExecStopsItsOutputStreams: when the wait for a command fails, Exec returns
// only once its output streams have stopped, so no Write to the caller's writers is still
// going on (or comes later) when the caller moves on.
func TestFailedExecStopsItsOutputStreams(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-wait-fails"))
	held := srv.Faults.Hold("TaskExecWait")
	srv.Faults.Inject("TaskExecWait", srv.Count("TaskExecWait")+1, modalfake.Fault{Code: codes.PermissionDenied, Message: "no"})
	w := &slowWriter{started: make(chan struct{})}
	cmd := providers.Shell("echo out; sleep 2")
	cmd.Stdout = w
	type outcome struct {
		err          error
		busyAtReturn bool
	}
	done := make(chan outcome, 1)
	go func() {
		_, err := sb.Exec(t.Context(), cmd)
		done <- outcome{err, w.busy.Load()}
	}()
	select {
	case <-w.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the command's output never reached the writer")
	}
	held.Release()
	got := <-done
	if got.err == nil || !strings.Contains(got.err.Error(), "PERMISSION_DENIED") {
		t.Fatalf("Exec with a failing wait = %v, want the PERMISSION_DENIED error", got.err)
	}
	if got.busyAtReturn {
		t.Error("Exec returned while its output stream was still writing to cmd.Stdout")
	}
}

// TestCreateCutShort: the server makes a sandbox even when the caller of SandboxCreate
// gives up while the call is in flight (a cancelled run, a deadline). Create finds it by
// the name it sent and terminates it; when it cannot, the sandbox carries its tags
// from the start, so List (what gc uses) finds it.
func TestCreateCutShort(t *testing.T) {
	cutShort := func(t *testing.T, srv *modalfake.Server, p *modal.Provider, runID string) error {
		t.Helper()
		held := srv.Faults.HoldAfterAct("SandboxCreate")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := p.Create(ctx, spec(runID))
			errc <- err
		}()
		select {
		case <-held.Arrived():
		case err := <-errc:
			t.Fatalf("Create returned before the create was held: %v", err)
		}
		if l := srv.Ledger(); len(l.Alive) != 1 {
			t.Fatalf("ledger before the cancel: %+v; want the sandbox made", l)
		}
		cancel()
		err := <-errc
		if err == nil || !strings.Contains(err.Error(), "CANCELED") {
			t.Fatalf("Create cancelled mid-call = %v; want a CANCELED error", err)
		}
		return err
	}

	t.Run("Cancelled", func(t *testing.T) {
		srv := newServer(t)
		p := newProvider(t, srv, nil)
		if err := cutShort(t, srv, p, "run-cancelled"); strings.Contains(err.Error(), "gc finds it") {
			t.Errorf("Create error = %v; want the sandbox terminated, not left to gc", err)
		}
		if l := srv.Ledger(); l.Created != 1 || l.Deleted != 1 || len(l.Alive) != 0 {
			t.Errorf("ledger after the cancelled create: %+v; want the one sandbox made and terminated", l)
		}
		if n := srv.Count("SandboxGetFromName"); n != 1 {
			t.Errorf("SandboxGetFromName calls = %d, want 1", n)
		}
	})

	t.Run("Deadline", func(t *testing.T) {
		srv := newServer(t)
		p := newProvider(t, srv, nil)
		held := srv.Faults.HoldAfterAct("SandboxCreate")
		// The deadline passes once the server has made the sandbox, however long the calls
		// before it took on a loaded machine.
		base, expire := context.WithCancel(t.Context())
		defer expire()
		errc := make(chan error, 1)
		go func() {
			_, err := p.Create(deadlineOnCancel{base}, spec("run-deadline"))
			errc <- err
		}()
		select {
		case <-held.Arrived():
		case err := <-errc:
			t.Fatalf("Create returned before the create was held: %v", err)
		}
		expire()
		if err := <-errc; err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Fatalf("Create past its deadline = %v; want a deadline exceeded error", err)
		}
		if l := srv.Ledger(); l.Created != 1 || l.Deleted != 1 || len(l.Alive) != 0 {
			t.Errorf("ledger after the create past its deadline: %+v; want the one sandbox made and terminated", l)
		}
	})

	t.Run("LookupFailsGCFindsIt", func(t *testing.T) {
		srv := newServer(t)
		p := newProvider(t, srv, nil)
		srv.Faults.InjectAll("SandboxGetFromName", modalfake.Fault{Code: codes.Unavailable, Message: "control plane down"})
		err := cutShort(t, srv, p, "run-lost")
		if !strings.Contains(err.Error(), "talkops sandbox gc finds it by its tags") {
			t.Errorf("Create error = %v; want it to say gc finds the sandbox", err)
		}
		infos, err := p.List(t.Context())
		if err != nil || len(infos) != 1 || infos[0].RunID != "run-lost" {
			t.Fatalf("List = %+v, %v; want the sandbox of run-lost, tagged at creation", infos, err)
		}
		if err := p.Delete(t.Context(), infos[0].ID); err != nil {
			t.Fatal(err)
		}
		if l := srv.Ledger(); len(l.Alive) != 0 {
			t.Errorf("ledger after Delete: %+v", l)
		}
	})
}

// deadlineOnCancel is a context whose cancellation reads as its deadline passing, so a
// test decides the moment the deadline passes. It carries no values: the context package
// finds a parent to cancel with through Value, and must instead ask this Err.
type deadlineOnCancel struct{ context.Context }

func (deadlineOnCancel) Value(any) any { return nil }

func (c deadlineOnCancel) Err() error {
	if c.Context.Err() != nil {
		return context.DeadlineExceeded
	}
	return nil
}
