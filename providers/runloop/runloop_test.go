package runloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
	"github.com/talkops/talkops/providers/internal/cloudtest"
	"github.com/talkops/talkops/providers/providertest"
	"github.com/talkops/talkops/providers/runloop"
	"github.com/talkops/talkops/providers/runloop/runloopfake"
)

const key = "ak_test_runloop"

var (
	env  = cloudtest.Env
	spec = cloudtest.Spec
)

func newServer(t *testing.T) *runloopfake.Server {
	t.Helper()
	srv := runloopfake.New(key)
	srv.ReadyAfter, srv.Hold = 1, time.Second
	t.Cleanup(srv.Close)
	return srv
}

func newProvider(t *testing.T, srv *runloopfake.Server, mod func(*runloop.Options)) *runloop.Provider {
	t.Helper()
	opts := runloop.Options{APIURL: srv.URL, ReadyTimeout: 10 * time.Second, RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir(), TempDir: t.TempDir(), Retry: cloudtest.FastRetry}}
	if mod != nil {
		mod(&opts)
	}
	p, err := runloop.New(opts, env("RUNLOOP_API_KEY", key))
	if err != nil {
		t.Fatalf("runloop.New: %v", err)
	}
	return p
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		srv := runloopfake.New(key)
		srv.ReadyAfter, srv.Hold = 1, time.Second
		return cloudtest.FakeHarness{Provider: func(t *testing.T) providers.Provider { return newProvider(t, srv, nil) },
			Ledger: func() []string { return srv.Ledger().Alive }, Stop: srv.Close}, nil
	})
}

func TestNewConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    runloop.Options
		env     func(string) string
		wantVar string
	}{
		{"NoKey", runloop.Options{}, env(), "RUNLOOP_API_KEY"},
		{"BadURL", runloop.Options{}, env("RUNLOOP_API_KEY", "k", "RUNLOOP_BASE_URL", "ftp://x"), "RUNLOOP_BASE_URL"},
		{"BadSize", runloop.Options{ResourceSize: "HUGE"}, env("RUNLOOP_API_KEY", "k"), "one of X_SMALL, SMALL"},
		{"BadArch", runloop.Options{Architecture: "riscv"}, env("RUNLOOP_API_KEY", "k"), "architecture"},
		{"KeepAliveTooLong", runloop.Options{KeepAlive: 49 * time.Hour}, env("RUNLOOP_API_KEY", "k"), "keep_alive"},
		{"RelativeWorkDir", runloop.Options{RemoteOptions: httpapi.RemoteOptions{WorkingDir: "x"}}, env("RUNLOOP_API_KEY", "k"), "working_dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runloop.New(tc.opts, tc.env)
			cloudtest.WantConfigError(t, err, tc.wantVar)
		})
	}
}

func TestCreateRequest(t *testing.T) {
	srv := newServer(t)
	srv.Blueprints = map[string]string{"talkops-aws-agent": "build_complete", "broken": "failed"}
	for _, tc := range []struct {
		name     string
		opts     func(*runloop.Options)
		snapshot string
		ttl      time.Duration
		want     runloopfake.Devbox
		wantErr  string
	}{
		{name: "Default", ttl: 20 * time.Minute, want: runloopfake.Devbox{KeepAlive: 1200}},
		{name: "BlueprintName", snapshot: "talkops-aws-agent", ttl: 90 * time.Second, want: runloopfake.Devbox{BlueprintName: "talkops-aws-agent", KeepAlive: 90}},
		{name: "BlueprintID", snapshot: "bpt_abc", want: runloopfake.Devbox{BlueprintID: "bpt_abc", KeepAlive: 3600}},
		{name: "SnapshotID", snapshot: "snp_abc", ttl: 100 * time.Hour, want: runloopfake.Devbox{SnapshotID: "snp_abc", KeepAlive: 172800}},
		{name: "Size", opts: func(o *runloop.Options) { o.ResourceSize = "LARGE" }, want: runloopfake.Devbox{ResourceSize: "LARGE", KeepAlive: 3600}},
		{name: "MissingBlueprint", snapshot: "nope", wantErr: `blueprint "nope" does not exist in this account`},
		{name: "FailedBlueprint", snapshot: "broken", wantErr: `blueprint "broken" has no finished build`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec("run-" + strings.ToLower(tc.name))
			s.Snapshot, s.TTL = tc.snapshot, tc.ttl
			sb, err := newProvider(t, srv, tc.opts).Create(t.Context(), s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Create() = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			defer sb.Close(context.Background())
			got, _ := srv.Devbox(sb.ID())
			want := tc.want
			want.ID, want.Name, want.Status, want.Metadata = sb.ID(), got.Name, "running", s.Labels
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("devbox mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	cloudtest.FaultTable[*runloopfake.Server, runloop.Options]{
		NewServer: func(t *testing.T) *runloopfake.Server {
			srv := newServer(t)
			srv.Hold = 300 * time.Millisecond
			return srv
		},
		NewProvider: func(t *testing.T, srv *runloopfake.Server, mod func(*runloop.Options)) providers.Provider {
			return newProvider(t, srv, func(o *runloop.Options) { o.ReadyTimeout = 2 * time.Second; mod(o) })
		},
		Ledger: func(srv *runloopfake.Server) (int, []string) { l := srv.Ledger(); return l.Created, l.Alive },
	}.Run(t, []cloudtest.FaultCase[*runloopfake.Server, runloop.Options]{
		{
			Name: "Create500IsIdempotent",
			Setup: func(s *runloopfake.Server) {
				s.Faults.Inject("create", 1, fakekit.Fault{Status: 500})
				s.Faults.Inject("create", 2, fakekit.Fault{Status: 429, RetryAfter: "0"})
			},
			WantCall: map[string]int{"create": 3, "shutdown": 1},
		},
		{
			// Runloop created the devbox, but the answer was lost: the retry carries the
			// same x-request-id, so it gets that devbox instead of a second one.
			Name:     "CreateLate500IsIdempotent",
			Setup:    func(s *runloopfake.Server) { s.Faults.Inject("create", 1, fakekit.Fault{Status: 500, Late: true}) },
			WantCall: map[string]int{"create": 2, "shutdown": 1},
		},
		{
			Name: "CreateAlways503",
			Setup: func(s *runloopfake.Server) {
				s.Faults.InjectAll("create", fakekit.Fault{Status: 503, Body: `{"message":"capacity exhausted in region"}`})
			},
			WantErr:  "503 Service Unavailable: capacity exhausted in region [gave up after 4 attempts]",
			WantCall: map[string]int{"create": 4, "shutdown": 0},
		},
		{
			Name:     "NeverReady",
			Setup:    func(s *runloopfake.Server) { s.NeverReady = true },
			WantErr:  `not running within 2s (last status "provisioning")`,
			WantCall: map[string]int{"create": 1, "shutdown": 1},
		},
		{
			Name:     "Failure",
			Setup:    func(s *runloopfake.Server) { s.FailWith = "out_of_memory" },
			WantErr:  "is failure: out_of_memory",
			WantCall: map[string]int{"create": 1, "shutdown": 1},
		},
		{
			Name: "NeverReadyShutdownFails",
			Setup: func(s *runloopfake.Server) {
				s.NeverReady = true
				s.Faults.InjectAll("shutdown", fakekit.Fault{Status: 500})
			},
			WantErr:  "deleting the half-created sandbox failed",
			WantCall: map[string]int{"create": 1, "shutdown": 4},
			Alive:    1,
		},
	})
}

func TestExecRetriesAreIdempotent(t *testing.T) {
	srv := newServer(t)
	sb := cloudtest.Create(t, newProvider(t, srv, nil), spec("run-exec"))
	// A 502 and a 500 after the command started: the retries carry the same command_id,
	// so the command runs once.
	cloudtest.ExecRunsOnce(t, sb, &srv.Faults, srv.Count, "execute", fakekit.Fault{Status: 502, Late: true}, fakekit.Fault{Status: 500, Late: true})
}

func TestLongCommandAndLongOutput(t *testing.T) {
	srv := newServer(t)
	srv.Hold = 200 * time.Millisecond
	sb := cloudtest.Create(t, newProvider(t, srv, nil), spec("run-long"))
	before := srv.Count("exec-wait")
	res, err := sb.Exec(t.Context(), providers.Shell("sleep 1; seq 1 250; seq 1 150 >&2"))
	if err != nil {
		t.Fatal(err)
	}
	var want, wantErr strings.Builder
	for i := 1; i <= 250; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	for i := 1; i <= 150; i++ {
		wantErr.WriteString(strconv.Itoa(i) + "\n")
	}
	if string(res.Stdout) != want.String() || string(res.Stderr) != wantErr.String() || res.Truncated {
		t.Errorf("Exec(seq 250) = %d stdout bytes, %d stderr bytes, truncated %v; want the whole output past Runloop's last 100 lines", len(res.Stdout), len(res.Stderr), res.Truncated)
	}
	if srv.Count("exec-wait") == before {
		t.Error("a command longer than the optimistic wait did not use executions/{id}/wait_for_status")
	}
}

func TestCloseShutsDownAndRetries(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb, err := p.Create(t.Context(), spec("run-close"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Faults.InjectAll("shutdown", fakekit.Fault{Status: 503})
	if err := sb.Close(t.Context()); err == nil || httpapi.StatusCode(err) != 503 {
		t.Fatalf("Close() = %v, want the 503", err)
	}
	srv.Faults.Clear("shutdown")
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	if got, _ := srv.Devbox(sb.ID()); got.Status != "shutdown" {
		t.Errorf("status = %q, want shutdown", got.Status)
	}
	// Shutting down again is refused by Runloop; Delete treats it as done.
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Errorf("Delete(shut down) = %v, want nil", err)
	}
	if err := p.Delete(t.Context(), "dbx_unknown"); err != nil {
		t.Errorf("Delete(unknown) = %v, want nil", err)
	}
}

func TestListFiltersMetadata(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	var ours []string
	for _, run := range []string{"run-a", "run-b", "run-c"} {
		ours = append(ours, cloudtest.Create(t, p, spec(run)).ID())
	}
	foreign := spec("x")
	foreign.Labels = map[string]string{"team": "other"}
	cloudtest.Create(t, p, foreign)
	srv.Suspend(ours[2])
	// A create whose client died before it read the answer: nobody reads the status,
	// so the devbox stays provisioning.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/devboxes",
		strings.NewReader(`{"name":"orphan","metadata":{"talkops.created-by":"talkops","talkops.run-id":"run-d"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var orphan struct{ ID, Status string }
	err = json.NewDecoder(resp.Body).Decode(&orphan)
	resp.Body.Close()
	if err != nil || orphan.Status != "provisioning" {
		t.Fatalf("raw create: %+v, %v; want a provisioning devbox", orphan, err)
	}
	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, in := range infos {
		got[in.ID] = in.RunID + "/" + in.State
	}
	want := map[string]string{ours[0]: "run-a/running", ours[1]: "run-b/running", ours[2]: "run-c/suspended", orphan.ID: "run-d/provisioning"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}
}

func TestUploadIsTwoRequests(t *testing.T) {
	srv := newServer(t)
	sb := cloudtest.Create(t, newProvider(t, srv, nil), spec("run-up"))
	tgz := cloudtest.TarGz(t, archive.Entry{Name: "d/x.txt", Body: []byte("x"), Mode: 0o644})
	eps := cloudtest.Endpoints(cloudtest.UploadCalls(t, sb, "proj", tgz, srv.Calls))
	if diff := cmp.Diff([]string{"upload", "execute"}, eps); diff != "" {
		t.Errorf("Upload requests mismatch (-want +got):\n%s", diff)
	}
}

func TestAttachResumesSuspended(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb, err := p.Create(t.Context(), spec("run-att"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	srv.Suspend(sb.ID())
	att, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatalf("Attach(suspended) = %v", err)
	}
	if err := att.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv.Devbox(sb.ID()); got.Status != "running" {
		t.Errorf("status after Attach and Close = %q, want running", got.Status)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{}); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Attach(shut down) = %v, want ErrNotFound", err)
	}
}

// TestDownloadMissingFile: a missing file is recognised by its status, and only a 400
// that names a missing file falls back on the wording; other refusals that happen to say
// "not found" stay errors.
func TestDownloadMissingFile(t *testing.T) {
	srv := newServer(t)
	sb := cloudtest.Create(t, newProvider(t, srv, nil), spec("run-dl"))
	for _, tc := range []struct {
		name        string
		fault       *fakekit.Fault
		wantMissing bool
		wantStatus  int
	}{
		{name: "404WithoutWording", wantMissing: true, wantStatus: 404},
		{name: "400NamingMissingFile", fault: &fakekit.Fault{Status: 400, Body: `{"message":"File not found: /nope"}`}, wantMissing: true, wantStatus: 400},
		{name: "403UnknownKey", fault: &fakekit.Fault{Status: 403, Body: `{"message":"API key not found"}`}, wantStatus: 403},
		{name: "400DevboxGone", fault: &fakekit.Fault{Status: 400, Body: `{"message":"Devbox dbx_x not found or not running"}`}, wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				srv.Faults.Inject("download", srv.Faults.Calls("download")+1, *tc.fault)
			}
			_, err := sb.Download(t.Context(), "/nonexistent-"+tc.name)
			if errors.Is(err, fs.ErrNotExist) != tc.wantMissing || httpapi.StatusCode(err) != tc.wantStatus {
				t.Errorf("Download() = %v; want missing file %v, status %d", err, tc.wantMissing, tc.wantStatus)
			}
		})
	}
}

func TestCommandIDIsUUIDv7(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	for range 3 {
		if id := runloop.UUID7(); !re.MatchString(id) {
			t.Errorf("uuid7() = %q, want a version 7 UUID", id)
		}
	}
}

// TestLive runs the contract suite against Runloop when RUNLOOP_API_KEY is set and
// -short is not.
func TestLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live test skipped in -short mode")
	}
	if os.Getenv("RUNLOOP_API_KEY") == "" {
		t.Skip("RUNLOOP_API_KEY is not set; skipping the live Runloop contract test")
	}
	providertest.Run(t, func(context.Context, *testing.T) (providertest.Harness, error) {
		return cloudtest.LiveHarness{New: func() (providers.Provider, error) { return runloop.New(runloop.Options{}, os.Getenv) }}, nil
	})
}

// TestAttachWorkDir: --sandbox-id with a configured working_dir runs commands there, not
// in the provider's default directory.
func TestAttachWorkDir(t *testing.T) {
	srv := newServer(t)
	cloudtest.AttachWorkDir(t, newProvider(t, srv, nil), spec("run-attach-wd"))
}
