// Package reaper finds and deletes the sandboxes that talkops runs left behind, merging
// the local ledger (providers/state) with what each provider's Lister reports; it backs
// `talkops sandbox ls` and `talkops sandbox gc`.
package reaper

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/state"
)

// ListerFunc builds the listers for the named providers; with no names, for the
// configured provider and those in ledger (LedgerProviders), each that can list. The CLI
// binds one built from its provider map. Listers that implement io.Closer are closed
// after use.
type ListerFunc func(ctx context.Context, names, ledger []string) (map[string]providers.Lister, error)

// Sweeper is a Lister that also leaves things that are not sandboxes behind (bwrap's
// trash of torn-down workspace layers); gc calls Sweep after deleting sandboxes.
type Sweeper interface {
	Sweep(ctx context.Context) error
}

// Ledger is the local record of created sandboxes (providers/state on disk): one
// state.Entry per sandbox a run created, and one pending state.Entry per create that has
// not returned an id yet.
type Ledger interface {
	Entries() ([]state.Entry, error)
	// Forget removes an entry; a missing one is not an error.
	Forget(provider, id string) error
	// ForgetPending removes the pending entry of a create by pid for runID; a missing
	// one is not an error.
	ForgetPending(provider, runID string, pid int) error
}

// Owner states of an Entry.
const (
	OwnerAlive   = "alive"   // the owning talkops process runs on this host
	OwnerGone    = "gone"    // the owning process is known and not running
	OwnerUnknown = "unknown" // no PID recorded, or it ran on another host
)

// States of an Entry besides what the provider reports.
const (
	StateGone      = "gone"      // in the ledger, but the provider no longer has it
	StateUnchecked = "unchecked" // in the ledger, and the provider could not be asked
	// StatePending is a pending create in the ledger (no id known) whose provider lists
	// no sandbox of its run.
	StatePending = "pending"
)

// Entry is one sandbox, merged from the ledger and the provider.
type Entry struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	RunID    string `json:"run_id,omitempty"`
	// State is the provider's ("running", "exited", ...), StateGone, StateUnchecked or
	// StatePending.
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	OwnerPID  int       `json:"owner_pid,omitempty"`
	OwnerHost string    `json:"owner_host,omitempty"`
	Owner     string    `json:"owner"`
	InLedger  bool      `json:"in_ledger"`
	// Pending marks a pending create from the ledger, not a sandbox: ID is empty, State
	// is StatePending or StateUnchecked, and the owner is the process that asked.
	Pending    bool              `json:"pending,omitempty"`
	ProjectDir string            `json:"project_dir,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// Action is what gc did, or would do, with one entry and why.
type Action struct {
	Entry
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// Report is the outcome of GC.
type Report struct {
	DryRun bool `json:"dry_run"`
	// Deleted sandboxes (or, in a dry run, those that would be).
	Deleted []Action `json:"deleted"`
	// Forgotten ledger entries whose sandbox is already gone, and pending creates of
	// dead runs that left no sandbox.
	Forgotten []Action `json:"forgotten"`
	// Kept sandboxes, each with the reason.
	Kept []Action `json:"kept"`
	// Failed deletions.
	Failed []Action `json:"failed"`
}

// Options tune List and GC. The zero value is usable.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Hostname is this host's name for owner checks; "" means os.Hostname.
	Hostname string
	// Alive reports whether a PID runs on this host; nil means kill(pid, 0).
	Alive func(pid int) bool
	// RunID, when set, limits List and GC to the sandboxes of that run.
	RunID string
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) alive(pid int) bool {
	if o.Alive != nil {
		return o.Alive(pid)
	}
	return PIDAlive(pid)
}

func (o Options) hostname() string {
	if o.Hostname != "" {
		return o.Hostname
	}
	h, _ := os.Hostname()
	return h
}

// PIDAlive reports whether pid names a process on this host.
func PIDAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

// zombie reports a process that has exited but not been reaped yet (a SIGKILLed talkops
// whose parent has not waited for it): it owns nothing any more.
func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may contain any byte.
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && i+2 < len(data) && data[i+2] == 'Z'
}

// ListLedger merges the ledger with every lister's sandboxes. A provider that fails to
// list is reported in the returned error (one per provider, joined) and its ledger
// entries come back as StateUnchecked; the other providers' entries are still returned.
//
// A pending create in the ledger names the owner of the listed sandboxes of its provider
// and run that no entry or owner label claims (its create made them, or the run would
// have recorded them), and comes back itself as a Pending entry.
func ListLedger(ctx context.Context, listers map[string]providers.Lister, ledger Ledger, opts Options) ([]Entry, error) {
	var errs []error
	var recs []state.Entry
	if ledger != nil {
		var err error
		recs, err = ledger.Entries()
		if err != nil {
			errs = append(errs, fmt.Errorf("read the sandbox ledger: %w", err))
		}
	}
	listed := map[string]bool{} // providers whose List succeeded
	byKey := map[string]*Entry{}
	var order []string
	add := func(e Entry) *Entry {
		k := e.Provider + "\x00" + e.ID
		if got, ok := byKey[k]; ok {
			return got
		}
		byKey[k] = &e
		order = append(order, k)
		return byKey[k]
	}
	names := make([]string, 0, len(listers))
	for name := range listers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		infos, err := listers[name].List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s sandboxes: %w", name, err))
			continue
		}
		listed[name] = true
		for _, in := range infos {
			e := add(Entry{Provider: name, ID: in.ID})
			e.RunID, e.State, e.CreatedAt, e.ExpiresAt, e.Labels = in.RunID, in.State, in.CreatedAt, in.ExpiresAt, in.Labels
			if pid, err := strconv.Atoi(in.Labels[providers.LabelOwnerPID]); err == nil {
				e.OwnerPID = pid
			}
			e.OwnerHost = in.Labels[providers.LabelOwnerHost]
		}
	}
	host := opts.hostname()
	var pending []state.Entry
	for _, r := range recs {
		if len(listers) > 0 && listers[r.Provider] == nil {
			continue // not one of the providers asked about
		}
		if r.Pending {
			pending = append(pending, r)
			continue
		}
		k := r.Provider + "\x00" + r.ID
		e, known := byKey[k]
		if !known {
			state := StateUnchecked
			if listed[r.Provider] {
				state = StateGone
			}
			e = add(Entry{Provider: r.Provider, ID: r.ID, State: state})
		}
		e.InLedger = true
		if e.RunID == "" {
			e.RunID = r.RunID
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = r.CreatedAt
		}
		if e.ExpiresAt.IsZero() {
			e.ExpiresAt = r.ExpiresAt
		}
		e.ProjectDir = r.ProjectDir
		if r.PID > 0 {
			// An entry without a host predates the field: the ledger is local, so its
			// PID is one of this host's.
			e.OwnerPID, e.OwnerHost = r.PID, cmp.Or(r.Host, host)
		}
	}
	for _, r := range pending {
		k := fmt.Sprintf("%s\x00pending\x00%s\x00%d", r.Provider, r.RunID, r.PID) // no id is empty
		byKey[k] = claimForPending(r, cmp.Or(r.Host, host), listed[r.Provider], byKey, order)
		order = append(order, k)
	}
	out := make([]Entry, 0, len(order))
	for _, k := range order {
		e := byKey[k]
		if opts.RunID != "" && e.RunID != opts.RunID {
			continue
		}
		e.Owner = ownerState(*e, host, opts)
		out = append(out, *e)
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		if c := strings.Compare(a.Provider, b.Provider); c != 0 {
			return c
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
	return out, errors.Join(errs...)
}

// claimForPending makes the process of pending create r (on host owner) the owner of the
// listed sandboxes of its provider and run that nothing else claims, and returns r as a
// Pending entry.
func claimForPending(r state.Entry, owner string, listed bool, byKey map[string]*Entry, order []string) *Entry {
	for _, k := range order {
		e := byKey[k]
		if e.Provider != r.Provider || e.RunID != r.RunID || e.Pending || e.State == StateGone || e.State == StateUnchecked {
			continue
		}
		if e.OwnerPID <= 0 {
			e.OwnerPID, e.OwnerHost = r.PID, owner
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = r.CreatedAt // the create was asked for then: no younger
		}
	}
	st := StatePending
	if !listed {
		st = StateUnchecked
	}
	return &Entry{Provider: r.Provider, RunID: r.RunID, State: st, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		OwnerPID: r.PID, OwnerHost: owner, InLedger: true, Pending: true, ProjectDir: r.ProjectDir}
}

func ownerState(e Entry, host string, opts Options) string {
	if e.OwnerPID <= 0 || (e.OwnerHost != "" && e.OwnerHost != host) {
		return OwnerUnknown
	}
	if opts.alive(e.OwnerPID) {
		return OwnerAlive
	}
	return OwnerGone
}

// Decide says whether gc deletes e, and why. The rules, in order:
//   - a sandbox whose owning talkops process still runs on this host is kept;
//   - one past its expires-at label is deleted;
//   - one at least olderThan old is deleted when its owner is known to be gone or it has
//     no expiry (an unexpired sandbox whose owner cannot be checked, say from another
//     CI host sharing the engine, is left until it expires);
//   - everything else is kept.
func Decide(e Entry, olderThan time.Duration, now time.Time) (del bool, reason string) {
	age := now.Sub(e.CreatedAt)
	switch {
	case e.Owner == OwnerAlive:
		return false, fmt.Sprintf("owner pid %d is running", e.OwnerPID)
	case !e.ExpiresAt.IsZero() && !now.Before(e.ExpiresAt):
		return true, fmt.Sprintf("expired %s ago", roundDur(now.Sub(e.ExpiresAt)))
	case e.CreatedAt.IsZero():
		return false, "creation time unknown"
	case age < olderThan:
		return false, fmt.Sprintf("younger than %s", roundDur(olderThan))
	case e.Owner == OwnerGone:
		return true, fmt.Sprintf("%s old and owner pid %d is gone", roundDur(age), e.OwnerPID)
	case e.ExpiresAt.IsZero():
		return true, fmt.Sprintf("%s old, no expiry", roundDur(age))
	default:
		return false, fmt.Sprintf("owner cannot be checked from this host; expires in %s", roundDur(e.ExpiresAt.Sub(now)))
	}
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(time.Millisecond)
	}
}

// GCLedger deletes what Decide selects and forgets ledger entries whose sandbox is gone,
// then forgets the pending creates that DecidePending lets go. With dryRun it changes
// nothing and reports what it would do. Listing errors are returned joined with any
// deletion failures; the report is complete either way.
func GCLedger(ctx context.Context, listers map[string]providers.Lister, ledger Ledger, olderThan time.Duration, dryRun bool, opts Options) (Report, error) {
	rep := Report{DryRun: dryRun, Deleted: []Action{}, Forgotten: []Action{}, Kept: []Action{}, Failed: []Action{}}
	entries, listErr := ListLedger(ctx, listers, ledger, opts)
	now := opts.now()
	var errs []error
	if listErr != nil {
		errs = append(errs, listErr)
	}
	// The runs that still have a sandbox after this pass (or, in a dry run, would have).
	remaining := map[string]bool{}
	runKey := func(e Entry) string { return e.Provider + "\x00" + e.RunID }
	var pending []Entry
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if e.Pending {
			pending = append(pending, e)
			continue
		}
		switch e.State {
		case StateGone:
			a := Action{Entry: e, Reason: "the provider no longer has it"}
			if !dryRun && ledger != nil {
				if err := ledger.Forget(e.Provider, e.ID); err != nil {
					a.Error = err.Error()
					rep.Failed = append(rep.Failed, a)
					errs = append(errs, fmt.Errorf("forget %s sandbox %s: %w", e.Provider, e.ID, err))
					continue
				}
			}
			rep.Forgotten = append(rep.Forgotten, a)
			continue
		case StateUnchecked:
			rep.Kept = append(rep.Kept, Action{Entry: e, Reason: "the provider could not be asked"})
			remaining[runKey(e)] = true
			continue
		}
		del, reason := Decide(e, olderThan, now)
		a := Action{Entry: e, Reason: reason}
		if !del {
			rep.Kept = append(rep.Kept, a)
			remaining[runKey(e)] = true
			continue
		}
		if dryRun {
			rep.Deleted = append(rep.Deleted, a)
			continue
		}
		if err := listers[e.Provider].Delete(ctx, e.ID); err != nil {
			a.Error = err.Error()
			rep.Failed = append(rep.Failed, a)
			remaining[runKey(e)] = true
			errs = append(errs, fmt.Errorf("delete %s sandbox %s: %w", e.Provider, e.ID, err))
			continue
		}
		if e.InLedger && ledger != nil {
			if err := ledger.Forget(e.Provider, e.ID); err != nil {
				errs = append(errs, fmt.Errorf("forget %s sandbox %s: %w", e.Provider, e.ID, err))
			}
		}
		rep.Deleted = append(rep.Deleted, a)
	}
	for _, e := range pending {
		if ctx.Err() != nil {
			break // reported above
		}
		forget, reason := DecidePending(e, remaining[runKey(e)], olderThan, now)
		a := Action{Entry: e, Reason: reason}
		if !forget {
			rep.Kept = append(rep.Kept, a)
			continue
		}
		if !dryRun && ledger != nil {
			if err := ledger.ForgetPending(e.Provider, e.RunID, e.OwnerPID); err != nil {
				a.Error = err.Error()
				rep.Failed = append(rep.Failed, a)
				errs = append(errs, fmt.Errorf("forget the pending %s create of run %s: %w", e.Provider, e.RunID, err))
				continue
			}
		}
		rep.Forgotten = append(rep.Forgotten, a)
	}
	if !dryRun {
		errs = append(errs, sweep(ctx, listers))
	}
	return rep, errors.Join(errs...)
}

// sweep runs the listers' Sweep, in name order.
func sweep(ctx context.Context, listers map[string]providers.Lister) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(listers)) {
		if sw, ok := listers[name].(Sweeper); ok && ctx.Err() == nil {
			if err := sw.Sweep(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// DecidePending says whether gc forgets a pending create, and why. Its sandboxes were
// already judged by Decide, with the pending create's process as their owner; the
// record itself goes once it is no longer evidence of anything: its process is gone
// from this host, its run has no sandbox left (running holds whether one remains after
// this pass), and it is at least olderThan old, so a create the service finishes after
// its client died still finds the record within that window.
func DecidePending(e Entry, running bool, olderThan time.Duration, now time.Time) (forget bool, reason string) {
	age := now.Sub(e.CreatedAt)
	switch {
	case e.State == StateUnchecked:
		return false, "the provider could not be asked"
	case e.Owner == OwnerAlive:
		return false, fmt.Sprintf("create in flight: owner pid %d is running", e.OwnerPID)
	case e.Owner != OwnerGone:
		return false, fmt.Sprintf("pending create of pid %d on host %s: only that host can check it", e.OwnerPID, e.OwnerHost)
	case running:
		return false, "the run still has a sandbox"
	case age < olderThan:
		return false, fmt.Sprintf("younger than %s", roundDur(olderThan))
	default:
		return true, fmt.Sprintf("pending create of pid %d, which is gone, and its run has no sandbox", e.OwnerPID)
	}
}

// CloseListers closes the listers that hold resources (engine clients).
func CloseListers(listers map[string]providers.Lister) error {
	var errs []error
	for name, l := range listers {
		if c, ok := l.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}
