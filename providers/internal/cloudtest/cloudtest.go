// Package cloudtest holds what the cloud providers' tests share: a getenv from pairs, fast
// retries, the Spec they start from, contract-suite harnesses for a fake and for the real
// service, and the checks their fault, retry, upload and configuration tests repeat.
package cloudtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/contract"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
)

// FastRetry keeps retry tests quick; the backoff itself is tested in httpapi.
var FastRetry = httpapi.Retry{Attempts: 4, Base: time.Millisecond, Max: 5 * time.Millisecond, MaxRetryAfter: 2 * time.Second}

// Env returns a getenv that knows the key, value pairs kv and nothing else.
func Env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// Spec returns the Spec of a talkops run: a 20-minute TTL and the run id, creator and
// expiry (2030-01-02T03:04:05Z) labels.
func Spec(runID string) providers.Spec {
	return providers.Spec{RunID: runID, TTL: 20 * time.Minute, Labels: map[string]string{
		providers.LabelRunID: runID, providers.LabelCreatedBy: "talkops", providers.LabelExpiresAt: "2030-01-02T03:04:05Z",
	}}
}

// Create creates a sandbox, failing the test if it cannot, and closes it when the test
// ends.
func Create(t *testing.T, p providers.Provider, s providers.Spec) providers.Sandbox {
	t.Helper()
	sb, err := p.Create(t.Context(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb
}

// AttachWorkDir creates a sandbox, attaches to it with a working directory other than
// the provider's (a directory the fake's commands can reach), and checks that commands on
// the attached sandbox run there, as they do on a sandbox created with Spec.WorkDir.
func AttachWorkDir(t *testing.T, p providers.Provider, s providers.Spec) {
	t.Helper()
	sb := Create(t, p, s)
	dir := t.TempDir()
	att, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{WorkDir: dir})
	if err != nil {
		t.Fatalf("Attach(%s, WorkDir %s) = %v", sb.ID(), dir, err)
	}
	defer att.Close(context.Background())
	if got := att.WorkDir(); got != dir {
		t.Errorf("attached WorkDir() = %q, want %q", got, dir)
	}
	res, err := att.Exec(t.Context(), providers.Shell("pwd"))
	if err != nil || strings.TrimSpace(string(res.Stdout)) != dir {
		t.Errorf("pwd on the attached sandbox = %q, %v; want %s", res.Stdout, err, dir)
	}
}

// FakeHarness runs the contract suite against a provider pointed at a fake.
type FakeHarness struct {
	// Provider returns a provider pointed at the fake.
	Provider func(t *testing.T) providers.Provider
	// Ledger returns the ids of the sandboxes the fake holds alive.
	Ledger func() []string
	// Stop stops the fake.
	Stop func()
}

// NewProvider implements providertest.Harness.
func (h FakeHarness) NewProvider(_ context.Context, t *testing.T) providers.Provider {
	return h.Provider(t)
}

// Spec implements providertest.Harness: the suite's defaults.
func (FakeHarness) Spec(*testing.T) providers.Spec { return providers.Spec{} }

// Alive implements providertest.Harness from the fake's ledger.
func (h FakeHarness) Alive(context.Context) ([]string, bool) { return h.Ledger(), true }

// Close implements providertest.Harness.
func (h FakeHarness) Close() { h.Stop() }

// LiveHarness runs the contract suite against the real service.
type LiveHarness struct {
	// New builds a provider from the environment; it must be a providers.Lister too.
	New func() (providers.Provider, error)
	// Gone, when set, says which listed sandboxes are already on their way out and do
	// not count as alive.
	Gone func(providers.Info) bool
}

// NewProvider implements providertest.Harness.
func (h LiveHarness) NewProvider(_ context.Context, t *testing.T) providers.Provider {
	p, err := h.New()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Spec implements providertest.Harness: the suite's defaults.
func (LiveHarness) Spec(*testing.T) providers.Spec { return providers.Spec{} }

// Alive implements providertest.Harness with the provider's List.
func (h LiveHarness) Alive(ctx context.Context) ([]string, bool) {
	return contract.ListedIDs(ctx, h.New, h.Gone)
}

// Close implements providertest.Harness.
func (LiveHarness) Close() {}

// CheckCreate checks what Create returned in a fault test. With wantErr empty, Create
// must have succeeded; then use, when set, exercises the sandbox and Close must succeed.
// Otherwise the error must contain wantErr.
func CheckCreate(t *testing.T, sb providers.Sandbox, err error, wantErr string, use func(*testing.T, providers.Sandbox)) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("Create() error = %v, want it to contain %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("Create() = %v, want success", err)
	}
	if use != nil {
		use(t, sb)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close() = %v", err)
	}
}

// CheckCounts checks how many calls each endpoint of want received; count is the fake's
// Count.
func CheckCounts(t *testing.T, count func(endpoint string) int, want map[string]int) {
	t.Helper()
	for _, ep := range slices.Sorted(maps.Keys(want)) {
		if got := count(ep); got != want[ep] {
			t.Errorf("%s calls = %d, want %d", ep, got, want[ep])
		}
	}
}

// ExecRunsOnce makes the next calls of endpoint fail with faults, one each, then runs a
// command that appends a line to a file and prints the file: the retries must get
// through, and the command must have run exactly once. count is the fake's Count.
func ExecRunsOnce(t *testing.T, sb providers.Sandbox, faults *fakekit.Faults, count func(endpoint string) int, endpoint string, fs ...fakekit.Fault) {
	t.Helper()
	base := count(endpoint)
	statuses := make([]int, len(fs))
	for i, f := range fs {
		faults.Inject(endpoint, base+1+i, f)
		statuses[i] = f.Status
	}
	res, err := sb.Exec(t.Context(), providers.Shell("echo x >> n; cat n"))
	if err != nil || string(res.Stdout) != "x\n" {
		t.Fatalf("Exec after %v = %q, %v; want it run once", statuses, res.Stdout, err)
	}
}

// ExecNotResent makes the next call of endpoint carry the command out and then fail with
// fault (a Late fault: a proxy's 502 or 503 after the command started), then runs a
// command that appends a line to a file. The command must not be sent again: Exec fails
// with an error wrapping httpapi.ErrMaybeDone, endpoint got exactly one call, and the
// file holds one line.
func ExecNotResent(t *testing.T, sb providers.Sandbox, faults *fakekit.Faults, endpoint string, fault fakekit.Fault) {
	t.Helper()
	fault.Late = true
	base := faults.Calls(endpoint) // Inject counts the calls the fake served, as Calls does
	faults.Inject(endpoint, base+1, fault)
	file := fmt.Sprintf("once-%d", time.Now().UnixNano()) // sandboxes of a fake may share a directory
	_, err := sb.Exec(t.Context(), providers.Shell("echo x >> "+file))
	if !errors.Is(err, httpapi.ErrMaybeDone) || httpapi.StatusCode(err) != fault.Status {
		t.Fatalf("Exec after a %d that came after the command ran = %v; want the %d, marked as maybe carried out", fault.Status, err, fault.Status)
	}
	if got := faults.Calls(endpoint) - base; got != 1 {
		t.Errorf("%s calls = %d, want 1 (the command must not be sent again)", endpoint, got)
	}
	res, err := sb.Exec(t.Context(), providers.Shell("cat "+file))
	if err != nil || string(res.Stdout) != "x\n" {
		t.Errorf("the file the command appends to holds %q (%v), want one line: the command ran once", res.Stdout, err)
	}
}

// WantConfigError fails the test unless err wraps providers.ErrConfig and says want.
func WantConfigError(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, providers.ErrConfig) || !strings.Contains(err.Error(), want) {
		t.Fatalf("New() error = %v, want a config error containing %q", err, want)
	}
}

// TarGz returns a gzip tar of entries.
func TarGz(t *testing.T, entries ...archive.Entry) []byte {
	t.Helper()
	b, err := archive.TarGz(entries...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// UploadCalls uploads tgz into dir of sb and returns the calls the fake received while
// it did; calls is the fake's Calls.
func UploadCalls(t *testing.T, sb providers.Sandbox, dir string, tgz []byte, calls func() []fakekit.Call) []fakekit.Call {
	t.Helper()
	before := len(calls())
	if err := sb.Upload(t.Context(), dir, bytes.NewReader(tgz)); err != nil {
		t.Fatalf("Upload(%s) = %v", dir, err)
	}
	return calls()[before:]
}

// Endpoints returns the endpoint of each call.
func Endpoints(calls []fakekit.Call) []string {
	var eps []string
	for _, c := range calls {
		eps = append(eps, c.Endpoint)
	}
	return eps
}

// Fake is what a fault table needs of a provider's fake: its per-endpoint call count.
type Fake interface {
	Count(endpoint string) int
}

// FaultCase is one case of a provider's Create fault table.
type FaultCase[S Fake, O any] struct {
	Name string
	// Options, when set, adjusts the provider's options; Setup, when set, configures the
	// fake (injected faults, a state that never comes).
	Options func(*O)
	Setup   func(S)
	// WantErr is a substring of Create's error; "" means Create succeeds.
	WantErr string
	// WantCall is how many calls each endpoint receives, Close included.
	WantCall map[string]int
	// Alive is how many sandboxes the fake holds at the end: 1 when the cleanup of a
	// half-created one failed.
	Alive int
}

// FaultTable runs a provider's Create fault table: for each case a fresh fake, the case's
// Setup, a provider with the case's Options, then Create. CheckCreate and CheckCounts
// check the outcome, and the fake's ledger must show at most one sandbox created and
// Alive still alive.
type FaultTable[S Fake, O any] struct {
	// NewServer starts a fake, stopped when the test ends.
	NewServer func(t *testing.T) S
	// NewProvider returns a provider pointed at srv with mod applied to its options.
	NewProvider func(t *testing.T, srv S, mod func(*O)) providers.Provider
	// Ledger returns how many sandboxes the fake created and the ids still alive.
	Ledger func(srv S) (created int, alive []string)
	// Spec, when set, returns what Create is given; else it is Spec("run-fault").
	Spec func() providers.Spec
	// Use, when set, exercises a sandbox Create returned before it is closed.
	Use func(t *testing.T, sb providers.Sandbox)
}

// Run runs cases as subtests.
func (ft FaultTable[S, O]) Run(t *testing.T, cases []FaultCase[S, O]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			spec := Spec("run-fault")
			if ft.Spec != nil {
				spec = ft.Spec()
			}
			srv := ft.NewServer(t)
			if tc.Setup != nil {
				tc.Setup(srv)
			}
			p := ft.NewProvider(t, srv, func(o *O) {
				if tc.Options != nil {
					tc.Options(o)
				}
			})
			sb, err := p.Create(t.Context(), spec)
			CheckCreate(t, sb, err, tc.WantErr, ft.Use)
			CheckCounts(t, srv.Count, tc.WantCall)
			if created, alive := ft.Ledger(srv); len(alive) != tc.Alive || created > 1 {
				t.Errorf("ledger: %d created, alive %v; want at most one created and %d alive", created, alive, tc.Alive)
			}
		})
	}
}
