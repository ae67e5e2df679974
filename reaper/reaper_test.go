package reaper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
)

// fakeLister is an in-memory provider listing.
type fakeLister struct {
	mu      sync.Mutex
	infos   []providers.Info
	listErr error
	delErr  map[string]error
	deleted []string
}

func (f *fakeLister) List(ctx context.Context) ([]providers.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	return append([]providers.Info(nil), f.infos...), nil
}

func (f *fakeLister) Delete(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.delErr[id]; err != nil {
		return err
	}
	f.deleted = append(f.deleted, id)
	for i, in := range f.infos {
		if in.ID == id {
			f.infos = append(f.infos[:i], f.infos[i+1:]...)
			break
		}
	}
	return nil
}

// memLedger is an in-memory Ledger.
type memLedger struct {
	entries   []state.Entry
	forgotten []string
}

func (m *memLedger) Entries() ([]state.Entry, error) { return m.entries, nil }

func (m *memLedger) Forget(provider, id string) error {
	m.forgotten = append(m.forgotten, provider+"/"+id)
	return nil
}

func (m *memLedger) ForgetPending(provider, runID string, pid int) error {
	m.forgotten = append(m.forgotten, fmt.Sprintf("%s/pending-%s-%d", provider, runID, pid))
	return nil
}

var (
	now          = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	livePID      = 4242
	deadPIDConst = 5353
	testOpts     = Options{Now: func() time.Time { return now }, Hostname: "ci-1", Alive: func(pid int) bool { return pid == livePID }}
	hourAgo      = now.Add(-time.Hour)
	minuteAgo    = now.Add(-time.Minute)
)

func info(id string, created, expires time.Time, pid int, host string) providers.Info {
	labels := map[string]string{providers.LabelCreatedBy: "talkops"}
	if pid > 0 {
		labels[providers.LabelOwnerPID] = strconv.Itoa(pid)
	}
	if host != "" {
		labels[providers.LabelOwnerHost] = host
	}
	return providers.Info{Provider: "docker", ID: id, RunID: "run-" + id, CreatedAt: created, ExpiresAt: expires, State: "running", Labels: labels}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		e       Entry
		wantDel bool
		reason  string
	}{
		{"owner alive, expired", Entry{Owner: OwnerAlive, OwnerPID: livePID, CreatedAt: hourAgo, ExpiresAt: minuteAgo}, false, "owner pid 4242 is running"},
		{"expired, owner unknown", Entry{Owner: OwnerUnknown, CreatedAt: minuteAgo, ExpiresAt: now.Add(-time.Second)}, true, "expired 1s ago"},
		{"young, owner gone", Entry{Owner: OwnerGone, OwnerPID: deadPIDConst, CreatedAt: minuteAgo}, false, "younger than 1h0m0s"},
		{"old, owner gone, not expired", Entry{Owner: OwnerGone, OwnerPID: deadPIDConst, CreatedAt: hourAgo, ExpiresAt: now.Add(time.Hour)}, true, "1h0m0s old and owner pid 5353 is gone"},
		{"old, no expiry, owner unknown", Entry{Owner: OwnerUnknown, CreatedAt: hourAgo}, true, "1h0m0s old, no expiry"},
		{"old, other host, not expired", Entry{Owner: OwnerUnknown, CreatedAt: hourAgo, ExpiresAt: now.Add(30 * time.Minute)}, false, "owner cannot be checked from this host; expires in 30m0s"},
		{"no creation time", Entry{Owner: OwnerGone}, false, "creation time unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			del, reason := Decide(tt.e, time.Hour, now)
			if del != tt.wantDel || reason != tt.reason {
				t.Errorf("Decide(%+v) = %v, %q; want %v, %q", tt.e, del, reason, tt.wantDel, tt.reason)
			}
		})
	}
}

func TestListMergesLedgerAndProviders(t *testing.T) {
	t.Parallel()
	docker := &fakeLister{infos: []providers.Info{
		info("c-live", hourAgo, time.Time{}, livePID, "ci-1"),
		info("c-dead", hourAgo.Add(time.Minute), time.Time{}, deadPIDConst, "ci-1"),
		info("c-other", hourAgo.Add(2*time.Minute), time.Time{}, deadPIDConst, "ci-2"),
	}}
	broken := &fakeLister{listErr: errors.New("engine down")}
	ledger := &memLedger{entries: []state.Entry{
		{Provider: "docker", ID: "c-dead", RunID: "run-c-dead", PID: deadPIDConst, ProjectDir: "/src/app"},
		{Provider: "docker", ID: "c-vanished", RunID: "r9", CreatedAt: hourAgo, PID: deadPIDConst},
		{Provider: "daytona", ID: "d-1", RunID: "r8", CreatedAt: hourAgo},
		{Provider: "modal", ID: "m-1"}, // not asked about
	}}
	got, err := ListLedger(t.Context(), map[string]providers.Lister{"docker": docker, "daytona": broken}, ledger, testOpts)
	if err == nil || !errors.Is(err, broken.listErr) {
		t.Errorf("ListLedger error = %v, want the daytona failure", err)
	}
	type row struct {
		Provider, ID, State, Owner string
		InLedger                   bool
		Project                    string
	}
	var rows []row
	for _, e := range got {
		rows = append(rows, row{e.Provider, e.ID, e.State, e.Owner, e.InLedger, e.ProjectDir})
	}
	want := []row{
		{"daytona", "d-1", StateUnchecked, OwnerUnknown, true, ""},
		{"docker", "c-live", "running", OwnerAlive, false, ""},
		{"docker", "c-vanished", StateGone, OwnerGone, true, ""}, // same age: listed ones first
		{"docker", "c-dead", "running", OwnerGone, true, "/src/app"},
		{"docker", "c-other", "running", OwnerUnknown, false, ""},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("ListLedger rows (-want +got):\n%s", diff)
	}
}

func TestGC(t *testing.T) {
	t.Parallel()
	for _, dry := range []bool{true, false} {
		t.Run(fmt.Sprintf("dryRun=%v", dry), func(t *testing.T) {
			t.Parallel()
			docker := &fakeLister{
				infos: []providers.Info{
					info("c-live", hourAgo, minuteAgo, livePID, "ci-1"),           // kept: owner alive
					info("c-dead", hourAgo, time.Time{}, deadPIDConst, "ci-1"),    // deleted
					info("c-expired", minuteAgo, minuteAgo, 0, ""),                // deleted
					info("c-young", minuteAgo, time.Time{}, deadPIDConst, "ci-1"), // kept
					info("c-fails", hourAgo, time.Time{}, deadPIDConst, "ci-1"),   // delete fails
				},
				delErr: map[string]error{"c-fails": errors.New("engine said no")},
			}
			ledger := &memLedger{entries: []state.Entry{
				{Provider: "docker", ID: "c-dead", PID: deadPIDConst},
				{Provider: "docker", ID: "c-gone", CreatedAt: hourAgo},
			}}
			rep, err := GCLedger(t.Context(), map[string]providers.Lister{"docker": docker}, ledger, time.Hour, dry, testOpts)
			if dry {
				if len(docker.deleted) != 0 || len(ledger.forgotten) != 0 {
					t.Errorf("dry run deleted %v and forgot %v, want nothing changed", docker.deleted, ledger.forgotten)
				}
			} else {
				if err == nil || !errors.Is(err, docker.delErr["c-fails"]) {
					t.Errorf("GC error = %v, want the c-fails deletion failure", err)
				}
				sort.Strings(docker.deleted)
				if diff := cmp.Diff([]string{"c-dead", "c-expired"}, docker.deleted); diff != "" {
					t.Errorf("deleted (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"docker/c-dead", "docker/c-gone"}, sortedCopy(ledger.forgotten)); diff != "" {
					t.Errorf("forgotten (-want +got):\n%s", diff)
				}
			}
			ids := func(as []Action) []string {
				var out []string
				for _, a := range as {
					out = append(out, a.ID)
				}
				sort.Strings(out)
				return out
			}
			wantDeleted := []string{"c-dead", "c-expired"}
			wantFailed := []string{"c-fails"}
			if dry {
				wantDeleted = []string{"c-dead", "c-expired", "c-fails"}
				wantFailed = nil
			}
			got := map[string][]string{"deleted": ids(rep.Deleted), "kept": ids(rep.Kept), "forgotten": ids(rep.Forgotten), "failed": ids(rep.Failed)}
			want := map[string][]string{"deleted": wantDeleted, "kept": {"c-live", "c-young"}, "forgotten": {"c-gone"}, "failed": wantFailed}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GC report (-want +got):\n%s", diff)
			}
			if rep.DryRun != dry {
				t.Errorf("Report.DryRun = %v, want %v", rep.DryRun, dry)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func TestListAndGCOneRun(t *testing.T) {
	t.Parallel()
	docker := &fakeLister{infos: []providers.Info{
		info("c-mine", hourAgo, time.Time{}, deadPIDConst, "ci-1"),
		info("c-theirs", hourAgo, time.Time{}, deadPIDConst, "ci-1"),
	}}
	docker.infos[0].RunID, docker.infos[1].RunID = "run-mine", "run-theirs"
	opts := testOpts
	opts.RunID = "run-mine"
	got, err := ListLedger(t.Context(), map[string]providers.Lister{"docker": docker}, &memLedger{}, opts)
	if err != nil || len(got) != 1 || got[0].ID != "c-mine" {
		t.Fatalf("ListLedger(RunID) = %+v, %v; want only c-mine", got, err)
	}
	rep, err := GCLedger(t.Context(), map[string]providers.Lister{"docker": docker}, &memLedger{}, 0, false, opts)
	if err != nil || len(rep.Deleted) != 1 || rep.Deleted[0].ID != "c-mine" {
		t.Fatalf("GCLedger(RunID) deleted %+v, %v; want only c-mine", rep.Deleted, err)
	}
}

// A SIGKILLed talkops that its parent has not reaped yet is a zombie: it owns nothing.
func TestPIDAliveZombie(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for !zombie(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if PIDAlive(pid) {
		t.Errorf("PIDAlive(%d) = true for an exited, unreaped process", pid)
	}
	_ = cmd.Wait()
	if !PIDAlive(os.Getpid()) {
		t.Error("PIDAlive(self) = false")
	}
}

// sweepingLister is a fakeLister that also keeps leftovers (a Sweeper).
type sweepingLister struct {
	fakeLister
	sweeps   int
	sweepErr error
}

func (s *sweepingLister) Sweep(ctx context.Context) error {
	s.sweeps++
	return s.sweepErr
}

// TestGCSweeps: gc runs each Sweeper once, reports its failure under the provider's
// name, and a dry run sweeps nothing.
func TestGCSweeps(t *testing.T) {
	t.Parallel()
	bwrap := &sweepingLister{}
	listers := map[string]providers.Lister{"bwrap": bwrap, "docker": &fakeLister{}}
	if _, err := GCLedger(t.Context(), listers, &memLedger{}, 0, true, testOpts); err != nil || bwrap.sweeps != 0 {
		t.Fatalf("dry run: %v, %d sweeps; want none", err, bwrap.sweeps)
	}
	if _, err := GCLedger(t.Context(), listers, &memLedger{}, 0, false, testOpts); err != nil || bwrap.sweeps != 1 {
		t.Fatalf("gc: %v, %d sweeps; want one", err, bwrap.sweeps)
	}
	bwrap.sweepErr = errors.New("trash unreadable")
	if _, err := GCLedger(t.Context(), listers, &memLedger{}, 0, false, testOpts); err == nil || !strings.Contains(err.Error(), "bwrap: trash unreadable") {
		t.Errorf("gc with a failing sweep: %v; want the provider's error", err)
	}
}
