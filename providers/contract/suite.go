package contract

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"maps"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/talkops/talkops/providers"
)

const (
	// opTimeout bounds every single provider call the suite makes, so that a broken
	// provider fails the suite instead of hanging it.
	opTimeout = 2 * time.Minute
	// promptly is how soon Exec must return after a cancel, a timeout or a Close. It
	// detects hangs; it is not a performance threshold.
	promptly = 15 * time.Second
	// closeTimeout bounds the Close the suite runs in t.Cleanup.
	closeTimeout = time.Minute
)

type suite struct {
	h Harness
	p providers.Provider
}

func newSuite(t T, newHarness HarnessMaker) *suite {
	t.Helper()
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatalf("new harness: %v", err)
	}
	if h == nil {
		t.Fatal("new harness returned nil")
	}
	t.Cleanup(h.Close)
	p := h.NewProvider(t.Context(), t)
	if p == nil {
		t.Fatal("Harness.NewProvider returned nil")
	}
	return &suite{h: h, p: p}
}

// spec returns the harness's Spec completed with the labels every created sandbox carries.
func (s *suite) spec(t T) providers.Spec {
	t.Helper()
	spec := s.h.Spec(t)
	if spec.RunID == "" {
		spec.RunID = "providertest-" + randomHex(t, 4)
	}
	if spec.TTL == 0 {
		spec.TTL = 15 * time.Minute
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	defaults := map[string]string{
		providers.LabelRunID:     spec.RunID,
		providers.LabelExpiresAt: time.Now().Add(spec.TTL).UTC().Format(time.RFC3339),
		providers.LabelCreatedBy: "talkops",
	}
	for k, v := range defaults {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	spec.Labels = labels
	return spec
}

// create provisions a sandbox that is closed (with a fresh context) when the test ends,
// and then must be gone from the harness's Alive list.
func (s *suite) create(t T) providers.Sandbox {
	t.Helper()
	return s.createSpec(t.Context(), t, s.spec(t))
}

func (s *suite) createSpec(ctx context.Context, t T, spec providers.Spec) providers.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	sb, err := s.p.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create(RunID %q) error: %v", spec.RunID, err)
	}
	if sb == nil {
		t.Fatal("Create returned a nil Sandbox and no error")
	}
	t.Cleanup(func() {
		// The test's context (and a parent the case cancelled) is done by now.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close(%s) in cleanup = %v, want nil (Close is idempotent)", sb.ID(), err)
		}
		s.assertGone(ctx, t, sb.ID())
	})
	if sb.ID() == "" {
		t.Fatal("Sandbox.ID() is empty")
	}
	if wd := sb.WorkDir(); !path.IsAbs(wd) {
		t.Fatalf("Sandbox.WorkDir() = %q, want an absolute path", wd)
	}
	return sb
}

// assertGone fails the test if the harness still lists id as alive.
func (s *suite) assertGone(ctx context.Context, t T, id string) {
	t.Helper()
	ids, ok := s.h.Alive(ctx)
	if ok && slices.Contains(ids, id) {
		t.Errorf("sandbox %s is still alive after Close (Alive = %v)", id, ids)
	}
}

// exec runs cmd and fails the test on an infrastructure error.
func exec(t T, sb providers.Sandbox, cmd providers.Cmd) providers.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	res, err := sb.Exec(ctx, cmd)
	if err != nil {
		t.Fatalf("Exec(%q) error: %v", cmd.Argv, err)
	}
	return res
}

// sh runs a shell script and fails the test unless it exits 0.
func sh(t T, sb providers.Sandbox, script string) string {
	t.Helper()
	res := exec(t, sb, providers.Shell(script))
	if res.ExitCode != 0 {
		t.Fatalf("Exec(%q) exit code = %d, want 0; stderr: %s", script, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// download reads a whole file through Download.
func download(t T, sb providers.Sandbox, p string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	rc, err := sb.Download(ctx, p)
	if err != nil {
		t.Fatalf("Download(%q) error: %v", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Download(%q): read: %v", p, err)
	}
	return b
}

func upload(t T, sb providers.Sandbox, dir string, tgz []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	defer cancel()
	if err := sb.Upload(ctx, dir, bytes.NewReader(tgz)); err != nil {
		t.Fatalf("Upload(%q) error: %v", dir, err)
	}
}

type execOutcome struct {
	res providers.ExecResult
	err error
}

// startExec runs cmd in the background; the channel receives its outcome.
func startExec(ctx context.Context, sb providers.Sandbox, cmd providers.Cmd) <-chan execOutcome {
	ch := make(chan execOutcome, 1)
	go func() {
		res, err := sb.Exec(ctx, cmd)
		ch <- execOutcome{res, err}
	}()
	return ch
}

// await waits at most d for an outcome.
func await(t T, ch <-chan execOutcome, d time.Duration, what string) execOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(d):
		t.Fatalf("%s: Exec did not return within %v", what, d)
		return execOutcome{}
	}
}

func randomHex(t T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of streamed output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
