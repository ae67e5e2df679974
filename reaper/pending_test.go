package reaper

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
)

// cloudInfo is a sandbox of a provider without owner labels (daytona, modal, ...): only
// its run id says whose it is.
func cloudInfo(id, runID string, created, expires time.Time) providers.Info {
	return providers.Info{Provider: "daytona", ID: id, RunID: runID, CreatedAt: created, ExpiresAt: expires, State: "started",
		Labels: map[string]string{providers.LabelCreatedBy: "talkops", providers.LabelRunID: runID}}
}

func pendingEntry(runID string, pid int, host string, created time.Time) state.Entry {
	return state.Entry{Provider: "daytona", RunID: runID, PID: pid, Host: host, CreatedAt: created, Pending: true}
}

// A run killed while its create was in flight left a pending entry and, once the service
// finished the create, a sandbox with its run id and no owner labels. gc judges that
// sandbox with the pending entry's process as its owner, and forgets the pending entry
// once it is evidence of nothing.
func TestGCPendingCreate(t *testing.T) {
	t.Parallel()
	expires := now.Add(90 * time.Minute) // run timeout + 30 min: far off
	type want struct {
		deleted, kept, forgotten, failed []string // ids; "(pending)" for a pending create
		ledgerForgotten                  []string
	}
	for _, tc := range []struct {
		name      string
		infos     []providers.Info
		pending   []state.Entry
		olderThan time.Duration
		delErr    error
		listErr   error
		runID     string
		want      want
	}{{
		name:      "dead run, sandbox made: deleted at once under --older-than 0s",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", minuteAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", minuteAgo)},
		olderThan: 0,
		want: want{deleted: []string{"sb-1"}, forgotten: []string{"(pending)"},
			ledgerForgotten: []string{"daytona/pending-run-1-5353"}},
	}, {
		name:      "dead run, no host recorded: this host's",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", minuteAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "", minuteAgo)},
		olderThan: 0,
		want: want{deleted: []string{"sb-1"}, forgotten: []string{"(pending)"},
			ledgerForgotten: []string{"daytona/pending-run-1-5353"}},
	}, {
		name:      "live run: create in flight or just returned, never touched",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", minuteAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", livePID, "ci-1", hourAgo)},
		olderThan: 0,
		want:      want{kept: []string{"(pending)", "sb-1"}},
	}, {
		name:      "live run, nothing made yet",
		pending:   []state.Entry{pendingEntry("run-1", livePID, "ci-1", hourAgo)},
		olderThan: 0,
		want:      want{kept: []string{"(pending)"}},
	}, {
		name:      "another host's pending create is no evidence here",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", hourAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-2", hourAgo)},
		olderThan: 0,
		want:      want{kept: []string{"(pending)", "sb-1"}},
	}, {
		name:      "dead run, sandbox younger than --older-than",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", minuteAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", minuteAgo)},
		olderThan: time.Hour,
		want:      want{kept: []string{"(pending)", "sb-1"}},
	}, {
		name:      "dead run, sandbox old enough",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", hourAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", hourAgo)},
		olderThan: time.Hour,
		want: want{deleted: []string{"sb-1"}, forgotten: []string{"(pending)"},
			ledgerForgotten: []string{"daytona/pending-run-1-5353"}},
	}, {
		name:      "dead run that made nothing: the pending entry goes",
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", minuteAgo)},
		olderThan: 0,
		want:      want{forgotten: []string{"(pending)"}, ledgerForgotten: []string{"daytona/pending-run-1-5353"}},
	}, {
		name:      "dead run that made nothing yet, younger than --older-than: the service may still finish it",
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", minuteAgo)},
		olderThan: time.Hour,
		want:      want{kept: []string{"(pending)"}},
	}, {
		name:      "delete fails: the pending entry stays",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", minuteAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", minuteAgo)},
		delErr:    errors.New("service said no"),
		olderThan: 0,
		want:      want{failed: []string{"sb-1"}, kept: []string{"(pending)"}},
	}, {
		name:      "provider cannot be asked",
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", minuteAgo)},
		listErr:   errors.New("service down"),
		olderThan: 0,
		want:      want{kept: []string{"(pending)"}},
	}, {
		name:      "another run's sandbox is not the pending create's",
		infos:     []providers.Info{cloudInfo("sb-2", "run-2", hourAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", hourAgo)},
		olderThan: 0,
		want:      want{kept: []string{"sb-2"}, forgotten: []string{"(pending)"}, ledgerForgotten: []string{"daytona/pending-run-1-5353"}},
	}, {
		name:      "--run-id leaves other runs' pending creates alone",
		infos:     []providers.Info{cloudInfo("sb-1", "run-1", minuteAgo, expires)},
		pending:   []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", minuteAgo), pendingEntry("run-2", deadPIDConst, "ci-1", minuteAgo)},
		runID:     "run-1",
		olderThan: 0,
		want: want{deleted: []string{"sb-1"}, forgotten: []string{"(pending)"},
			ledgerForgotten: []string{"daytona/pending-run-1-5353"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lister := &fakeLister{infos: tc.infos, listErr: tc.listErr, delErr: map[string]error{}}
			for _, in := range tc.infos {
				lister.delErr[in.ID] = tc.delErr
			}
			ledger := &memLedger{entries: tc.pending}
			opts := testOpts
			opts.RunID = tc.runID
			rep, err := GCLedger(t.Context(), map[string]providers.Lister{"daytona": lister}, ledger, tc.olderThan, false, opts)
			if wantErr := tc.delErr != nil || tc.listErr != nil; (err != nil) != wantErr {
				t.Errorf("GCLedger error = %v, want one: %v", err, wantErr)
			}
			ids := func(as []Action) []string {
				var out []string
				for _, a := range as {
					out = append(out, idCell(a.Entry))
				}
				sort.Strings(out)
				return out
			}
			got := want{deleted: ids(rep.Deleted), kept: ids(rep.Kept), forgotten: ids(rep.Forgotten), failed: ids(rep.Failed),
				ledgerForgotten: ledger.forgotten}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("GC (-want +got):\n%s\nreport: %+v", diff, rep)
			}
		})
	}
}

// The owner a pending create names is the one the listing shows, with the reason gc
// gives; an owner label or a ledger entry wins over it.
func TestListPendingOwner(t *testing.T) {
	t.Parallel()
	labelled := cloudInfo("sb-labelled", "run-1", hourAgo, time.Time{})
	labelled.Labels[providers.LabelOwnerPID] = fmt.Sprint(livePID)
	labelled.Labels[providers.LabelOwnerHost] = "ci-1"
	lister := &fakeLister{infos: []providers.Info{cloudInfo("sb-1", "run-1", time.Time{}, time.Time{}), labelled}}
	ledger := &memLedger{entries: []state.Entry{pendingEntry("run-1", deadPIDConst, "ci-1", hourAgo)}}
	got, err := ListLedger(t.Context(), map[string]providers.Lister{"daytona": lister}, ledger, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, State, Owner string
		PID              int
		Created          time.Time
		Pending          bool
	}
	var rows []row
	for _, e := range got {
		rows = append(rows, row{idCell(e), e.State, e.Owner, e.OwnerPID, e.CreatedAt, e.Pending})
	}
	want := []row{
		{"sb-1", "started", OwnerGone, deadPIDConst, hourAgo, false}, // no creation time listed: the pending create's
		{"sb-labelled", "started", OwnerAlive, livePID, hourAgo, false},
		{"(pending)", StatePending, OwnerGone, deadPIDConst, hourAgo, true},
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Pending != rows[j].Pending && !rows[i].Pending })
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("ListLedger (-want +got):\n%s", diff)
	}
	if del, reason := Decide(got[0], 0, now); !del || reason != "1h0m0s old and owner pid 5353 is gone" {
		t.Errorf("Decide(%+v) = %v, %q", got[0], del, reason)
	}
}
