package daytona_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/daytona/daytonafake"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
	"github.com/talkops/talkops/providers/internal/cloudtest"
	"github.com/talkops/talkops/providers/providertest"
)

const key = "dtn_test_key"

var env = cloudtest.Env

func newProvider(t *testing.T, srv *daytonafake.Server, mod func(*daytona.Options)) *daytona.Provider {
	t.Helper()
	opts := daytona.Options{APIURL: srv.APIURL(), PollInterval: 5 * time.Millisecond, ReadyTimeout: 10 * time.Second, RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir(), TempDir: t.TempDir(), Retry: cloudtest.FastRetry}}
	if mod != nil {
		mod(&opts)
	}
	p, err := daytona.New(opts, env("DAYTONA_API_KEY", key))
	if err != nil {
		t.Fatalf("daytona.New: %v", err)
	}
	return p
}

func newServer(t *testing.T) *daytonafake.Server {
	t.Helper()
	srv := daytonafake.New(key)
	srv.ReadyAfter = 2
	t.Cleanup(srv.Close)
	return srv
}

// spec is a run's Spec with a 30-minute TTL and an expiry label to match (the auto-stop
// interval is derived from the TTL).
func spec(runID string) providers.Spec {
	return providers.Spec{RunID: runID, TTL: 30 * time.Minute, Labels: map[string]string{
		providers.LabelRunID: runID, providers.LabelCreatedBy: "talkops",
		providers.LabelExpiresAt: time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339),
	}}
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		srv := daytonafake.New(key)
		srv.ReadyAfter = 2
		return cloudtest.FakeHarness{Provider: func(t *testing.T) providers.Provider { return newProvider(t, srv, nil) },
			Ledger: func() []string { return srv.Ledger().Alive }, Stop: srv.Close}, nil
	})
}

func TestNewConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    daytona.Options
		env     func(string) string
		wantVar string
	}{
		{"NoKey", daytona.Options{}, env(), "DAYTONA_API_KEY"},
		{"JWTWithoutOrg", daytona.Options{}, env("DAYTONA_JWT_TOKEN", "jwt"), "DAYTONA_ORGANIZATION_ID"},
		{"BadURL", daytona.Options{APIURL: "app.daytona.io"}, env("DAYTONA_API_KEY", "k"), "api_url"},
		{"RelativeWorkDir", daytona.Options{RemoteOptions: httpapi.RemoteOptions{WorkingDir: "work"}}, env("DAYTONA_API_KEY", "k"), "working_dir"},
		{"NegativeCPU", daytona.Options{CPU: -1}, env("DAYTONA_API_KEY", "k"), "cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := daytona.New(tc.opts, tc.env)
			cloudtest.WantConfigError(t, err, tc.wantVar)
			var ce *httpapi.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("New() error = %v, want a *httpapi.ConfigError", err)
			}
		})
	}
	if _, err := daytona.New(daytona.Options{}, env("DAYTONA_JWT_TOKEN", "jwt", "DAYTONA_ORGANIZATION_ID", "org")); err != nil {
		t.Errorf("New() with JWT and organization = %v, want nil", err)
	}
}

func TestNewReadsEnvironment(t *testing.T) {
	srv := newServer(t)
	p, err := daytona.New(daytona.Options{PollInterval: time.Millisecond, RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir()}},
		env("DAYTONA_API_KEY", key, "DAYTONA_API_URL", srv.APIURL(), "DAYTONA_TARGET", "eu"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(t.Context(), spec("run-env"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer sb.Close(context.Background())
	got, _ := srv.Sandbox(sb.ID())
	if got.Target != "eu" {
		t.Errorf("target = %q, want %q from DAYTONA_TARGET", got.Target, "eu")
	}
}

func TestCreateSendsLabelsAndBackstop(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name         string
		opts         func(*daytona.Options)
		spec         providers.Spec
		wantSnapshot string
		wantBuild    string
		wantAutoStop int
	}{
		{"Default", nil, spec("run-1"), "daytonaio/sandbox:0.4.3", "", 30},
		{"Snapshot", nil, func() providers.Spec { s := spec("run-2"); s.Snapshot = "talkops-aws-agent"; return s }(), "talkops-aws-agent", "", 30},
		{"Image", func(o *daytona.Options) { o.Image = "python:3.12-slim" }, spec("run-3"), "", "python:3.12-slim", 30},
		{"AutoStopOption", func(o *daytona.Options) { o.AutoStopMinutes = 5 }, spec("run-4"), "daytonaio/sandbox:0.4.3", "", 5},
		{"TTLRoundsUp", nil, func() providers.Spec { s := spec("run-5"); s.TTL = 90 * time.Second; return s }(), "daytonaio/sandbox:0.4.3", "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, srv, tc.opts)
			sb, err := p.Create(t.Context(), tc.spec)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			defer sb.Close(context.Background())
			got, ok := srv.Sandbox(sb.ID())
			if !ok {
				t.Fatalf("the fake has no sandbox %s", sb.ID())
			}
			want := daytonafake.Sandbox{
				ID: sb.ID(), Name: got.Name, State: "started", Snapshot: tc.wantSnapshot, BuildFrom: tc.wantBuild,
				Labels: tc.spec.Labels, AutoStopInterval: tc.wantAutoStop, AutoDeleteInterval: 0, Home: got.Home,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("created sandbox mismatch (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(got.Name, "talkops-"+tc.spec.RunID+"-") {
				t.Errorf("name = %q, want prefix %q", got.Name, "talkops-"+tc.spec.RunID+"-")
			}
		})
	}
}

func TestFaults(t *testing.T) {
	cloudtest.FaultTable[*daytonafake.Server, daytona.Options]{
		NewServer: newServer,
		NewProvider: func(t *testing.T, srv *daytonafake.Server, mod func(*daytona.Options)) providers.Provider {
			return newProvider(t, srv, func(o *daytona.Options) { o.ReadyTimeout = 10 * time.Second; mod(o) })
		},
		Ledger: func(srv *daytonafake.Server) (int, []string) { l := srv.Ledger(); return l.Created, l.Alive },
		Spec:   func() providers.Spec { return spec("run-fault") },
	}.Run(t, []cloudtest.FaultCase[*daytonafake.Server, daytona.Options]{
		{
			Name:     "CreateRateLimitedThenOK",
			Setup:    func(s *daytonafake.Server) { s.Faults.Inject("create", 1, fakekit.Fault{Status: 429, RetryAfter: "0"}) },
			WantCall: map[string]int{"create": 2},
		},
		{
			Name: "Create503Twice",
			Setup: func(s *daytonafake.Server) {
				s.Faults.Inject("create", 1, fakekit.Fault{Status: 503})
				s.Faults.Inject("create", 2, fakekit.Fault{Status: 502})
			},
			WantCall: map[string]int{"create": 3},
		},
		{
			Name: "CreateAlwaysRateLimited",
			Setup: func(s *daytonafake.Server) {
				s.Faults.InjectAll("create", fakekit.Fault{Status: 429, RetryAfter: "0", Body: `{"statusCode":429,"error":"Too Many Requests","message":"ThrottlerException: sandbox-create rate limit exceeded"}`})
			},
			WantErr:  "429 Too Many Requests: ThrottlerException: sandbox-create rate limit exceeded [gave up after 4 attempts]",
			WantCall: map[string]int{"create": 4, "delete": 0},
		},
		{
			Name: "RetryAfterBeyondLimit",
			Setup: func(s *daytonafake.Server) {
				s.Faults.InjectAll("create", fakekit.Fault{Status: 429, RetryAfter: "3600"})
			},
			WantErr:  "server asked to wait 1h0m0s",
			WantCall: map[string]int{"create": 1},
		},
		{
			Name:     "Unauthorized",
			Setup:    func(s *daytonafake.Server) { s.APIKey = "another" },
			WantErr:  "401 Unauthorized: Invalid credentials",
			WantCall: map[string]int{"create": 1},
		},
		{
			Name:     "NeverReady",
			Options:  func(o *daytona.Options) { o.ReadyTimeout = 300 * time.Millisecond },
			Setup:    func(s *daytonafake.Server) { s.NeverReady = true },
			WantErr:  `not started within 300ms (last state "creating")`,
			WantCall: map[string]int{"create": 1, "delete": 1},
		},
		{
			Name: "BuildFailed",
			Setup: func(s *daytonafake.Server) {
				s.FailWith, s.FailReason = "build_failed", "pull access denied for nosuch/image"
			},
			WantErr:  "is build_failed: pull access denied for nosuch/image",
			WantCall: map[string]int{"create": 1, "delete": 1},
		},
		{
			Name:    "NeverReadyAndDeleteFails",
			Options: func(o *daytona.Options) { o.ReadyTimeout = 300 * time.Millisecond },
			Setup: func(s *daytonafake.Server) {
				s.NeverReady = true
				s.Faults.InjectAll("delete", fakekit.Fault{Status: 500})
			},
			WantErr:  "deleting the half-created sandbox failed",
			WantCall: map[string]int{"create": 1, "delete": 4},
			Alive:    1,
		},
		{
			Name:     "ToolboxNotAnsweringAtFirst",
			Setup:    func(s *daytonafake.Server) { s.Faults.Inject("exec", 1, fakekit.Fault{Status: 502}) },
			WantCall: map[string]int{"create": 1, "exec": 2, "delete": 1},
		},
	})
}

func TestExecFaults(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-exec"))
	base := srv.Count("exec")

	// A 429 means the command was not taken: retried.
	cloudtest.ExecRunsOnce(t, sb, &srv.Faults, srv.Count, "exec", fakekit.Fault{Status: 429, RetryAfter: "0"}, fakekit.Fault{Status: 429, RetryAfter: "0"})
	// A 500 may mean the command ran: not repeated, surfaced with the message.
	srv.Faults.Inject("exec", srv.Count("exec")+1, fakekit.Fault{Status: 500, Body: `{"statusCode":500,"message":"runner unreachable","code":"INTERNAL_SERVER_ERROR"}`})
	_, err := sb.Exec(t.Context(), providers.Shell("echo again >> count"))
	if err == nil || !strings.Contains(err.Error(), "500 Internal Server Error: runner unreachable (INTERNAL_SERVER_ERROR)") {
		t.Fatalf("Exec after a 500 error = %v, want the provider's message and status", err)
	}
	if got := srv.Count("exec") - base; got != 4 {
		t.Errorf("exec calls = %d, want 4 (3 for the first command, 1 for the second)", got)
	}
	// process/execute takes no idempotency key: a 502 or 503 from the proxy that came
	// after the command started must not run it a second time.
	for _, status := range []int{502, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			sb := cloudtest.Create(t, p, spec(fmt.Sprintf("run-exec-%d", status)))
			cloudtest.ExecNotResent(t, sb, &srv.Faults, "exec", fakekit.Fault{Status: status})
		})
	}
}

func TestCloseDeleteFailsThenRetries(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb, err := p.Create(t.Context(), spec("run-del"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Faults.InjectAll("delete", fakekit.Fault{Status: 503, Body: `{"statusCode":503,"error":"Service Unavailable","message":"lifecycle queue full"}`})
	err = sb.Close(t.Context())
	if err == nil || !strings.Contains(err.Error(), "lifecycle queue full") || !strings.Contains(err.Error(), sb.ID()) {
		t.Fatalf("Close() = %v, want the delete failure naming the sandbox and the provider's message", err)
	}
	if got := srv.Count("delete"); got != 4 {
		t.Errorf("delete calls = %d, want 4", got)
	}
	srv.Faults.Clear("delete")
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("second Close() = %v, want nil (it retries the delete)", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("third Close() = %v, want nil", err)
	}
	if l := srv.Ledger(); len(l.Alive) != 0 || l.Deleted != 1 {
		t.Errorf("ledger = %+v, want the sandbox deleted once", l)
	}
}

func TestDeleteAlreadyGone(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	if err := p.Delete(t.Context(), "no-such-sandbox"); err != nil {
		t.Errorf("Delete(unknown) = %v, want nil", err)
	}
}

func TestListByLabel(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	var ids []string
	for _, run := range []string{"run-a", "run-b"} {
		ids = append(ids, cloudtest.Create(t, p, spec(run)).ID())
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
		got = append(got, in.ID+"/"+in.RunID+"/"+in.State)
		if in.Provider != "daytona" || in.ExpiresAt.IsZero() || in.CreatedAt.IsZero() {
			t.Errorf("info %+v lacks provider, expiry or creation time", in)
		}
	}
	want := []string{ids[0] + "/run-a/started", ids[1] + "/run-b/started"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}
	if err := p.Delete(t.Context(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(ids[0]); ok {
		t.Errorf("Delete(%s) left it alive", ids[0])
	}
}

func TestUploadIsTwoRequests(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-up"))
	tgz := cloudtest.TarGz(t, archive.Entry{Name: "a.txt", Mode: 0o644, Body: []byte("a")}, archive.Entry{Name: "d/b.txt", Mode: 0o644, Body: []byte("b")})
	eps := cloudtest.Endpoints(cloudtest.UploadCalls(t, sb, "proj", tgz, srv.Calls))
	if diff := cmp.Diff([]string{"upload", "exec"}, eps); diff != "" {
		t.Errorf("Upload requests mismatch (-want +got):\n%s", diff)
	}
	b, err := os.ReadFile(sb.WorkDir() + "/proj/d/b.txt")
	if err != nil || string(b) != "b" {
		t.Errorf("extracted d/b.txt = %q, %v", b, err)
	}
}

// TestAttachStartsPaused: Daytona's start takes a paused sandbox as it takes a stopped
// one; waiting for a paused sandbox to start by itself would wait until ReadyTimeout.
func TestAttachStartsPaused(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, func(o *daytona.Options) { o.ReadyTimeout = 2 * time.Second })
	sb := cloudtest.Create(t, p, spec("run-paused"))
	srv.Pause(sb.ID())
	att, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatalf("Attach(paused) = %v", err)
	}
	defer att.Close(context.Background())
	if got, _ := srv.Sandbox(sb.ID()); got.State != "started" {
		t.Errorf("state after Attach = %q, want started", got.State)
	}
	if n := srv.Count("start"); n != 1 {
		t.Errorf("start calls = %d, want 1", n)
	}
	res, err := att.Exec(t.Context(), providers.Shell("echo back"))
	if err != nil || string(res.Stdout) != "back\n" {
		t.Errorf("Exec on the attached sandbox = %q, %v", res.Stdout, err)
	}
}

func TestAttachStartsStopped(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb, err := p.Create(t.Context(), spec("run-att"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	req, _ := http.NewRequest(http.MethodPost, srv.APIURL()+"/sandbox/"+sb.ID()+"/stop", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	att, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatalf("Attach(stopped) = %v", err)
	}
	if got, _ := srv.Sandbox(sb.ID()); got.State != "started" {
		t.Errorf("state after Attach = %q, want started", got.State)
	}
	if err := att.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(sb.ID()); !ok {
		t.Error("closing the attached handle deleted the sandbox")
	}
}

// TestLive runs the contract suite against the real Daytona API when DAYTONA_API_KEY is
// set and -short is not.
func TestLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live test skipped in -short mode")
	}
	if os.Getenv("DAYTONA_API_KEY") == "" {
		t.Skip("DAYTONA_API_KEY is not set; skipping the live Daytona contract test")
	}
	providertest.Run(t, func(context.Context, *testing.T) (providertest.Harness, error) {
		return cloudtest.LiveHarness{
			New: func() (providers.Provider, error) { return daytona.New(daytona.Options{}, os.Getenv) },
			// A deleted sandbox is listed as destroying for a while.
			Gone: func(in providers.Info) bool { return in.State == "destroying" || in.State == "destroyed" },
		}, nil
	})
}

// TestAttachWorkDir: --sandbox-id with a configured working_dir runs commands there, not
// in the provider's default directory.
func TestAttachWorkDir(t *testing.T) {
	srv := newServer(t)
	cloudtest.AttachWorkDir(t, newProvider(t, srv, nil), spec("run-attach-wd"))
}
