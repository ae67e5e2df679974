//go:build unix

package fake_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/providers/providertest"
)

type harness struct{ p *fake.Provider }

func (h *harness) NewProvider(ctx context.Context, t *testing.T) providers.Provider { return h.p }
func (h *harness) Spec(t *testing.T) providers.Spec {
	return providers.Spec{ProjectDir: t.TempDir()}
}
func (h *harness) Alive(ctx context.Context) ([]string, bool) {
	ids, err := h.p.Alive()
	return ids, err == nil
}
func (h *harness) Close() {}

func TestContract(t *testing.T) {
	t.Run("Memory", func(t *testing.T) {
		providertest.Run(t, func(ctx context.Context, t *testing.T) (providertest.Harness, error) {
			return &harness{fake.New(fake.Options{Dir: t.TempDir()})}, nil
		})
	})
	t.Run("LedgerFile", func(t *testing.T) {
		providertest.Run(t, func(ctx context.Context, t *testing.T) (providertest.Harness, error) {
			dir := t.TempDir()
			return &harness{fake.New(fake.Options{Dir: dir, LedgerFile: filepath.Join(dir, "ledger.json")})}, nil
		})
	})
}

func newFake(t *testing.T, f fake.Faults) *fake.Provider {
	t.Helper()
	return fake.New(fake.Options{Dir: t.TempDir(), Faults: f})
}

func alive(t *testing.T, p *fake.Provider) []string {
	t.Helper()
	ids, err := p.Alive()
	if err != nil {
		t.Fatalf("Alive: %v", err)
	}
	return ids
}

func TestCreateFaults(t *testing.T) {
	t.Parallel()
	t.Run("Error", func(t *testing.T) {
		t.Parallel()
		p := newFake(t, fake.Faults{CreateErr: errors.New("quota exceeded")})
		_, err := p.Create(t.Context(), providers.Spec{})
		if !errors.Is(err, fake.ErrInjected) || !strings.Contains(err.Error(), "quota exceeded") {
			t.Errorf("Create error = %v, want ErrInjected with the configured message", err)
		}
		if recs, _ := p.Ledger(); len(recs) != 0 {
			t.Errorf("ledger after a failed Create = %v, want empty", recs)
		}
	})
	t.Run("DelayCancelled", func(t *testing.T) {
		t.Parallel()
		p := newFake(t, fake.Faults{CreateDelay: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := p.Create(ctx, providers.Spec{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Create during its delay = %v, want DeadlineExceeded", err)
		}
		if recs, _ := p.Ledger(); len(recs) != 0 {
			t.Errorf("ledger after a cancelled Create = %v, want empty", recs)
		}
	})
}

func TestExecAndUploadFaults(t *testing.T) {
	t.Parallel()
	p := newFake(t, fake.Faults{ExecFailAt: 2, UploadFailAt: 1})
	sb, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	var got []string
	for range 3 {
		res, err := sb.Exec(t.Context(), providers.Shell("echo ok"))
		switch {
		case errors.Is(err, fake.ErrInjected):
			got = append(got, "injected")
		case err != nil:
			got = append(got, err.Error())
		default:
			got = append(got, strings.TrimSpace(string(res.Stdout)))
		}
	}
	if diff := cmp.Diff([]string{"ok", "injected", "ok"}, got); diff != "" {
		t.Errorf("three Execs with ExecFailAt 2 (-want +got):\n%s", diff)
	}
	tgz, err := archive.TarGz(archive.Entry{Name: "f", Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Upload(t.Context(), "", bytes.NewReader(tgz)); !errors.Is(err, fake.ErrInjected) {
		t.Errorf("first Upload with UploadFailAt 1 = %v, want ErrInjected", err)
	}
	if err := sb.Upload(t.Context(), "", bytes.NewReader(tgz)); err != nil {
		t.Errorf("second Upload = %v, want nil", err)
	}
}

func TestExecDelay(t *testing.T) {
	t.Parallel()
	p := newFake(t, fake.Faults{ExecDelay: time.Minute})
	sb, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := sb.Exec(ctx, providers.Shell("true")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec during ExecDelay = %v, want DeadlineExceeded", err)
	}
}

func TestCloseFailures(t *testing.T) {
	t.Parallel()
	p := newFake(t, fake.Faults{CloseFailures: 2})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if err := sb.Close(t.Context()); !errors.Is(err, fake.ErrInjected) {
			t.Fatalf("Close call %d = %v, want ErrInjected", i, err)
		}
		if ids := alive(t, p); !cmp.Equal(ids, []string{sb.ID()}) {
			t.Errorf("after failed Close %d: Alive = %v, want [%s]", i, ids, sb.ID())
		}
		if res, err := sb.Exec(t.Context(), providers.Shell("echo up")); err != nil || string(res.Stdout) != "up\n" {
			t.Errorf("Exec after a failed Close = %q, %v; want the sandbox still usable", res.Stdout, err)
		}
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("third Close = %v, want nil", err)
	}
	if ids := alive(t, p); len(ids) != 0 {
		t.Errorf("Alive after a successful Close = %v, want none", ids)
	}
	if _, err := os.Stat(sb.WorkDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("working directory after Close: stat error = %v, want not exist", err)
	}
}

func TestCloseDelay(t *testing.T) {
	t.Parallel()
	p := newFake(t, fake.Faults{CloseDelay: time.Minute})
	sb, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := sb.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close past its ctx = %v, want DeadlineExceeded", err)
	}
	if ids := alive(t, p); len(ids) != 1 {
		t.Errorf("Alive after an interrupted Close = %v, want the sandbox", ids)
	}
	// The reaper's path: delete by id through the Lister.
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Errorf("second Delete = %v, want nil", err)
	}
	if ids := alive(t, p); len(ids) != 0 {
		t.Errorf("Alive after Delete = %v, want none", ids)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("Close after Delete = %v, want nil", err)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	p := newFake(t, fake.Faults{})
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "run-7", Labels: map[string]string{
		providers.LabelRunID:     "run-7",
		providers.LabelExpiresAt: exp.Format(time.RFC3339),
		providers.LabelCreatedBy: "talkops",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	infos, err := p.List(t.Context())
	if err != nil || len(infos) != 1 {
		t.Fatalf("List = %v, %v; want one sandbox", infos, err)
	}
	got := infos[0]
	got.CreatedAt = time.Time{}
	want := providers.Info{Provider: "fake", ID: sb.ID(), RunID: "run-7", ExpiresAt: exp, State: "running", Labels: map[string]string{
		providers.LabelRunID:     "run-7",
		providers.LabelExpiresAt: exp.Format(time.RFC3339),
		providers.LabelCreatedBy: "talkops",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List()[0] mismatch (-want +got):\n%s", diff)
	}
}

func TestParseFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    fake.Faults
		wantErr string
	}{
		{"", fake.Faults{}, ""},
		{"create=error", fake.Faults{CreateErr: fake.ErrInjected}, ""},
		{"create-delay=2s, exec-fail=3,exec-delay=500ms,upload-fail=1,close-fail=2,close-delay=1s", fake.Faults{
			CreateDelay: 2 * time.Second, ExecFailAt: 3, ExecDelay: 500 * time.Millisecond, UploadFailAt: 1, CloseFailures: 2, CloseDelay: time.Second,
		}, ""},
		{"create=maybe", fake.Faults{}, "want create=error"},
		{"exec-fail=0", fake.Faults{}, "positive whole number"},
		{"close-delay=soon", fake.Faults{}, "non-negative duration"},
		{"explode=1", fake.Faults{}, `unknown fault "explode": valid keys are create, create-delay`},
		{"exec-fail", fake.Faults{}, "want key=value"},
	} {
		got, err := fake.ParseFaults(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseFaults(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFaults(%q) error = %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) })); diff != "" {
			t.Errorf("ParseFaults(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	if _, err := fake.FromEnv(func(k string) string {
		return map[string]string{fake.EnvFaults: "bogus=1"}[k]
	}); err == nil || !strings.Contains(err.Error(), fake.EnvFaults) {
		t.Errorf("FromEnv with a bad fault spec: error = %v, want one naming %s", err, fake.EnvFaults)
	}
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.json")
	p, err := fake.FromEnv(func(k string) string {
		return map[string]string{fake.EnvDir: dir, fake.EnvLedger: ledger, fake.EnvFaults: "close-fail=1"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(t.Context(), providers.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sb.WorkDir(), dir) {
		t.Errorf("WorkDir %s is not below %s", sb.WorkDir(), dir)
	}
	if err := sb.Close(t.Context()); !errors.Is(err, fake.ErrInjected) {
		t.Errorf("first Close = %v, want ErrInjected", err)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v", err)
	}
	recs, err := fake.ReadLedger(ledger)
	if err != nil || len(recs) != 1 || recs[0].DeletedAt.IsZero() {
		t.Errorf("ReadLedger = %+v, %v; want one deleted sandbox", recs, err)
	}
}

const helperEnv = "TALKOPS_FAKE_TEST_HELPER"

// TestHelperProcess is not a test: TestCrossProcess runs the test binary with helperEnv
// set; this creates a sandbox through a ledger file and exits without closing it, as a
// SIGKILLed run would.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestCrossProcess")
	}
	p, err := fake.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(context.Background(), providers.Spec{RunID: "killed-run"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(context.Background(), providers.Shell("echo left behind > marker")); err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec: %v %+v", err, res)
	}
	os.Stdout.WriteString("\nID=" + sb.ID() + "\n")
}

func TestCrossProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.json")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1", fake.EnvDir+"="+dir, fake.EnvLedger+"="+ledger)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "\nID=")
	if !ok {
		t.Fatalf("helper printed no id:\n%s", out)
	}
	id, _, _ := strings.Cut(after, "\n")

	// This process sees the leak through the ledger file, attaches, then reaps it.
	p := fake.New(fake.Options{Dir: dir, LedgerFile: ledger})
	if ids := alive(t, p); !cmp.Equal(ids, []string{id}) {
		t.Fatalf("Alive from another process = %v, want [%s]", ids, id)
	}
	sb, err := p.Attach(t.Context(), id, providers.AttachOptions{})
	if err != nil {
		t.Fatalf("Attach(%s): %v", id, err)
	}
	rc, err := sb.Download(t.Context(), "marker")
	if err != nil {
		t.Fatalf("Download(marker): %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "left behind\n" {
		t.Errorf("marker = %q, want %q", b, "left behind\n")
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close of attached: %v", err)
	}
	if ids := alive(t, p); len(ids) != 1 {
		t.Fatalf("closing an attached handle deleted the sandbox: Alive = %v", ids)
	}
	if err := p.Delete(t.Context(), id); err != nil {
		t.Fatalf("Delete(%s): %v", id, err)
	}
	recs, err := fake.ReadLedger(ledger)
	if err != nil || len(recs) != 1 || recs[0].DeletedAt.IsZero() || recs[0].Attaches != 1 || recs[0].RunID != "killed-run" {
		t.Errorf("ledger after reaping = %+v, %v; want one deleted sandbox of killed-run attached once", recs, err)
	}
	if _, err := p.Attach(t.Context(), id, providers.AttachOptions{}); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Attach of a deleted sandbox = %v, want ErrNotFound", err)
	}
}
