package agentcore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/agentcore"
	"github.com/talkops/talkops/providers/agentcore/agentcorefake"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
	"github.com/talkops/talkops/providers/internal/cloudtest"
	"github.com/talkops/talkops/providers/providertest"
)

const accessKey = "AKIDTALKOPSTEST"

var (
	env    = cloudtest.Env
	spec   = cloudtest.Spec
	create = cloudtest.Create
)

func newServer(t *testing.T) *agentcorefake.Server {
	t.Helper()
	srv := agentcorefake.New(accessKey)
	t.Cleanup(srv.Close)
	return srv
}

// options points the provider at the fake with static credentials and fast retries.
func options(t *testing.T, srv *agentcorefake.Server) agentcore.Options {
	return agentcore.Options{
		Endpoint:     srv.URL,
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, "secret", ""),
		WorkingDir:   t.TempDir(),
		MaxBackoff:   5 * time.Millisecond,
		PollInterval: 5 * time.Millisecond,
		ReadyTimeout: 5 * time.Second,
	}
}

func newProvider(t *testing.T, srv *agentcorefake.Server, mod func(*agentcore.Options)) *agentcore.Provider {
	t.Helper()
	opts := options(t, srv)
	if mod != nil {
		mod(&opts)
	}
	p, err := agentcore.New(opts, env())
	if err != nil {
		t.Fatalf("agentcore.New: %v", err)
	}
	return p
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		srv := agentcorefake.New(accessKey)
		srv.ReadyAfter = 1
		return cloudtest.FakeHarness{Provider: func(t *testing.T) providers.Provider { return newProvider(t, srv, nil) },
			Ledger: func() []string { return srv.Ledger().Alive }, Stop: srv.Close}, nil
	})
}

// isolateAWS keeps the machine's AWS configuration out of a test: no shared files, no
// instance metadata, no keys in the environment.
func isolateAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
	} {
		t.Setenv(k, v)
	}
}

func TestNewConfigErrors(t *testing.T) {
	isolateAWS(t)
	srv := newServer(t)
	static := credentials.NewStaticCredentialsProvider(accessKey, "secret", "")
	for _, tc := range []struct {
		name    string
		opts    agentcore.Options
		env     func(string) string
		wantVar string
	}{
		{"NoRegion", agentcore.Options{Credentials: static}, env(), "AWS_REGION / region is not set"},
		{"NoCredentials", agentcore.Options{}, env("AWS_REGION", "us-west-2"), "AWS credentials could not be resolved"},
		{"OnlyAccessKey", agentcore.Options{}, env("AWS_REGION", "us-west-2", "AWS_ACCESS_KEY_ID", "AKID"), "AWS credentials could not be resolved"},
		{"UnknownProfile", agentcore.Options{}, env("AWS_REGION", "us-west-2", "AWS_PROFILE", "nope"), "AWS_PROFILE / AWS_CONFIG_FILE could not be loaded"},
		{"RelativeWorkDir", agentcore.Options{WorkingDir: "work"}, env(), "working_dir"},
		{"SessionTimeoutTooLong", agentcore.Options{SessionTimeout: 9 * time.Hour}, env(), "session_timeout"},
		{"SessionTimeoutTooShort", agentcore.Options{SessionTimeout: time.Second}, env(), "session_timeout"},
		{"BadEndpoint", agentcore.Options{Endpoint: "bedrock-agentcore.us-west-2.amazonaws.com"}, env(), "endpoint"},
		{"BadRetryMode", agentcore.Options{RetryMode: "legacy"}, env(), "retry_mode"},
		{"TooManyAttempts", agentcore.Options{MaxAttempts: 50}, env(), "max_attempts"},
		{"HugeChunk", agentcore.Options{UploadChunk: 80 << 20}, env(), "upload_chunk"},
		{"BadInterpreter", agentcore.Options{CodeInterpreter: "arn:aws:x/y"}, env(), "code_interpreter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Endpoint = firstNonEmpty(tc.opts.Endpoint, srv.URL)
			_, err := agentcore.New(tc.opts, tc.env)
			cloudtest.WantConfigError(t, err, tc.wantVar)
		})
	}
	if calls := srv.Calls(); len(calls) != 0 {
		t.Errorf("the constructor sent %d requests to AgentCore, want none: %+v", len(calls), calls)
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestNewUsesGetenvKeys: keys and region from getenv are what the requests are signed with.
func TestNewUsesGetenvKeys(t *testing.T) {
	isolateAWS(t)
	srv := newServer(t)
	p, err := agentcore.New(agentcore.Options{Endpoint: srv.URL, WorkingDir: t.TempDir(), PollInterval: time.Millisecond},
		env("AWS_DEFAULT_REGION", "eu-central-1", "AWS_ACCESS_KEY_ID", accessKey, "AWS_SECRET_ACCESS_KEY", "s"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Region() != "eu-central-1" {
		t.Errorf("Region() = %q, want eu-central-1", p.Region())
	}
	sb := create(t, p, spec("run-env"))
	if res, err := sb.Exec(t.Context(), providers.Shell("echo ok")); err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("Exec = %q, %v", res.Stdout, err)
	}

	// A key the service does not know is refused, and the refusal is readable.
	bad, err := agentcore.New(agentcore.Options{Endpoint: srv.URL, Region: "us-east-1", MaxBackoff: time.Millisecond},
		env("AWS_ACCESS_KEY_ID", "AKIDOTHER", "AWS_SECRET_ACCESS_KEY", "s"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Create(t.Context(), spec("run-badkey"))
	var apiErr *agentcore.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 403 || apiErr.Code != "UnrecognizedClientException" || apiErr.Attempts > 1 {
		t.Fatalf("Create with an unknown key = %v, want one 403 UnrecognizedClientException", err)
	}
}

func TestCreateRequest(t *testing.T) {
	srv := newServer(t)
	srv.Interpreters = []string{agentcore.DefaultCodeInterpreter, "ci_custom-Ab12Cd34Ef"}
	for _, tc := range []struct {
		name        string
		opts        func(*agentcore.Options)
		ttl         time.Duration
		labels      bool
		wantTimeout int
		wantInterp  string
		wantExpires time.Time
	}{
		{name: "SpecTTL", ttl: 20 * time.Minute, labels: true, wantTimeout: 1200, wantExpires: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
		{name: "DefaultTimeout", wantTimeout: 3600},
		{name: "OptionTimeout", opts: func(o *agentcore.Options) { o.SessionTimeout = 2 * time.Hour }, wantTimeout: 7200},
		{name: "ShortTTLRaisedToMinimum", ttl: 10 * time.Second, wantTimeout: 60},
		{name: "LongTTLCapped", ttl: 100 * time.Hour, wantTimeout: 28800},
		{name: "CustomInterpreter", opts: func(o *agentcore.Options) { o.CodeInterpreter = "ci_custom-Ab12Cd34Ef" }, wantTimeout: 3600, wantInterp: "ci_custom-Ab12Cd34Ef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec("run-" + strings.ToLower(tc.name))
			s.TTL = tc.ttl
			if !tc.labels {
				s.Labels = nil
			}
			start := time.Now()
			sb := create(t, newProvider(t, srv, tc.opts), s)
			got, ok := srv.Session(sb.ID())
			if !ok {
				t.Fatalf("the fake has no session %s", sb.ID())
			}
			runID, expires, ok := agentcore.ParseSessionName(got.Name)
			if !ok || runID != s.RunID {
				t.Errorf("session name %q parses to run id %q (ok %v), want %q", got.Name, runID, ok, s.RunID)
			}
			want := tc.wantExpires
			if want.IsZero() {
				want = start.Add(time.Duration(tc.wantTimeout) * time.Second).Truncate(time.Second)
			}
			if d := expires.Sub(want); d < -time.Second || d > 2*time.Second {
				t.Errorf("expiry in the name = %v, want about %v", expires, want)
			}
			wantInterp := firstNonEmpty(tc.wantInterp, agentcore.DefaultCodeInterpreter)
			if diff := cmp.Diff([]any{tc.wantTimeout, wantInterp, "READY"}, []any{got.TimeoutSeconds, got.Interpreter, got.Status}); diff != "" {
				t.Errorf("session (timeout, interpreter, status) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreateRefusesSnapshot(t *testing.T) {
	srv := newServer(t)
	s := spec("run-snap")
	s.Snapshot = "my-image"
	_, err := newProvider(t, srv, nil).Create(t.Context(), s)
	if !errors.Is(err, providers.ErrNotSupported) || !strings.Contains(err.Error(), `snapshot "my-image"`) {
		t.Fatalf("Create(Snapshot) = %v, want ErrNotSupported naming the snapshot", err)
	}
	if n := srv.Count("start"); n != 0 {
		t.Errorf("start calls = %d, want 0", n)
	}
}

func TestSessionName(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		runID, wantRunID string
	}{
		{"20261130T120000Z-1a2b3c4d", "20261130T120000Z-1a2b3c4d"},
		{"gh-77/attempt 2", "gh-77_attempt_2"},
		{"", ""},
		{strings.Repeat("r", 200), strings.Repeat("r", 100-len("talkops-1893553445-12345678-"))},
	} {
		name := agentcore.SessionName(tc.runID, exp)
		if len(name) > 100 {
			t.Errorf("SessionName(%q) = %d characters, want at most 100", tc.runID, len(name))
		}
		runID, expires, ok := agentcore.ParseSessionName(name)
		if !ok || runID != tc.wantRunID || !expires.Equal(exp) {
			t.Errorf("ParseSessionName(SessionName(%q)) = %q, %v, %v; want %q, %v, true", tc.runID, runID, expires, ok, tc.wantRunID, exp)
		}
	}
	if a, b := agentcore.SessionName("r", exp), agentcore.SessionName("r", exp); a == b {
		t.Errorf("two names for the same run are equal (%q): the random part is missing", a)
	}
	for _, foreign := range []string{"", "my-session", "talkops-", "talkops-soon-12345678-r", "talkops-1893553445-xyz-r", "talkops-1893553445-1234567g-r"} {
		if _, _, ok := agentcore.ParseSessionName(foreign); ok {
			t.Errorf("ParseSessionName(%q) ok, want false", foreign)
		}
	}
}

func TestFaults(t *testing.T) {
	cloudtest.FaultTable[*agentcorefake.Server, agentcore.Options]{
		NewServer: func(t *testing.T) *agentcorefake.Server {
			srv := newServer(t)
			srv.ReadyAfter = 1
			return srv
		},
		NewProvider: func(t *testing.T, srv *agentcorefake.Server, mod func(*agentcore.Options)) providers.Provider {
			return newProvider(t, srv, func(o *agentcore.Options) { o.ReadyTimeout = 10 * time.Second; mod(o) })
		},
		Ledger: func(srv *agentcorefake.Server) (int, []string) { l := srv.Ledger(); return l.Started, l.Alive },
		Use: func(t *testing.T, sb providers.Sandbox) {
			if _, err := sb.Exec(t.Context(), providers.Shell("true")); err != nil {
				t.Fatal(err)
			}
		},
	}.Run(t, []cloudtest.FaultCase[*agentcorefake.Server, agentcore.Options]{
		{
			Name: "StartThrottledThenServed",
			Setup: func(s *agentcorefake.Server) {
				s.Faults.Inject("start", 1, fakekit.Fault{Status: 429})
				s.Faults.Inject("start", 2, fakekit.Fault{Status: 500})
			},
			WantCall: map[string]int{"start": 3, "stop": 1},
		},
		{
			Name: "StartThrottledAdaptive",
			// The adaptive retryer slows the next requests down after a throttle.
			Options: func(o *agentcore.Options) { o.RetryMode = "adaptive"; o.ReadyTimeout = 20 * time.Second },
			Setup: func(s *agentcorefake.Server) {
				s.Faults.Inject("start", 1, fakekit.Fault{Status: 429, Body: `{"message":"Rate exceeded"}`})
			},
			WantCall: map[string]int{"start": 2, "stop": 1},
		},
		{
			Name: "StartAlways503",
			Setup: func(s *agentcorefake.Server) {
				s.Faults.InjectAll("start", fakekit.Fault{Status: 503, Body: `{"message":"capacity exhausted"}`})
			},
			WantErr:  "StartCodeInterpreterSession: HTTP 503: ServiceUnavailableException: capacity exhausted (request id ",
			WantCall: map[string]int{"start": 5, "stop": 0},
		},
		{
			Name: "StartAccessDeniedNotRetried",
			Setup: func(s *agentcorefake.Server) {
				s.Faults.InjectAll("start", fakekit.Fault{Status: 403, Body: `{"message":"not authorized to perform: bedrock-agentcore:StartCodeInterpreterSession"}`})
			},
			WantErr:  "HTTP 403: AccessDeniedException: not authorized to perform: bedrock-agentcore:StartCodeInterpreterSession",
			WantCall: map[string]int{"start": 1},
		},
		{
			Name:     "UnknownInterpreter",
			Options:  func(o *agentcore.Options) { o.CodeInterpreter = "ci_missing-0000000000" },
			WantErr:  "HTTP 404: ResourceNotFoundException: Code interpreter ci_missing-0000000000 not found",
			WantCall: map[string]int{"start": 1},
		},
		{
			Name:     "NeverReady",
			Options:  func(o *agentcore.Options) { o.ReadyTimeout = 300 * time.Millisecond },
			Setup:    func(s *agentcorefake.Server) { s.NeverReady = true },
			WantErr:  "not READY within 300ms",
			WantCall: map[string]int{"start": 1, "stop": 1},
		},
		{
			Name:    "NeverReadyStopFails",
			Options: func(o *agentcore.Options) { o.ReadyTimeout = 300 * time.Millisecond },
			Setup: func(s *agentcorefake.Server) {
				s.NeverReady = true
				s.Faults.InjectAll("stop", fakekit.Fault{Status: 500})
			},
			WantErr:  "deleting the half-created sandbox failed",
			WantCall: map[string]int{"start": 1, "stop": 5},
			Alive:    1,
		},
		{
			Name:     "GetFailsWhileWaiting",
			Setup:    func(s *agentcorefake.Server) { s.Faults.InjectAll("get", fakekit.Fault{Status: 502}) },
			WantErr:  "GetCodeInterpreterSession: HTTP 502: InternalServerException",
			WantCall: map[string]int{"start": 1, "get": 5, "stop": 1},
		},
		{
			Name:     "ProbeRetried",
			Setup:    func(s *agentcorefake.Server) { s.Faults.Inject("invoke:executeCommand", 1, fakekit.Fault{Status: 500}) },
			WantCall: map[string]int{"start": 1, "invoke:executeCommand": 3, "stop": 1},
		},
		{
			Name:     "ProbeFails",
			Setup:    func(s *agentcorefake.Server) { s.Faults.InjectAll("invoke:executeCommand", fakekit.Fault{Status: 503}) },
			WantErr:  "probe session",
			WantCall: map[string]int{"start": 1, "invoke:executeCommand": 5, "stop": 1},
		},
	})
}

// TestCreateCancelledInFlight: a cancel while the start is on its way leaves no session
// behind: the provider finds it by its unique name and stops it.
func TestCreateCancelledInFlight(t *testing.T) {
	srv := newServer(t)
	srv.StartDelay = 10 * time.Second
	p := newProvider(t, srv, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for srv.Ledger().Started == 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err := p.Create(ctx, spec("run-cancel"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Create() = %v, want context.Canceled", err)
	}
	if l := srv.Ledger(); l.Started != 1 || len(l.Alive) != 0 {
		t.Errorf("ledger = %+v, want the one started session stopped", l)
	}
}

func TestExecRetries(t *testing.T) {
	srv := newServer(t)
	sb := create(t, newProvider(t, srv, nil), spec("run-exec"))
	n := func() int { return srv.Count("invoke:executeCommand") }

	// A 5xx before the command ran: the SDK retries and the command runs once.
	cloudtest.ExecRunsOnce(t, sb, &srv.Faults, srv.Count, "invoke:executeCommand", fakekit.Fault{Status: 503})

	// Throttling is retried too; so is a 5xx on writeFiles (an upload is idempotent).
	srv.Faults.Inject("invoke:executeCommand", n()+1, fakekit.Fault{Status: 429, Body: `{"message":"Rate exceeded"}`})
	srv.Faults.Inject("invoke:writeFiles", srv.Count("invoke:writeFiles")+1, fakekit.Fault{Status: 500})
	tgz := cloudtest.TarGz(t, archive.Entry{Name: "t.txt", Body: []byte("t"), Mode: 0o644})
	if err := sb.Upload(t.Context(), ".", bytes.NewReader(tgz)); err != nil {
		t.Fatalf("Upload after a 500 on writeFiles = %v", err)
	}
	res, err := sb.Exec(t.Context(), providers.Shell("cat t.txt"))
	if err != nil || string(res.Stdout) != "t" {
		t.Fatalf("Exec after a 429 = %q, %v", res.Stdout, err)
	}

	// A 5xx after the command ran: the retried delivery finds its guard and stops.
	srv.FaultsAfterRun.Inject("invoke:executeCommand", srv.FaultsAfterRun.Calls("invoke:executeCommand")+1, fakekit.Fault{Status: 500})
	before := n()
	_, err = sb.Exec(t.Context(), providers.Shell("echo y >> n"))
	if !errors.Is(err, agentcore.ErrDuplicateDelivery) {
		t.Fatalf("Exec whose answer was lost = %v, want ErrDuplicateDelivery", err)
	}
	if got := n() - before; got != 2 {
		t.Errorf("executeCommand calls = %d, want 2 (the lost one and its retry)", got)
	}
	res, err = sb.Exec(t.Context(), providers.Shell("cat n"))
	if err != nil || string(res.Stdout) != "x\ny\n" {
		t.Errorf("n = %q, %v; want the second command run exactly once", res.Stdout, err)
	}

	// An exception inside the event stream is an error that names it.
	srv.InjectStreamError("invoke:executeCommand", n()+1, agentcorefake.StreamError{Member: "internalServerException", Message: "sandbox agent crashed"})
	_, err = sb.Exec(t.Context(), providers.Shell("true"))
	if err == nil || !strings.Contains(err.Error(), "InternalServerException: sandbox agent crashed") {
		t.Errorf("Exec with a stream exception = %v, want InternalServerException: sandbox agent crashed", err)
	}
}

func TestSessionEndedByService(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := create(t, p, spec("run-expired"))
	srv.Terminate(sb.ID()) // sessionTimeoutSeconds passed
	_, err := sb.Exec(t.Context(), providers.Shell("true"))
	if err == nil || !strings.Contains(err.Error(), "HTTP 404: ResourceNotFoundException") {
		t.Errorf("Exec on an ended session = %v, want the ResourceNotFoundException", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("Close of an ended session = %v, want nil", err)
	}
	if _, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{}); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Attach(ended) = %v, want ErrNotFound", err)
	}
}

func TestCloseStopsAndRetries(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := create(t, p, spec("run-close"))
	srv.Faults.InjectAll("stop", fakekit.Fault{Status: 503})
	err := sb.Close(t.Context())
	var apiErr *agentcore.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Attempts != 5 {
		t.Fatalf("Close() = %v, want the 503 after 5 attempts", err)
	}
	srv.Faults.Clear("stop")
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	if got, _ := srv.Session(sb.ID()); got.Status != "TERMINATED" {
		t.Errorf("status = %q, want TERMINATED", got.Status)
	}
	// AgentCore refuses to stop a terminated session; Delete treats that as done.
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Errorf("Delete(terminated) = %v, want nil", err)
	}
	if err := p.Delete(t.Context(), "01UNKNOWN0000000000000000"); err != nil {
		t.Errorf("Delete(unknown) = %v, want nil", err)
	}
}

func TestListFiltersNames(t *testing.T) {
	srv := newServer(t)
	srv.MaxPage = 2 // make List page
	p := newProvider(t, srv, nil)
	var ours []string
	for _, run := range []string{"run-a", "run-b", "run-c"} {
		ours = append(ours, create(t, p, spec(run)).ID())
	}
	gone := create(t, p, spec("run-gone"))
	if err := gone.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A session someone else started, in the same account and interpreter.
	c := bedrockagentcore.New(bedrockagentcore.Options{Region: "us-west-2", BaseEndpoint: &srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, "s", "")})
	foreign, err := c.StartCodeInterpreterSession(t.Context(), &bedrockagentcore.StartCodeInterpreterSessionInput{
		CodeInterpreterIdentifier: &[]string{agentcore.DefaultCodeInterpreter}[0], Name: &[]string{"data-science"}[0]})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, in := range infos {
		got[in.ID] = in.RunID + "/" + in.State + "/" + in.ExpiresAt.Format(time.RFC3339) + "/" + in.Labels[providers.LabelCreatedBy]
		if in.CreatedAt.IsZero() || in.Provider != agentcore.Name {
			t.Errorf("List() entry %+v lacks CreatedAt or Provider", in)
		}
	}
	want := map[string]string{}
	for i, id := range ours {
		want[id] = []string{"run-a", "run-b", "run-c"}[i] + "/READY/2030-01-02T03:04:05Z/talkops"
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}
	if n := srv.Count("list"); n != 2 {
		t.Errorf("list calls = %d, want 2 pages", n)
	}
	_, _ = c.StopCodeInterpreterSession(t.Context(), &bedrockagentcore.StopCodeInterpreterSessionInput{
		CodeInterpreterIdentifier: &[]string{agentcore.DefaultCodeInterpreter}[0], SessionId: foreign.SessionId})
}

func TestUploadRequests(t *testing.T) {
	big := make([]byte, 6000)
	_, _ = rand.Read(big) // incompressible: the archive is bigger than the chunk
	tgz, err := archive.TarGz(
		archive.Entry{Name: "d/x.txt", Body: []byte("x"), Mode: 0o644},
		archive.Entry{Name: "d/big.bin", Body: big, Mode: 0o600},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		chunk int
		want  []string
	}{
		{"OneRequest", 0, []string{"invoke:writeFiles", "invoke:executeCommand"}},
		{"Chunked", 2048, []string{"invoke:writeFiles", "invoke:writeFiles", "invoke:writeFiles", "invoke:writeFiles", "invoke:executeCommand"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			sb := create(t, newProvider(t, srv, func(o *agentcore.Options) { o.UploadChunk = tc.chunk }), spec("run-up"))
			eps := cloudtest.Endpoints(cloudtest.UploadCalls(t, sb, "proj", tgz, srv.Calls))
			if diff := cmp.Diff(tc.want, eps); diff != "" {
				t.Errorf("Upload requests mismatch (-want +got):\n%s", diff)
			}
			rc, err := sb.Download(t.Context(), "proj/d/big.bin")
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if got, _ := io.ReadAll(rc); !bytes.Equal(got, big) {
				t.Errorf("Download(proj/d/big.bin) = %d bytes differing from the %d uploaded", len(got), len(big))
			}
			// The listing shows the guards and the listing command's own files, nothing else.
			res, err := sb.Exec(t.Context(), providers.Shell("ls -A "+agentcore.Home(sb)+"/.talkops | grep -v -e '^once$' -e '^[.]talkops-'"))
			if err != nil || len(res.Stdout) != 0 {
				t.Errorf("scratch directory after Upload and Download holds %q, %v; want the archive parts and the download copy removed", res.Stdout, err)
			}
		})
	}
	t.Run("TarFails", func(t *testing.T) {
		srv := newServer(t)
		sb := create(t, newProvider(t, srv, nil), spec("run-up-bad"))
		err := sb.Upload(t.Context(), "proj", strings.NewReader("not a gzip stream"))
		if err == nil || !strings.Contains(err.Error(), "tar -xzf into") {
			t.Errorf("Upload(garbage) = %v, want the tar failure", err)
		}
	})
}

func TestFiles(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, func(o *agentcore.Options) { o.UploadChunk = 4096 })
	sb := create(t, p, spec("run-files"))
	home := agentcore.Home(sb)
	if want, _ := srv.Session(sb.ID()); home != want.Home {
		t.Fatalf("probed working directory = %q, want the session's %q", home, want.Home)
	}
	binary := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0x80}
	replacement := []byte("already \uFFFD here\n") // valid UTF-8 with U+FFFD: read exactly
	large := bytes.Repeat([]byte("0123456789abcdef"), 1500)
	for _, tc := range []struct {
		name, path string
		data       []byte
	}{
		{"OutsideHomeBinary", filepath.Join(sb.WorkDir(), "bin", "b.dat"), binary},
		{"InsideHome", home + "/notes/n.txt", []byte("inside\n")},
		{"InsideHomeReplacementChar", home + "/r.txt", replacement},
		{"OutsideHomeChunked", filepath.Join(sb.WorkDir(), "large.txt"), large},
		{"InsideHomeChunked", home + "/large.txt", large},
		{"Empty", filepath.Join(sb.WorkDir(), "empty"), []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := agentcore.WriteFile(t.Context(), sb, tc.path, tc.data); err != nil {
				t.Fatalf("WriteFile(%s) = %v", tc.path, err)
			}
			onDisk, err := os.ReadFile(tc.path)
			if err != nil || !bytes.Equal(onDisk, tc.data) {
				t.Fatalf("file on disk = %d bytes, %v; want the %d written", len(onDisk), err, len(tc.data))
			}
			rc, err := sb.Download(t.Context(), tc.path)
			if err != nil {
				t.Fatalf("Download(%s) = %v", tc.path, err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(got, tc.data) {
				t.Errorf("Download(%s) = %q, want %q", tc.path, clipBytes(got), clipBytes(tc.data))
			}
		})
	}
	for _, p := range []string{"missing.txt", home + "/missing.txt"} {
		if _, err := sb.Download(t.Context(), p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Download(%s) = %v, want fs.ErrNotExist", p, err)
		}
	}
	for _, p := range []string{sb.WorkDir(), home + "/notes"} {
		if _, err := sb.Download(t.Context(), p); err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Download(directory %s) = %v, want a 'not a regular file' error", p, err)
		}
	}
	// Large stdin is staged with chunked writeFiles.
	res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"wc", "-c"}, Stdin: bytes.NewReader(large)})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "24000" {
		t.Errorf("Exec(wc -c) with 24000 bytes of stdin = %q, %v", res.Stdout, err)
	}
}

func clipBytes(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func TestAttach(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	for _, id := range []string{"", "01NOSUCHSESSION0000000000"} {
		if _, err := p.Attach(t.Context(), id, providers.AttachOptions{}); !errors.Is(err, providers.ErrNotFound) {
			t.Errorf("Attach(%q) = %v, want ErrNotFound", id, err)
		}
	}
	srv.ReadyAfter = 1000
	c := bedrockagentcore.New(bedrockagentcore.Options{Region: "us-west-2", BaseEndpoint: &srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, "s", "")})
	starting, err := c.StartCodeInterpreterSession(t.Context(), &bedrockagentcore.StartCodeInterpreterSessionInput{
		CodeInterpreterIdentifier: &[]string{agentcore.DefaultCodeInterpreter}[0]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Attach(t.Context(), *starting.SessionId, providers.AttachOptions{}); !errors.Is(err, providers.ErrNotFound) || !strings.Contains(err.Error(), "not READY") {
		t.Errorf("Attach(starting session) = %v, want ErrNotFound saying it is not READY", err)
	}
}

// TestAttachWorkDir: --sandbox-id with a configured working_dir runs commands there, not
// in the provider's default directory.
func TestAttachWorkDir(t *testing.T) {
	srv := newServer(t)
	cloudtest.AttachWorkDir(t, newProvider(t, srv, nil), cloudtest.Spec("run-attach-wd"))
}
