package reaper

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
)

// TestGCWithStateDir runs gc against the real on-disk ledger.
func TestGCWithStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour).UTC()
	dead := deadPID(t)
	for _, e := range []state.Entry{
		{Provider: "docker", ID: "c-orphan", RunID: "r1", CreatedAt: old, PID: dead},
		{Provider: "docker", ID: "c-vanished", RunID: "r2", CreatedAt: old, PID: dead},
	} {
		if err := state.Record(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	docker := &fakeLister{infos: []providers.Info{{Provider: "docker", ID: "c-orphan", CreatedAt: old, State: "running"}}}
	listers := map[string]providers.Lister{"docker": docker}

	entries, err := List(t.Context(), listers, dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.ID+":"+e.State+":"+e.Owner)
	}
	if diff := cmp.Diff([]string{"c-orphan:running:gone", "c-vanished:gone:gone"}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	if _, err := GC(t.Context(), listers, dir, time.Hour, true); err != nil {
		t.Fatal(err)
	}
	if left, _ := state.List(dir); len(left) != 2 || len(docker.deleted) != 0 {
		t.Fatalf("dry run changed things: ledger %v, deleted %v", left, docker.deleted)
	}
	rep, err := GC(t.Context(), listers, dir, time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) != 1 || len(rep.Forgotten) != 1 {
		t.Errorf("GC report = %+v, want one deleted and one forgotten", rep)
	}
	if left, _ := state.List(dir); len(left) != 0 {
		t.Errorf("ledger after gc = %v, want empty", left)
	}
	if diff := cmp.Diff([]string{"c-orphan"}, docker.deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

// TestLedgerProviders: the providers a ledger names, for one run or for all; a missing
// ledger names none.
func TestLedgerProviders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, e := range []state.Entry{
		{Provider: "docker", ID: "c1", RunID: "a"},
		{Provider: "docker", ID: "v1", RunID: "a"},
		{Provider: "bwrap", ID: "b1", RunID: "a"},
		{Provider: "daytona", ID: "d1", RunID: "b"},
		{Provider: "modal", RunID: "c", PID: 7, Pending: true}, // a create killed in flight
	} {
		if err := state.Record(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	for runID, want := range map[string][]string{"a": {"bwrap", "docker"}, "b": {"daytona"}, "c": {"modal"}, "d": nil, "": {"bwrap", "daytona", "docker", "modal"}} {
		got, err := LedgerProviders(dir, runID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("run %q: providers (-want +got):\n%s", runID, diff)
		}
	}
	if got, err := LedgerProviders(dir+"/missing", ""); err != nil || len(got) != 0 {
		t.Errorf("missing ledger: %v, %v; want none and no error", got, err)
	}
}

// TestGCPendingWithStateDir: a run killed mid-create left a pending entry on disk and a
// sandbox with only its run id; gc deletes the sandbox and removes the pending file.
func TestGCPendingWithStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	created := time.Now().Add(-time.Second).UTC()
	host, _ := os.Hostname()
	pending := state.Entry{Provider: "daytona", RunID: "r1", CreatedAt: created, PID: deadPID(t), Host: host, Pending: true}
	if err := state.Record(dir, pending); err != nil {
		t.Fatal(err)
	}
	lister := &fakeLister{infos: []providers.Info{cloudInfo("sb-1", "r1", created, created.Add(time.Hour))}}
	rep, err := GC(t.Context(), map[string]providers.Lister{"daytona": lister}, dir, 0, false, Options{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sb-1"}, lister.deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s\nreport %+v", diff, rep)
	}
	if left, err := state.List(dir); len(left) != 0 || err != nil {
		t.Errorf("ledger after gc = %+v, %v; want empty", left, err)
	}
}
