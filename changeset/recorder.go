package changeset

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/rubric/evidence"
)

// MaxListed caps the paths a result.ChangeSet lists (the counts include every path).
const MaxListed = 5000

// Recorder keeps the host-side record of one run: the baseline after setup and the latest
// agent pass, with their contents in two Stores (so a baseline that fills its cap cannot
// crowd out the agent's changes). It implements runner.Workspace and evidence.Differ.
type Recorder struct {
	// Skip leaves paths out of every record (talkops' own reports and scripts).
	Skip func(p string) bool
	// Protected says which paths keep their baseline content in a clean room.
	Protected func(p string) bool
	// Timeout bounds one capture (0: DefaultTimeout).
	Timeout time.Duration
	// ViaFile reads the archive through a file in the sandbox and Download (see
	// CaptureOptions.ViaFile).
	ViaFile bool
	// Dir is where the stores are created ("": the system temp dir); MaxBytes caps each
	// (0: DefaultStoreMaxBytes). The stores are created by Baseline.
	Dir      string
	MaxBytes int64

	mu   sync.Mutex
	base *Store
	pass *Store
	bt   *Tree
	now  *Tree
	set  *Set
}

// Baseline records the workspace after the setup script.
func (r *Recorder) Baseline(ctx context.Context, sb providers.Sandbox) (*result.WorkspaceRecord, error) {
	if err := r.open(); err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	t, err := Capture(ctx, sb, CaptureOptions{Store: r.base, Skip: r.Skip, Timeout: r.Timeout, ViaFile: r.ViaFile})
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	r.mu.Lock()
	r.bt = t
	r.mu.Unlock()
	rec := &result.WorkspaceRecord{Entries: t.Len(), Bytes: t.Bytes, DurationMS: t.Duration.Milliseconds(),
		StoreRefusedBytes: r.base.Refused(), Warning: t.Warning}
	if rec.StoreRefusedBytes > 0 {
		rec.Warning = strings.TrimPrefix(rec.Warning+"; ", "; ") + fmt.Sprintf(
			"%d MiB of the baseline's contents exceed the host store's cap and were not kept: their diffs are not shown", rec.StoreRefusedBytes>>20)
	}
	return rec, nil
}

// Changes records the workspace after agent pass n and computes the change set. Only the
// contents the baseline does not hold are stored.
func (r *Recorder) Changes(ctx context.Context, sb providers.Sandbox, n int) (*result.ChangeSet, error) {
	r.mu.Lock()
	bt := r.bt
	r.mu.Unlock()
	if bt == nil {
		return nil, errors.New("changes: no baseline was recorded")
	}
	// Keep what the agent changed; the baseline's store already holds the rest.
	keep := func(e Entry) bool {
		was, ok := bt.Get(e.Path)
		return (!ok || was.SHA256 != e.SHA256) && !r.base.Has(e.SHA256)
	}
	t, err := Capture(ctx, sb, CaptureOptions{Store: r.pass, Keep: keep, Skip: r.Skip, Timeout: r.Timeout, ViaFile: r.ViaFile})
	if err != nil {
		return nil, fmt.Errorf("changes after agent pass %d: %w", n, err)
	}
	set := Compare(bt, t)
	r.mu.Lock()
	r.now, r.set = t, set
	r.mu.Unlock()
	return set.Record(n, MaxListed), nil
}

// Materialize writes the baseline into dir.
func (r *Recorder) Materialize(dir string) error {
	r.mu.Lock()
	bt := r.bt
	r.mu.Unlock()
	if bt == nil {
		return errors.New("materialize: no baseline was recorded")
	}
	if n := r.base.Refused(); n > 0 {
		return fmt.Errorf("materialize: %d MiB of the baseline were not kept on the host (the store's cap); use verify = \"in-place\" or make the workspace smaller", n>>20)
	}
	return bt.Materialize(dir, r.base)
}

// Apply replays the latest change set in sb, except protected paths.
func (r *Recorder) Apply(ctx context.Context, sb providers.Sandbox, room *result.CleanRoom) error {
	r.mu.Lock()
	bt, set := r.bt, r.set
	r.mu.Unlock()
	if bt == nil || set == nil {
		return errors.New("apply: no change set was recorded")
	}
	protected := r.Protected
	if protected == nil {
		protected = func(string) bool { return false }
	}
	got, err := set.Apply(ctx, sb, bt, contents{r.pass, r.base}, protected)
	room.Written, room.Removed, room.Kept, room.NotApplied = got.Written, got.Removed, got.Kept, got.NotApplied
	return err
}

// Diff is the judge's diff evidence: the latest change set, computed on the host.
func (r *Recorder) Diff(context.Context, providers.Sandbox) (*evidence.Diff, error) {
	r.mu.Lock()
	set := r.set
	r.mu.Unlock()
	if set == nil {
		return nil, errors.New("the runner recorded no change set")
	}
	return set.Evidence(contents{r.pass, r.base}), nil
}

// BaselineDigests and LatestDigests are the protected-path comparison's two sides
// (path → sha256 or "symlink:TARGET"); nil when not recorded.
func (r *Recorder) BaselineDigests() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bt == nil {
		return nil
	}
	return r.bt.Digests()
}

// LatestDigests returns the digests of the latest agent pass.
func (r *Recorder) LatestDigests(context.Context) (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now == nil {
		return nil, errors.New("the runner recorded no workspace after the agent's pass")
	}
	return r.now.Digests(), nil
}

func (r *Recorder) open() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base != nil {
		return nil
	}
	base, err := NewStore(r.Dir, r.MaxBytes)
	if err != nil {
		return err
	}
	pass, err := NewStore(r.Dir, r.MaxBytes)
	if err != nil {
		base.Close()
		return err
	}
	r.base, r.pass = base, pass
	return nil
}

// Close removes both stores.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.base.Close(), r.pass.Close())
}

// Record is the change set as result.json lists it.
func (s *Set) Record(pass, limit int) *result.ChangeSet {
	cs := &result.ChangeSet{Pass: pass, Paths: []result.PathChange{}}
	for _, c := range s.Changes {
		switch c.Kind {
		case Added:
			cs.Added++
		case Modified:
			cs.Changed++
		case Removed:
			cs.Removed++
		default:
			cs.Other++
		}
		if len(cs.Paths) >= limit {
			cs.Omitted++
			continue
		}
		e := c.After
		if c.Kind == Removed {
			e = c.Before
		}
		pc := result.PathChange{Path: c.Path, Change: c.Kind, Type: e.Type, Size: e.Size, SHA256: e.SHA256,
			Target: e.Target, Mode: fmt.Sprintf("%04o", e.Mode.Perm())}
		if c.Kind == Modified {
			pc.BeforeSHA256 = c.Before.SHA256
		}
		if c.Kind == TypeChanged {
			pc.BeforeType = c.Before.Type
		}
		cs.Paths = append(cs.Paths, pc)
	}
	return cs
}

// SkipUnder returns a Skip that leaves out talkops' own files in a run's workspace: the
// scratch directory .talkops/tmp (where the setup script goes), and the report directory
// (slash-separated, relative to the project; "" when it lies outside).
func SkipUnder(reportDir string) func(p string) bool {
	skip := []string{".talkops/tmp"}
	if reportDir != "" {
		skip = append(skip, reportDir)
	}
	return func(p string) bool {
		for _, s := range skip {
			if p == s || strings.HasPrefix(p, s+"/") {
				return true
			}
		}
		return false
	}
}
