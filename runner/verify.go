package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

// How a clean room gets the baseline.
const (
	// CleanRoomProvisioned: a new sandbox of the same provider and snapshot, the project
	// synced and the setup script run.
	CleanRoomProvisioned = "provisioned"
	// CleanRoomMaterialized: the host baseline written to a new host directory, for
	// providers that run in one (local).
	CleanRoomMaterialized = "materialized"
)

// Workspace records the sandbox workspace on the host, where the agent cannot reach it:
// the baseline after the setup script, and after each agent pass the change set against
// it. The rubric's diff evidence and protected-path comparison read this record; a clean
// room is built from it.
type Workspace interface {
	// Baseline records the workspace before the agent's first tool call.
	Baseline(ctx context.Context, sb providers.Sandbox) (*result.WorkspaceRecord, error)
	// Changes records the workspace after agent pass n and returns the change set.
	Changes(ctx context.Context, sb providers.Sandbox, n int) (*result.ChangeSet, error)
	// Materialize writes the baseline into dir, an empty host directory.
	Materialize(dir string) error
	// Apply replays the latest change set in a clean room holding the baseline, leaving
	// protected paths at their baseline content, and records what it did in room.
	Apply(ctx context.Context, sb providers.Sandbox, room *result.CleanRoom) error
	// Close removes what the record keeps on the host.
	Close() error
}

// Warnings recorded in result.json when the verdict trusts the agent's sandbox.
const (
	warnInPlace  = "verify = in-place: checks ran in the sandbox the agent had a shell in, so the verdict trusts that sandbox (its files, tools and processes)"
	warnFallback = "a clean room was requested but %s; checks ran in the agent's sandbox, so the verdict trusts that sandbox"
)

// planVerification decides the mode that will run and records it.
func (r *run) planVerification() {
	if r.opts.NewAgent == nil {
		if r.opts.Rubric != nil {
			// A checks-only run: nobody had a shell in the sandbox before the checks.
			r.res.Verification = &result.Verification{Mode: result.VerifyInPlace}
		}
		return
	}
	v := &result.Verification{Mode: r.opts.Verify}
	if v.Mode == "" {
		v.Mode = result.VerifyClean
	}
	switch {
	case v.Mode == result.VerifyInPlace:
		v.Warning = warnInPlace
	case r.opts.Workspace == nil:
		v.Requested, v.Mode = v.Mode, result.VerifyInPlace
		v.Warning = fmt.Sprintf(warnFallback, "the workspace is not recorded on the host")
	case r.opts.CleanRoom == "":
		v.Requested, v.Mode = v.Mode, result.VerifyInPlace
		v.Warning = fmt.Sprintf(warnFallback, cmp.Or(r.opts.NoCleanRoom, "this provider cannot make one"))
	}
	r.res.Verification = v
	if v.Warning != "" && r.opts.Rubric != nil {
		r.emit(events.Event{Type: events.Warning, Stage: result.StageRubric, Message: v.Warning})
	}
}

func (r *run) clean() bool {
	return r.res.Verification != nil && r.res.Verification.Mode == result.VerifyClean && r.opts.NewAgent != nil
}

func (r *run) baseline(ctx context.Context) error {
	rec, err := r.opts.Workspace.Baseline(ctx, r.sb)
	if err != nil {
		return err
	}
	r.res.Verification.Baseline = rec
	if rec.Warning != "" {
		r.emit(events.Event{Type: events.Warning, Stage: result.StageBaseline, Message: rec.Warning})
	}
	return nil
}

func (r *run) changes(ctx context.Context, n int) error {
	cs, err := r.opts.Workspace.Changes(ctx, r.sb, n)
	if err != nil {
		return err
	}
	r.res.Verification.Changes = cs
	return nil
}

// cleanRoom is an open clean room.
type cleanRoom struct {
	sb      providers.Sandbox
	created bool   // in the ledger, must be deleted
	dir     string // a materialized host directory to remove
	idx     int    // into res.Verification.CleanRooms
}

// evaluateClean runs one rubric iteration in a new clean room, torn down before it returns
// (and by teardown on a panic).
func (r *run) evaluateClean(ctx context.Context, eval func(context.Context, providers.Sandbox) error) bool {
	defer r.closeCleanRoom(ctx)
	if !r.stage(ctx, result.StageVerify, r.openCleanRoom) {
		return false
	}
	r.mu.Lock()
	sb := r.room.sb
	r.mu.Unlock()
	return r.stage(ctx, result.StageRubric, func(ctx context.Context) error { return eval(ctx, sb) })
}

func (r *run) openCleanRoom(ctx context.Context) error {
	start := time.Now()
	v := r.res.Verification
	n := len(r.res.Rubric.Iterations) + 1
	r.mu.Lock()
	v.CleanRooms = append(v.CleanRooms, result.CleanRoom{Iteration: n, Source: r.opts.CleanRoom, Teardown: result.TeardownNone})
	room := &cleanRoom{idx: len(v.CleanRooms) - 1}
	r.room = room
	r.mu.Unlock()
	rec := &v.CleanRooms[room.idx]
	defer func() { rec.DurationMS = time.Since(start).Milliseconds() }()
	fail := func(err error) error {
		rec.Error = err.Error()
		return err
	}
	spec := r.opts.Spec
	if r.opts.CleanRoom == CleanRoomMaterialized {
		dir, err := os.MkdirTemp("", "talkops-cleanroom-")
		if err != nil {
			return fail(fmt.Errorf("clean room: %w", err))
		}
		room.dir = dir
		if err := r.opts.Workspace.Materialize(dir); err != nil {
			return fail(fmt.Errorf("clean room: %w", err))
		}
		spec.ProjectDir, spec.WorkDir = dir, ""
	}
	sb, err := r.create(ctx, spec)
	if err != nil {
		return fail(fmt.Errorf("clean room: create %s sandbox: %w", r.opts.ProviderName, err))
	}
	r.mu.Lock()
	room.sb, room.created = sb, true
	r.mu.Unlock()
	rec.SandboxID = sb.ID()
	if r.opts.Ledger != nil {
		if err := r.opts.Ledger.Record(sb, spec); err != nil {
			return fail(fmt.Errorf("clean room: record sandbox %s in the state file: %w", sb.ID(), err))
		}
	}
	_ = r.writeResult() // a failure is logged; the final write decides
	if r.opts.CleanRoom == CleanRoomProvisioned {
		if r.opts.Sync != nil {
			if _, err := r.opts.Sync(ctx, sb, events.Discard); err != nil {
				return fail(fmt.Errorf("clean room: sync workspace: %w", err))
			}
		}
		if r.opts.SetupScript != nil {
			if _, err := r.runSetup(ctx, sb, result.StageVerify); err != nil {
				return fail(fmt.Errorf("clean room: %w", err))
			}
		}
	}
	if err := r.opts.Workspace.Apply(ctx, sb, rec); err != nil {
		return fail(fmt.Errorf("clean room: %w", err))
	}
	return nil
}

// closeCleanRoom deletes the open clean room, if any, on a context that survives the
// run's cancellation, and forgets it in the ledger.
func (r *run) closeCleanRoom(parent context.Context) {
	r.mu.Lock()
	room := r.room
	r.room = nil
	r.mu.Unlock()
	if room == nil {
		return
	}
	ctx, cancel := r.teardownContext(parent)
	defer cancel()
	var errs []error
	status := result.TeardownNone
	if room.sb != nil {
		status = result.TeardownDeleted
		if err := recovered(func() error { return room.sb.Close(ctx) }); err != nil {
			status = result.TeardownFailed
			errs = append(errs, fmt.Errorf("delete clean room %s: %w (run `talkops sandbox gc` to retry)", room.sb.ID(), err))
		} else if room.created && r.opts.Ledger != nil {
			if err := recovered(func() error { return r.opts.Ledger.Forget(room.sb) }); err != nil {
				r.log.Warn().Err(err).Msg("clean room deleted but its state file entry remains")
			}
		}
	}
	if room.dir != "" {
		if err := os.RemoveAll(room.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove clean room directory: %w", err))
		}
	}
	r.mu.Lock()
	rec := &r.res.Verification.CleanRooms[room.idx]
	rec.Teardown = status
	if err := errors.Join(errs...); err != nil {
		rec.Teardown = result.TeardownFailed
		rec.Error = cmp.Or(rec.Error, err.Error())
	}
	r.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		r.fail(result.StageTeardown, err)
	}
}

// CleanRoomFor is how provider makes a clean room for the checks after an agent (the
// Options' CleanRoom), or why it cannot (NoCleanRoom). On the host's own file system
// (onHost) the clean room is materialized from the change set; a provider whose
// sandboxes have their own file system provisions a second sandbox.
func CleanRoomFor(provider, attachID string, onHost, ownFilesystem bool) (mode, reason string) {
	switch {
	case attachID != "":
		return "", "the run attached to an existing sandbox (--sandbox-id), whose state a new sandbox cannot reproduce"
	case onHost:
		return CleanRoomMaterialized, ""
	case ownFilesystem:
		return CleanRoomProvisioned, ""
	}
	return "", "the " + provider + " provider cannot create a second sandbox"
}
