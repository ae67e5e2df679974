package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/internal/safename"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/workspace"
	"github.com/talkops/talkops/result"
)

// NewSpec is the sandbox a run asks for: labelled with the run id and an expiry, with a
// server-side lifetime (for providers that support one) of the run's timeout plus half an
// hour, or a day when the run has no timeout.
func NewSpec(runID, projectDir, snapshot, workDir string, timeout time.Duration) providers.Spec {
	ttl := timeout + 30*time.Minute
	if timeout == 0 {
		ttl = 24 * time.Hour
	}
	return providers.Spec{
		RunID:      runID,
		ProjectDir: projectDir,
		Snapshot:   snapshot,
		WorkDir:    workDir,
		TTL:        ttl,
		Labels: map[string]string{
			providers.LabelRunID:     runID,
			providers.LabelCreatedBy: "talkops",
			providers.LabelExpiresAt: time.Now().Add(ttl).UTC().Format(time.RFC3339),
		},
	}
}

// SyncOptions configure WorkspaceSyncer.
type SyncOptions struct {
	Root      string // the project directory
	Workspace workspace.Options
	// Provider names the provider in a note when caches are configured but it does not
	// share host caches (CachesWanted).
	Provider     string
	CachesWanted bool
	// CacheNotes are what resolving the configured caches had to say.
	CacheNotes []string
}

// WorkspaceSyncer uploads the project with the sync engine, reporting progress as
// events, and records how the workspace and the shared caches reached the sandbox.
func WorkspaceSyncer(so SyncOptions) Syncer {
	return func(ctx context.Context, sb providers.Sandbox, sink events.Sink) (*result.Sync, error) {
		o := so.Workspace
		o.Progress = func(s workspace.Stats) {
			sink.Emit(events.Event{Time: time.Now(), Type: events.SyncProgress, Stage: result.StageSync,
				Message: fmt.Sprintf("%d files, %s", s.Files, humanBytes(s.BytesSent)),
				Data:    map[string]any{"files": s.Files, "bytes": s.Bytes, "bytes_sent": s.BytesSent}})
		}
		stats, err := workspace.Sync(ctx, sb, so.Root, "", o)
		if err == nil {
			// The total: throttled views (CI logs) may have shown only a count from the
			// middle of the sync.
			sink.Emit(events.Event{Time: time.Now(), Type: events.SyncProgress, Stage: result.StageSync,
				Message: fmt.Sprintf("%d files, %s, done", stats.Files, humanBytes(stats.BytesSent)),
				Data:    map[string]any{"files": stats.Files, "bytes": stats.Bytes, "bytes_sent": stats.BytesSent, "done": true}})
		}
		rec := stats.Result()
		rec.CacheNotes = slices.Clone(so.CacheNotes)
		if cs, ok := sb.(providers.CacheSharer); ok {
			shared, notes := cs.SharedCaches()
			for _, c := range shared {
				rec.Caches = append(rec.Caches, c.Name)
			}
			rec.CacheNotes = append(rec.CacheNotes, notes...)
		} else if so.CachesWanted {
			rec.CacheNotes = append(rec.CacheNotes, "caches not shared: the "+so.Provider+" provider does not share host caches")
		}
		if stats.ModeNote != "" {
			sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageSync,
				Message: "workspace copied instead of layered: " + stats.ModeNote})
		}
		for _, n := range rec.CacheNotes {
			sink.Emit(events.Event{Time: time.Now(), Type: events.Warning, Stage: result.StageSync, Message: n})
		}
		return rec, err
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// maxRunID bounds a caller's run id: it names a report directory and labels the sandbox
// at every provider, so it stays a plain path element and label value.
const maxRunID = 64

// RunID returns id when it is a valid run id (a usage error otherwise), or a new one when
// id is empty.
func RunID(id string) (string, error) {
	if id == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:]), nil
	}
	if !safename.Valid(id, maxRunID) {
		return "", Usagef("--run-id %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return id, nil
}
