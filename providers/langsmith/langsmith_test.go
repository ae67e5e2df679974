package langsmith_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
	"github.com/talkops/talkops/providers/internal/cloudtest"
	"github.com/talkops/talkops/providers/langsmith"
	"github.com/talkops/talkops/providers/langsmith/langsmithfake"
	"github.com/talkops/talkops/providers/providertest"
)

const key = "lsv2_pt_test"

var (
	env  = cloudtest.Env
	spec = cloudtest.Spec
)

func newServer(t *testing.T) *langsmithfake.Server {
	t.Helper()
	srv := langsmithfake.New(key)
	srv.ReadyAfter = 2
	t.Cleanup(srv.Close)
	return srv
}

func newProvider(t *testing.T, srv *langsmithfake.Server, mod func(*langsmith.Options)) *langsmith.Provider {
	t.Helper()
	opts := langsmith.Options{APIURL: srv.APIURL(), PollInterval: 5 * time.Millisecond, ReadyTimeout: 10 * time.Second, RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir(), TempDir: t.TempDir(), Retry: cloudtest.FastRetry}}
	if mod != nil {
		mod(&opts)
	}
	p, err := langsmith.New(opts, env("LANGSMITH_API_KEY", key))
	if err != nil {
		t.Fatalf("langsmith.New: %v", err)
	}
	return p
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		srv := langsmithfake.New(key)
		srv.ReadyAfter = 2
		return cloudtest.FakeHarness{Provider: func(t *testing.T) providers.Provider { return newProvider(t, srv, nil) },
			Ledger: func() []string { return srv.Ledger().Alive }, Stop: srv.Close}, nil
	})
}

func TestNewConfig(t *testing.T) {
	if _, err := langsmith.New(langsmith.Options{}, env()); !errors.Is(err, providers.ErrConfig) || !strings.Contains(err.Error(), "LANGSMITH_API_KEY is not set") {
		t.Errorf("New() without a key = %v, want a config error naming LANGSMITH_API_KEY", err)
	}
	if _, err := langsmith.New(langsmith.Options{}, env("LANGSMITH_API_KEY", "k", "LANGSMITH_ENDPOINT", "not a url")); !errors.Is(err, providers.ErrConfig) {
		t.Errorf("New() with a bad endpoint = %v, want a config error", err)
	}
	// The key and endpoint are read in the documented order, and the tenant is sent.
	srv := newServer(t)
	srv.APIKey = "sandbox-key"
	p, err := langsmith.New(langsmith.Options{PollInterval: time.Millisecond, RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir()}},
		env("LANGSMITH_SANDBOX_API_KEY", "sandbox-key", "LANGSMITH_API_KEY", "other", "LANGSMITH_ENDPOINT", srv.URL+"/v2/sandboxes/"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(t.Context(), spec("run-env"))
	if err != nil {
		t.Fatalf("Create with LANGSMITH_SANDBOX_API_KEY: %v", err)
	}
	sb.Close(context.Background())
}

func TestCreateRequest(t *testing.T) {
	srv := newServer(t)
	srv.AddSnapshot("talkops-aws-agent", "ready")
	idReady := srv.AddSnapshot("other", "ready")
	for _, tc := range []struct {
		name    string
		opts    func(*langsmith.Options)
		spec    func(providers.Spec) providers.Spec
		want    langsmithfake.Sandbox
		wantErr string
	}{
		{name: "Default", want: langsmithfake.Sandbox{IdleTTLSeconds: 1200, DeleteAfterStop: 60}},
		{name: "TTLRoundsUp", spec: func(s providers.Spec) providers.Spec { s.TTL = 61 * time.Second; return s }, want: langsmithfake.Sandbox{IdleTTLSeconds: 120, DeleteAfterStop: 60}},
		{name: "SnapshotName", spec: func(s providers.Spec) providers.Spec { s.Snapshot = "talkops-aws-agent"; return s }, want: langsmithfake.Sandbox{Snapshot: "talkops-aws-agent", IdleTTLSeconds: 1200, DeleteAfterStop: 60}},
		{name: "SnapshotID", spec: func(s providers.Spec) providers.Spec { s.Snapshot = idReady; return s }, want: langsmithfake.Sandbox{SnapshotID: idReady, IdleTTLSeconds: 1200, DeleteAfterStop: 60}},
		{name: "Sizes", opts: func(o *langsmith.Options) { o.VCPUs, o.MemBytes, o.DiskBytes = 2, 8<<30, 20<<30 }, want: langsmithfake.Sandbox{IdleTTLSeconds: 1200, DeleteAfterStop: 60, VCPUs: 2, MemBytes: 8 << 30, FSBytes: 20 << 30}},
		{name: "MissingSnapshot", spec: func(s providers.Spec) providers.Spec { s.Snapshot = "nope"; return s }, wantErr: "404 Not Found: Snapshot 'nope' not found (NotFound)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec("run-" + strings.ToLower(tc.name))
			if tc.spec != nil {
				s = tc.spec(s)
			}
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
			got, _ := srv.Sandbox(sb.ID())
			want := tc.want
			want.Name, want.Status, want.Labels = sb.ID(), "ready", s.Labels
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sandbox mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildsMissingSnapshot(t *testing.T) {
	srv := newServer(t)
	srv.SnapshotBuildPolls = 2
	p := newProvider(t, srv, func(o *langsmith.Options) { o.SnapshotImage = "python:3.12-slim" })
	s := spec("run-build")
	s.Snapshot = "talkops-aws-agent"
	sb, err := p.Create(t.Context(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer sb.Close(context.Background())
	snaps := srv.Snapshots()
	if len(snaps) != 1 || snaps[0].Name != "talkops-aws-agent" || snaps[0].Image != "python:3.12-slim" || snaps[0].Status != "ready" {
		t.Fatalf("snapshots = %+v, want talkops-aws-agent built from python:3.12-slim", snaps)
	}
	if got, _ := srv.Sandbox(sb.ID()); got.SnapshotID != snaps[0].ID {
		t.Errorf("sandbox booted from %q, want the built snapshot %s", got.SnapshotID, snaps[0].ID)
	}
	// A second run reuses it.
	sb2, err := p.Create(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close(context.Background())
	if n := srv.Count("snapshot-create"); n != 1 {
		t.Errorf("snapshot builds = %d, want 1", n)
	}
}

func TestFeatureDisabledVerbatim(t *testing.T) {
	srv := newServer(t)
	srv.FeatureDisabled = true
	_, err := newProvider(t, srv, nil).Create(t.Context(), spec("run-403"))
	want := "403 Forbidden: Sandbox feature is not enabled for this organization (FeatureDisabled)"
	if err == nil || !strings.Contains(err.Error(), want) || httpapi.ErrorCode(err) != "FeatureDisabled" {
		t.Fatalf("Create() = %v, want %q", err, want)
	}
	if n := srv.Count("create"); n != 1 {
		t.Errorf("create calls = %d, want 1 (a 403 is not retried)", n)
	}
}

func TestFaults(t *testing.T) {
	cloudtest.FaultTable[*langsmithfake.Server, langsmith.Options]{
		NewServer: newServer,
		NewProvider: func(t *testing.T, srv *langsmithfake.Server, mod func(*langsmith.Options)) providers.Provider {
			return newProvider(t, srv, func(o *langsmith.Options) { o.ReadyTimeout = 10 * time.Second; mod(o) })
		},
		Ledger: func(srv *langsmithfake.Server) (int, []string) { l := srv.Ledger(); return l.Created, l.Alive },
	}.Run(t, []cloudtest.FaultCase[*langsmithfake.Server, langsmith.Options]{
		{
			Name: "CreateQuotaThenOK",
			Setup: func(s *langsmithfake.Server) {
				s.Faults.Inject("create", 1, fakekit.Fault{Status: 429, RetryAfter: "0"})
				s.Faults.Inject("create", 2, fakekit.Fault{Status: 503})
			},
			WantCall: map[string]int{"create": 3, "delete": 1},
		},
		{
			Name: "CreateAlways429",
			Setup: func(s *langsmithfake.Server) {
				s.Faults.InjectAll("create", fakekit.Fault{Status: 429, RetryAfter: "0", Body: `{"detail":{"error":"QuotaExceeded","message":"Organization sandbox count limit reached (10)"}}`})
			},
			WantErr:  "429 Too Many Requests: Organization sandbox count limit reached (10) (QuotaExceeded) [gave up after 4 attempts]",
			WantCall: map[string]int{"create": 4, "delete": 0},
		},
		{
			// Creating the working directory is safe to repeat, so it is sent again even
			// after a 503 that came once it ran.
			Name:     "WorkDirLate503",
			Setup:    func(s *langsmithfake.Server) { s.Faults.Inject("execute", 1, fakekit.Fault{Status: 503, Late: true}) },
			WantCall: map[string]int{"create": 1, "execute": 2, "delete": 1},
		},
		{
			Name:     "NeverReady",
			Options:  func(o *langsmith.Options) { o.ReadyTimeout = 200 * time.Millisecond },
			Setup:    func(s *langsmithfake.Server) { s.NeverReady = true },
			WantErr:  `not ready within 200ms (last status "provisioning")`,
			WantCall: map[string]int{"create": 1, "delete": 1},
		},
		{
			Name:     "ImagePullFailed",
			Setup:    func(s *langsmithfake.Server) { s.FailWith = "ImagePull: manifest unknown" },
			WantErr:  "is failed: ImagePull: manifest unknown",
			WantCall: map[string]int{"create": 1, "delete": 1},
		},
		{
			Name:    "NeverReadyDeleteFails",
			Options: func(o *langsmith.Options) { o.ReadyTimeout = 200 * time.Millisecond },
			Setup: func(s *langsmithfake.Server) {
				s.NeverReady = true
				s.Faults.InjectAll("delete", fakekit.Fault{Status: 500})
			},
			WantErr:  "deleting the half-created sandbox failed",
			WantCall: map[string]int{"create": 1, "delete": 4},
			Alive:    1,
		},
	})
}

func TestExecFaultsAndDelete(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb, err := p.Create(t.Context(), spec("run-exec"))
	if err != nil {
		t.Fatal(err)
	}
	// A 429 means the command was not taken: retried.
	cloudtest.ExecRunsOnce(t, sb, &srv.Faults, srv.Count, "execute", fakekit.Fault{Status: 429, RetryAfter: "0"})
	// /execute takes no idempotency key: a 502 or 503 that came after the command
	// started must not run it a second time.
	for _, status := range []int{502, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			sb := cloudtest.Create(t, p, spec(fmt.Sprintf("run-exec-%d", status)))
			cloudtest.ExecNotResent(t, sb, &srv.Faults, "execute", fakekit.Fault{Status: status})
		})
	}
	srv.Faults.InjectAll("delete", fakekit.Fault{Status: 503})
	if err := sb.Close(t.Context()); httpapi.StatusCode(err) != 503 {
		t.Fatalf("Close() = %v, want the 503", err)
	}
	srv.Faults.Clear("delete")
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Errorf("Delete(deleted) = %v, want nil", err)
	}
}

func TestList(t *testing.T) {
	for _, unsupported := range []bool{false, true} {
		srv := newServer(t)
		srv.LabelFilterUnsupported = unsupported
		p := newProvider(t, srv, nil)
		sb := cloudtest.Create(t, p, spec("run-list"))
		other := spec("talkops-lookalike")
		other.Labels = map[string]string{"owner": "x"}
		cloudtest.Create(t, p, other)
		infos, err := p.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 1 || infos[0].ID != sb.ID() || infos[0].RunID != "run-list" || infos[0].ExpiresAt.IsZero() {
			t.Errorf("List() (label filter unsupported: %v) = %+v, want only %s", unsupported, infos, sb.ID())
		}
	}
}

// TestListPagesPastTheFirstHundred: with more sandboxes than one page holds, List finds
// them all whether the server answers with the next page's offset or echoes the offset
// it was given.
func TestListPagesPastTheFirstHundred(t *testing.T) {
	for _, echo := range []bool{false, true} {
		t.Run(fmt.Sprintf("EchoesOffset=%v", echo), func(t *testing.T) {
			srv := newServer(t)
			srv.ListEchoesOffset = echo
			want := map[string]bool{}
			for i := range 250 {
				name := fmt.Sprintf("talkops-run-%03d", i)
				srv.AddSandbox(name, spec(fmt.Sprintf("run-%03d", i)).Labels)
				want[name] = true
				if i%50 == 0 {
					srv.AddSandbox(fmt.Sprintf("someone-else-%03d", i), map[string]string{"team": "x"})
				}
			}
			infos, err := newProvider(t, srv, nil).List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, in := range infos {
				got[in.ID] = true
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("List() found %d of 250 sandboxes (-want +got):\n%s", len(got), diff)
			}
			if n := srv.Count("list"); n != 4 {
				t.Errorf("list calls = %d, want 4 (three pages and the empty one that ends the list)", n)
			}
		})
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

// TestLive runs the contract suite against LangSmith when LANGSMITH_API_KEY is set and
// -short is not.
func TestLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live test skipped in -short mode")
	}
	if os.Getenv("LANGSMITH_API_KEY") == "" && os.Getenv("LANGSMITH_SANDBOX_API_KEY") == "" {
		t.Skip("LANGSMITH_API_KEY is not set; skipping the live LangSmith contract test")
	}
	providertest.Run(t, func(context.Context, *testing.T) (providertest.Harness, error) {
		return cloudtest.LiveHarness{New: func() (providers.Provider, error) { return langsmith.New(langsmith.Options{}, os.Getenv) }}, nil
	})
}

// TestAttachWorkDir: --sandbox-id with a configured working_dir runs commands there, not
// in the provider's default directory.
func TestAttachWorkDir(t *testing.T) {
	srv := newServer(t)
	cloudtest.AttachWorkDir(t, newProvider(t, srv, nil), spec("run-attach-wd"))
}
