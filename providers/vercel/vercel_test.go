package vercel_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
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
	"github.com/talkops/talkops/providers/vercel"
	"github.com/talkops/talkops/providers/vercel/vercelfake"
)

const (
	token   = "vercel_test_token"
	team    = "team_test"
	project = "prj_test"
)

var (
	env  = cloudtest.Env
	spec = cloudtest.Spec
)

func newServer(t *testing.T) *vercelfake.Server {
	t.Helper()
	srv := vercelfake.New(token, team, project)
	srv.ReadyAfter = 2
	t.Cleanup(srv.Close)
	return srv
}

func newProvider(t *testing.T, srv *vercelfake.Server, mod func(*vercel.Options)) *vercel.Provider {
	t.Helper()
	opts := vercel.Options{APIURL: srv.URL, PollInterval: 5 * time.Millisecond, ReadyTimeout: 10 * time.Second, RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir(), TempDir: t.TempDir(), Retry: cloudtest.FastRetry}}
	if mod != nil {
		mod(&opts)
	}
	p, err := vercel.New(opts, env("VERCEL_TOKEN", token, "VERCEL_TEAM_ID", team, "VERCEL_PROJECT_ID", project))
	if err != nil {
		t.Fatalf("vercel.New: %v", err)
	}
	return p
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		srv := vercelfake.New(token, team, project)
		srv.ReadyAfter = 2
		return cloudtest.FakeHarness{Provider: func(t *testing.T) providers.Provider { return newProvider(t, srv, nil) },
			Ledger: func() []string { return srv.Ledger().Alive }, Stop: srv.Close}, nil
	})
}

func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString(b) + ".c2ln"
}

func TestCredentials(t *testing.T) {
	future := time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct {
		name    string
		env     func(string) string
		wantErr string // "" means New succeeds
	}{
		{"Nothing", env(), "VERCEL_OIDC_TOKEN is not set"},
		{"TokenOnly", env("VERCEL_TOKEN", "t"), "VERCEL_TEAM_ID / VERCEL_PROJECT_ID not set"},
		{"NoProject", env("VERCEL_TOKEN", "t", "VERCEL_TEAM_ID", "x"), "VERCEL_PROJECT_ID not set"},
		{"AllThree", env("VERCEL_TOKEN", "t", "VERCEL_TEAM_ID", "x", "VERCEL_PROJECT_ID", "p"), ""},
		{"OIDC", env("VERCEL_OIDC_TOKEN", jwt(t, map[string]any{"owner_id": "team_1", "project_id": "prj_1", "exp": future})), ""},
		{"OIDCProjectFromEnv", env("VERCEL_OIDC_TOKEN", jwt(t, map[string]any{"owner_id": "team_1", "exp": future}), "VERCEL_PROJECT_ID", "prj_2"), ""},
		{"OIDCNoProject", env("VERCEL_OIDC_TOKEN", jwt(t, map[string]any{"owner_id": "team_1"})), "VERCEL_PROJECT_ID is not set and VERCEL_OIDC_TOKEN has no project_id claim"},
		{"OIDCExpired", env("VERCEL_OIDC_TOKEN", jwt(t, map[string]any{"owner_id": "team_1", "project_id": "p", "exp": 1700000000})), "VERCEL_OIDC_TOKEN expired at 2023-11-14T22:13:20Z"},
		{"OIDCGarbage", env("VERCEL_OIDC_TOKEN", "not-a-jwt"), "is not a Vercel OIDC token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vercel.New(vercel.Options{}, tc.env)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, providers.ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New() error = %v, want a config error containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := vercel.New(vercel.Options{Runtime: "node24", Image: "x"}, env("VERCEL_TOKEN", "t", "VERCEL_TEAM_ID", "x", "VERCEL_PROJECT_ID", "p")); !errors.Is(err, providers.ErrConfig) {
		t.Errorf("New(runtime and image) = %v, want a config error", err)
	}
}

func TestOIDCTeamAndProjectAreUsed(t *testing.T) {
	oidc := jwt(t, map[string]any{"owner_id": "team_oidc", "project_id": "prj_oidc", "exp": time.Now().Add(time.Hour).Unix()})
	srv := vercelfake.New(oidc, "team_oidc", "prj_oidc")
	t.Cleanup(srv.Close)
	p, err := vercel.New(vercel.Options{APIURL: srv.URL, PollInterval: time.Millisecond, RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir()}}, env("VERCEL_OIDC_TOKEN", oidc))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(t.Context(), spec("run-oidc"))
	if err != nil {
		t.Fatalf("Create with OIDC credentials: %v", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestCreateRequest(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name string
		opts func(*vercel.Options)
		spec providers.Spec
		want vercelfake.Sandbox
	}{
		{"Default", nil, spec("run-1"), vercelfake.Sandbox{Image: "vercel/sandbox/universal", Timeout: (20 * time.Minute).Milliseconds(), VCPUs: 2}},
		{"Runtime", func(o *vercel.Options) { o.Runtime, o.VCPUs, o.Region = "python3.13", 4, "fra1" }, spec("run-2"),
			vercelfake.Sandbox{Runtime: "python3.13", Timeout: (20 * time.Minute).Milliseconds(), VCPUs: 4, Region: "fra1"}},
		{"DefaultTimeout", func(o *vercel.Options) { o.Image = "ubuntu" }, func() providers.Spec { s := spec("run-3"); s.TTL = 0; return s }(),
			vercelfake.Sandbox{Image: "ubuntu", Timeout: (30 * time.Minute).Milliseconds(), VCPUs: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := newProvider(t, srv, tc.opts).Create(t.Context(), tc.spec)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			defer sb.Close(context.Background())
			got, ok := srv.Sandbox(sb.ID())
			if !ok {
				t.Fatalf("no sandbox named %s", sb.ID())
			}
			want := tc.want
			want.Name, want.SessionStatus, want.Persistent = sb.ID(), "running", false
			if want.Region == "" {
				want.Region = "iad1"
			}
			want.Tags = map[string]string{
				providers.LabelRunID: tc.spec.RunID, providers.LabelCreatedBy: "talkops", providers.LabelExpiresAt: "20300102T030405Z",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("created sandbox mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	s := spec("run-snap")
	s.Snapshot = "talkops-aws-agent"
	_, err := p.Create(t.Context(), s)
	if !errors.Is(err, providers.ErrNotSupported) || !strings.Contains(err.Error(), "snapshot id (snap_…)") {
		t.Errorf("Create(snapshot name) = %v, want ErrNotSupported explaining ids", err)
	}
	s.Snapshot = "snap_missing"
	_, err = p.Create(t.Context(), s)
	if httpapi.StatusCode(err) != 410 || !strings.Contains(err.Error(), "Snapshot not found: snap_missing (snapshot_not_found)") {
		t.Errorf("Create(unknown snapshot id) = %v, want the 410 with the provider's message", err)
	}
	if l := srv.Ledger(); l.Created != 0 {
		t.Errorf("created = %d, want 0", l.Created)
	}
}

func TestTooManyLabels(t *testing.T) {
	srv := newServer(t)
	s := spec("run-tags")
	s.Labels["a"], s.Labels["b"], s.Labels["c"] = "1", "2", "3"
	_, err := newProvider(t, srv, nil).Create(t.Context(), s)
	if !errors.Is(err, providers.ErrNotSupported) || !strings.Contains(err.Error(), "at most 5 tags") {
		t.Errorf("Create(6 labels) = %v, want ErrNotSupported naming the limit", err)
	}
}

func TestFaults(t *testing.T) {
	cloudtest.FaultTable[*vercelfake.Server, vercel.Options]{
		NewServer: newServer,
		NewProvider: func(t *testing.T, srv *vercelfake.Server, mod func(*vercel.Options)) providers.Provider {
			return newProvider(t, srv, func(o *vercel.Options) { o.ReadyTimeout = 10 * time.Second; mod(o) })
		},
		Ledger: func(srv *vercelfake.Server) (int, []string) { l := srv.Ledger(); return l.Created, l.Alive },
	}.Run(t, []cloudtest.FaultCase[*vercelfake.Server, vercel.Options]{
		{
			Name:     "CreateRateLimited",
			Setup:    func(s *vercelfake.Server) { s.Faults.Inject("create", 1, fakekit.Fault{Status: 429, RetryAfter: "0"}) },
			WantCall: map[string]int{"create": 2, "delete": 1},
		},
		{
			// Creating the working directory is safe to repeat, so it is sent again even
			// after a 502 that came once it ran.
			Name:     "WorkDirLate502",
			Setup:    func(s *vercelfake.Server) { s.Faults.Inject("cmd", 1, fakekit.Fault{Status: 502, Late: true}) },
			WantCall: map[string]int{"create": 1, "cmd": 2, "delete": 1},
		},
		{
			Name: "Create500ThenOK",
			Setup: func(s *vercelfake.Server) {
				s.Faults.Inject("create", 1, fakekit.Fault{Status: 500})
			},
			WantCall: map[string]int{"create": 2, "delete": 1},
		},
		{
			Name: "CreateAlways429",
			Setup: func(s *vercelfake.Server) {
				s.Faults.InjectAll("create", fakekit.Fault{Status: 429, RetryAfter: "0", Body: `{"error":{"code":"rate_limited","message":"vCPU allocation rate limit reached"}}`})
			},
			WantErr:  "429 Too Many Requests: vCPU allocation rate limit reached (rate_limited) [gave up after 4 attempts]",
			WantCall: map[string]int{"create": 4, "delete": 0},
		},
		{
			Name:     "WrongTeam",
			Setup:    func(s *vercelfake.Server) { s.TeamID = "team_other" },
			WantErr:  "403 Forbidden: You don't have permission to access the team team_test (forbidden)",
			WantCall: map[string]int{"create": 1},
		},
		{
			Name:     "NeverReady",
			Options:  func(o *vercel.Options) { o.ReadyTimeout = 200 * time.Millisecond },
			Setup:    func(s *vercelfake.Server) { s.NeverReady = true },
			WantErr:  `not running within 200ms (last status "pending")`,
			WantCall: map[string]int{"create": 1, "delete": 1},
		},
		{
			Name:     "SessionFailed",
			Setup:    func(s *vercelfake.Server) { s.FailWith = "failed" },
			WantErr:  "is failed",
			WantCall: map[string]int{"create": 1, "delete": 1},
		},
		{
			Name:    "NeverReadyDeleteFails",
			Options: func(o *vercel.Options) { o.ReadyTimeout = 200 * time.Millisecond },
			Setup: func(s *vercelfake.Server) {
				s.NeverReady = true
				s.Faults.InjectAll("delete", fakekit.Fault{Status: 502})
			},
			WantErr:  "deleting the half-created sandbox failed",
			WantCall: map[string]int{"create": 1, "delete": 4},
			Alive:    1,
		},
	})
}

func TestExecFaultsAndStoppedSession(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-exec"))
	// A 429 means the command was not taken: retried.
	cloudtest.ExecRunsOnce(t, sb, &srv.Faults, srv.Count, "cmd", fakekit.Fault{Status: 429, RetryAfter: "0"})
	// cmd takes no idempotency key: a 502 or 503 that came after the command started
	// must not run it a second time.
	for _, status := range []int{502, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			sb := cloudtest.Create(t, p, spec(fmt.Sprintf("run-exec-%d", status)))
			cloudtest.ExecNotResent(t, sb, &srv.Faults, "cmd", fakekit.Fault{Status: status})
		})
	}
	srv.StopSession(sb.ID())
	_, err := sb.Exec(t.Context(), providers.Shell("true"))
	if httpapi.StatusCode(err) != 410 || !strings.Contains(err.Error(), "its timeout passed") {
		t.Errorf("Exec on a stopped session = %v, want the 410 explained", err)
	}
}

func TestStreamsLive(t *testing.T) {
	srv := newServer(t)
	sb := cloudtest.Create(t, newProvider(t, srv, nil), spec("run-stream"))
	first := make(chan struct{})
	w := &firstWrite{ch: first}
	cmd := providers.Shell("echo first; sleep 2; echo second")
	cmd.Stdout = w
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := sb.Exec(t.Context(), cmd); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-first:
		select {
		case <-done:
			t.Error("the first line arrived only when the command ended")
		default:
		}
	case <-done:
		t.Error("Exec ended before any output was streamed")
	}
	<-done
	if got := w.buf.String(); got != "first\nsecond\n" {
		t.Errorf("streamed output = %q", got)
	}
}

type firstWrite struct {
	ch   chan struct{}
	buf  bytes.Buffer
	once bool
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if !f.once {
		f.once = true
		close(f.ch)
	}
	return f.buf.Write(p)
}

func TestCloseDeletesByNameAndRetries(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb, err := p.Create(t.Context(), spec("run-del"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Faults.InjectAll("delete", fakekit.Fault{Status: 500, Body: `{"error":{"code":"internal_server_error","message":"try again"}}`})
	if err := sb.Close(t.Context()); err == nil || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("Close() = %v, want the delete failure", err)
	}
	srv.Faults.Clear("delete")
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	if l, stops := srv.Ledger(), srv.Count("stop"); len(l.Alive) != 0 || stops != 0 {
		t.Errorf("after Close: alive %v, stop calls %d; want deleted by name, never only stopped", l.Alive, stops)
	}
}

func TestListByTag(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb := cloudtest.Create(t, p, spec("run-list"))
	other := spec("other")
	other.Labels = map[string]string{"owner": "someone"}
	cloudtest.Create(t, p, other)
	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 {
		t.Fatalf("List() = %+v, want only the talkops sandbox", infos)
	}
	got := infos[0]
	want := providers.Info{Provider: "vercel", ID: sb.ID(), RunID: "run-list", State: "running", CreatedAt: got.CreatedAt,
		ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Labels: spec("run-list").Labels}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List()[0] mismatch (-want +got):\n%s", diff)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Errorf("Delete of a deleted sandbox = %v, want nil", err)
	}
}

// TestUploadIsOneRequest: the workspace goes in one fs/write, sent as @vercel/sandbox
// sends archives (x-cwd "/", full paths; the fake refuses anything else), and every kind
// of entry lands where it belongs.
func TestUploadIsOneRequest(t *testing.T) {
	srv := newServer(t)
	sb := cloudtest.Create(t, newProvider(t, srv, nil), spec("run-up"))
	long := strings.Repeat("n", 90) + "/" + strings.Repeat("m", 90) + ".txt" // past ustar's 100-byte name once prefixed
	tgz := cloudtest.TarGz(t,
		archive.Entry{Name: "./", Mode: fs.ModeDir | 0o755},
		archive.Entry{Name: "d/", Mode: fs.ModeDir | 0o750},
		archive.Entry{Name: "d/x.txt", Body: []byte("x"), Mode: 0o644},
		archive.Entry{Name: "run.sh", Body: []byte("#!/bin/sh\n"), Mode: 0o755},
		archive.Entry{Name: "link", Linkname: "d/x.txt", Mode: fs.ModeSymlink | 0o777},
		archive.Entry{Name: long, Body: []byte("long"), Mode: 0o644},
	)
	calls := cloudtest.UploadCalls(t, sb, "proj", tgz, srv.Calls)
	if len(calls) != 1 || calls[0].Endpoint != "write" || calls[0].Status != http.StatusOK {
		t.Errorf("Upload requests = %+v, want one fs/write, answered 200", calls)
	}
	dir := sb.WorkDir() + "/proj/"
	for name, want := range map[string]string{"d/x.txt": "x", "run.sh": "#!/bin/sh\n", "link": "x", long: "long"} {
		if b, err := os.ReadFile(dir + name); err != nil || string(b) != want {
			t.Errorf("uploaded %s = %q, %v; want %q", name, b, err, want)
		}
	}
	if fi, err := os.Stat(dir + "run.sh"); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode = %v, %v; want 0755", fi.Mode(), err)
	}
	if fi, err := os.Stat(dir + "d"); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("d mode = %v, %v; want 0750", fi.Mode(), err)
	}
	if target, err := os.Readlink(dir + "link"); err != nil || target != "d/x.txt" {
		t.Errorf("link target = %q, %v; want d/x.txt, unchanged", target, err)
	}
}

func TestUploadRefusesEntriesLeavingTheDirectory(t *testing.T) {
	srv := newServer(t)
	sb := cloudtest.Create(t, newProvider(t, srv, nil), spec("run-up-bad"))
	for _, name := range []string{"../escape.txt", "/etc/escape.txt"} {
		tgz := cloudtest.TarGz(t, archive.Entry{Name: name, Body: []byte("x"), Mode: 0o644})
		err := sb.Upload(t.Context(), "proj", bytes.NewReader(tgz))
		if err == nil || !strings.Contains(err.Error(), "would land outside the target directory") {
			t.Errorf("Upload(%s) = %v, want it refused", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(sb.WorkDir()), "escape.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an entry escaped the directory: %v", err)
	}
}

func TestAttachResumesStopped(t *testing.T) {
	srv := newServer(t)
	p := newProvider(t, srv, nil)
	sb, err := p.Create(t.Context(), spec("run-att"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	srv.StopSession(sb.ID())
	att, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatalf("Attach(stopped) = %v", err)
	}
	res, err := att.Exec(t.Context(), providers.Shell("echo back"))
	if err != nil || string(res.Stdout) != "back\n" {
		t.Errorf("Exec on the resumed sandbox = %q, %v", res.Stdout, err)
	}
	if err := att.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Sandbox(sb.ID()); !ok {
		t.Error("closing the attached handle deleted the sandbox")
	}
}

// TestLive runs the contract suite against the real Vercel API when credentials are set
// and -short is not.
func TestLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live test skipped in -short mode")
	}
	if os.Getenv("VERCEL_OIDC_TOKEN") == "" && os.Getenv("VERCEL_TOKEN") == "" {
		t.Skip("VERCEL_OIDC_TOKEN (or VERCEL_TOKEN, VERCEL_TEAM_ID, VERCEL_PROJECT_ID) is not set; skipping the live Vercel contract test")
	}
	providertest.Run(t, func(context.Context, *testing.T) (providertest.Harness, error) {
		return cloudtest.LiveHarness{New: func() (providers.Provider, error) { return vercel.New(vercel.Options{}, os.Getenv) }}, nil
	})
}

// TestAttachWorkDir: --sandbox-id with a configured working_dir runs commands there, not
// in the provider's default directory.
func TestAttachWorkDir(t *testing.T) {
	srv := newServer(t)
	cloudtest.AttachWorkDir(t, newProvider(t, srv, nil), spec("run-attach-wd"))
}
