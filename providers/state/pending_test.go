package state_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
)

func TestPendingFileName(t *testing.T) {
	t.Parallel()
	if got, want := state.PendingFileName("daytona", "run/1", 42), "daytona+pending-run%2F1-42.json"; got != want {
		t.Errorf("PendingFileName = %q, want %q", got, want)
	}
	// A sandbox id that spells a pending name still gets a file of its own.
	if got := state.FileName("daytona", "+pending-run-42"); got == state.PendingFileName("daytona", "run", 42) || strings.Contains(got, "+") {
		t.Errorf("FileName of a pending-looking id = %q: collides with a pending entry", got)
	}
}

// A pending entry is kept by provider, run id and pid, listed with the others, and
// removed by RemovePending; a real entry of the same run is a different file.
func TestPendingRecordListRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := state.Entry{Provider: "modal", RunID: "run-1", CreatedAt: t0, PID: 42, Host: "ci-1", Pending: true, ProjectDir: "/src/p"}
	real := state.Entry{Provider: "modal", ID: "sb-1", RunID: "run-1", CreatedAt: t0.Add(time.Second), PID: 42, Host: "ci-1"}
	for _, e := range []state.Entry{p, real} {
		if err := state.Record(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := state.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]state.Entry{p, real}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, state.PendingFileName("modal", "run-1", 42))); err != nil {
		t.Errorf("pending file: %v", err)
	}
	if err := state.RemovePending(dir, "modal", "run-1", 42); err != nil {
		t.Fatal(err)
	}
	if err := state.RemovePending(dir, "modal", "run-1", 42); err != nil {
		t.Errorf("removing a missing pending entry: %v", err)
	}
	if got, _ := state.List(dir); !cmp.Equal([]state.Entry{real}, got) {
		t.Errorf("after RemovePending: %+v, want only the real entry", got)
	}
}

func TestPendingBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"NoRunID", state.Record(dir, state.Entry{Provider: "p", PID: 1, Pending: true}), "pending entry has no run id"},
		{"NoPID", state.Record(dir, state.Entry{Provider: "p", RunID: "r", Pending: true}), "pending entry has no pid"},
		{"WithID", state.Record(dir, state.Entry{Provider: "p", ID: "i", RunID: "r", PID: 1, Pending: true}), `has id "i"`},
		{"NoProvider", state.Record(dir, state.Entry{RunID: "r", PID: 1, Pending: true}), "no provider"},
		{"RemoveNoDir", state.RemovePending("", "p", "r", 1), "no state directory"},
		{"RemoveNoPID", state.RemovePending(dir, "p", "r", 0), "no pid"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want one containing %q", tc.name, tc.err, tc.want)
		}
	}
	// A pending file without a run id (hand-edited, or truncated by a bug) is reported
	// by name; the readable entries still come back.
	bad := filepath.Join(dir, "modal+pending-x-1.json")
	if err := os.WriteFile(bad, []byte(`{"provider":"modal","pending":true,"pid":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := state.List(dir); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "no run id") {
		t.Errorf("List error = %v, want one naming %s and the missing run id", err, bad)
	}
}

// Files written before entries had a host or could be pending still load, as entries of
// this host.
func TestOldEntriesLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := `{
  "provider": "daytona",
  "id": "sb-old",
  "run_id": "run-0",
  "created_at": "2026-01-02T03:04:05Z",
  "expires_at": "2026-01-02T04:04:05Z",
  "project_dir": "/src/p",
  "pid": 77
}
`
	if err := os.WriteFile(filepath.Join(dir, state.FileName("daytona", "sb-old")), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := state.List(dir)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []state.Entry{{Provider: "daytona", ID: "sb-old", RunID: "run-0", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), ProjectDir: "/src/p", PID: 77}}
	if diff := cmp.Diff(want, got); diff != "" || err != nil {
		t.Errorf("List of an old entry (-want +got):\n%s\nerror %v", diff, err)
	}
}

type idSandbox struct {
	providers.Sandbox
	id string
}

func (s idSandbox) ID() string { return s.id }

// The runner's Ledger: Pending before the create, Record replaces it, DropPending after
// a failed create, and Forget of a sandbox whose Record failed removes what is left.
func TestLedgerPendingLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	host, _ := os.Hostname()
	expires := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	spec := providers.Spec{RunID: "run-1", Labels: map[string]string{providers.LabelExpiresAt: expires.Format(time.RFC3339)}}
	l := &state.Ledger{Dir: dir, Provider: "runloop", ProjectDir: "/src/p"}
	list := func() []state.Entry {
		t.Helper()
		got, err := state.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	if err := l.Pending(spec); err != nil {
		t.Fatal(err)
	}
	got := list()
	if len(got) != 1 || !got[0].Pending || got[0].ID != "" || got[0].RunID != "run-1" || got[0].PID != os.Getpid() ||
		got[0].Host != host || got[0].ProjectDir != "/src/p" || !got[0].ExpiresAt.Equal(expires) || got[0].CreatedAt.IsZero() {
		t.Fatalf("after Pending: %+v; want one pending entry of this process, host and run", got)
	}
	sb := idSandbox{id: "sb-1"}
	if err := l.Record(sb, spec); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 1 || got[0].Pending || got[0].ID != "sb-1" || got[0].Host != host {
		t.Fatalf("after Record: %+v; want only the sandbox's entry", got)
	}
	if err := l.Forget(sb); err != nil {
		t.Fatal(err)
	}

	// A create that failed.
	if err := l.Pending(spec); err != nil {
		t.Fatal(err)
	}
	if err := l.DropPending(spec); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after DropPending: %+v; want nothing", got)
	}

	// A Record that failed (here: the entry cannot be written because its id is
	// empty) leaves the pending entry until the sandbox is forgotten.
	if err := l.Pending(spec); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(idSandbox{id: ""}, spec); err == nil {
		t.Fatal("Record of a sandbox with no id succeeded")
	}
	if got := list(); len(got) != 1 || !got[0].Pending {
		t.Fatalf("after a failed Record: %+v; want the pending entry", got)
	}
	if err := l.Forget(idSandbox{id: "sb-2"}); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after Forget: %+v; want nothing", got)
	}

	// No run id: nothing to find the sandbox by, so nothing is written.
	if err := l.Pending(providers.Spec{}); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("Pending without a run id wrote %+v", got)
	}
}

// BenchmarkLedgerCreate is the ledger's cost per created sandbox: the entry alone
// (before pending entries) against the pending entry, then the entry replacing it.
func BenchmarkLedgerCreate(b *testing.B) {
	spec := providers.Spec{RunID: "run-bench"}
	sb := idSandbox{id: "sb-bench"}
	b.Run("entry only", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			if err := state.Record(dir, state.Entry{Provider: "daytona", ID: sb.id, RunID: spec.RunID, PID: os.Getpid()}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pending, then entry", func(b *testing.B) {
		l := &state.Ledger{Dir: b.TempDir(), Provider: "daytona"}
		for b.Loop() {
			if err := l.Pending(spec); err != nil {
				b.Fatal(err)
			}
			if err := l.Record(sb, spec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
