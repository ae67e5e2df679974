package docker

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/workspace"
	"github.com/talkops/talkops/reaper"
)

func TestIsLocalEngine(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"unix:///var/run/docker.sock":      true,
		"npipe:////./pipe/docker_engine":   true,
		"tcp://127.0.0.1:2375":             false,
		"tcp://docker.example.com:2376":    false,
		"ssh://user@host":                  false,
		"http://localhost:2375":            false,
		"unix:///tmp/talkops/docker.sock ": true,
	} {
		if got := isLocalEngine(host); got != want {
			t.Errorf("isLocalEngine(%q) = %v, want %v", host, got, want)
		}
	}
}

// zeroTree is a project holding one MiB of zeros: gzip shrinks it to a few KiB, a plain
// tar is larger than the file.
func zeroTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "zeros.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func checkZeros(t *testing.T, sb providers.Sandbox) {
	t.Helper()
	if res := run(t, sb, "wc -c < zeros.bin"); strings.TrimSpace(string(res.Stdout)) != "1048576" {
		t.Errorf("zeros.bin in the sandbox: wc -c = %q (stderr %q), want 1048576", res.Stdout, res.Stderr)
	}
}

// On an engine behind a unix socket the workspace travels as a plain tar.
func TestSyncUncompressedOnLocalEngine(t *testing.T) {
	t.Parallel()
	localImage(t)
	for _, user := range []string{"", "nobody"} {
		sb := newSandbox(t, Options{User: user})
		if !sb.PlainTarUpload() {
			t.Fatalf("PlainTarUpload() = false on %s, want true", sb.cli.DaemonHost())
		}
		stats, err := workspace.Sync(t.Context(), sb, zeroTree(t), "", workspace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if stats.BytesSent <= 1<<20 {
			t.Errorf("user %q: sent %d bytes for a 1 MiB file of zeros, want a plain tar (more than the file)", user, stats.BytesSent)
		}
		checkZeros(t, sb)
	}
}

// Over TCP the workspace stays gzip-compressed: the archive the engine receives starts
// with the gzip magic.
func TestSyncGzipOverTCP(t *testing.T) {
	t.Parallel()
	ep, p := newEngineProxy(t, Options{})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: t.Name(), Labels: map[string]string{testLabel: token(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeBounded(t, sb)
	if sb.(*Sandbox).PlainTarUpload() {
		t.Fatal("PlainTarUpload() = true over TCP, want false")
	}
	archivePut := regexp.MustCompile(`^/containers/[^/]+/archive$`)
	magic := make(chan []byte, 1)
	ep.set(func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
		if !match(r, http.MethodPut, archivePut) {
			return false
		}
		br := bufio.NewReader(r.Body)
		head, _ := br.Peek(2)
		magic <- slices.Clone(head)
		r.Body = struct {
			io.Reader
			io.Closer
		}{br, r.Body}
		forward.ServeHTTP(w, r)
		return true
	})
	stats, err := workspace.Sync(t.Context(), sb, zeroTree(t), "", workspace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-magic; string(got) != "\x1f\x8b" {
		t.Errorf("archive sent over TCP starts with %q, want the gzip magic", got)
	}
	if stats.BytesSent >= 1<<20 {
		t.Errorf("sent %d bytes for a 1 MiB file of zeros, want it compressed", stats.BytesSent)
	}
	checkZeros(t, sb)
}

// The working directory is a named volume with the container's labels, and teardown
// removes it with the container.
func TestTeardownRemovesVolume(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	tok := token(t)
	p := New(Options{Image: img})
	defer p.Close()
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "vol-run", Labels: map[string]string{testLabel: tok}})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	vol, err := s.cli.VolumeInspect(t.Context(), s.volume)
	if err != nil {
		closeBounded(t, sb)
		t.Fatalf("workspace volume %q: %v", s.volume, err)
	}
	if vol.Labels[providers.LabelRunID] != "vol-run" || vol.Labels[providers.LabelCreatedBy] != "talkops" || vol.Labels[providers.LabelOwnerPID] != strconv.Itoa(os.Getpid()) {
		t.Errorf("volume labels = %v, want the run id, created-by and owner pid", vol.Labels)
	}
	// What the run writes lands in the volume.
	run(t, sb, "echo hi > written && mkdir -p d && touch d/f")
	if res := run(t, sb, "grep -F ' "+sb.WorkDir()+" ' /proc/mounts"); res.ExitCode != 0 {
		t.Errorf("%s is not a mount point in the container: %s", sb.WorkDir(), res.Stdout)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.VolumeInspect(t.Context(), s.volume); !cerrdefs.IsNotFound(err) {
		t.Errorf("after Close, VolumeInspect(%s) = %v, want not found", s.volume, err)
	}
	if ids, _ := aliveIDs(t.Context(), p, tok); len(ids) != 0 {
		t.Errorf("after Close, alive = %v", ids)
	}
}

// A run killed before its teardown leaves its container and volume; one whose teardown
// ran out of time after removing the container leaves the volume. gc finds both by their
// labels and deletes them, the volume first or last.
func TestGCReapsLeftVolumes(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	tok := token(t)
	p := New(Options{Image: img})
	defer p.Close()
	defer removeLeft(t, p, tok)
	spec := providers.Spec{RunID: "gc-vol-" + tok, Labels: map[string]string{testLabel: tok}}
	killed, err := p.Create(t.Context(), spec) // left whole, as by SIGKILL
	if err != nil {
		t.Fatal(err)
	}
	cut, err := p.Create(t.Context(), spec) // teardown cut short after the container
	if err != nil {
		t.Fatal(err)
	}
	if err := removeContainer(t.Context(), p.cli, cut.ID()); err != nil {
		t.Fatal(err)
	}
	ids, _ := aliveIDs(t.Context(), p, tok)
	want := []string{killed.ID(), VolumeIDPrefix + killed.(*Sandbox).volume, VolumeIDPrefix + cut.(*Sandbox).volume}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("List = %v, want the killed run's container and both volumes %v", ids, want)
	}
	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Labels[testLabel] == tok && strings.HasPrefix(in.ID, VolumeIDPrefix) {
			if in.State != StateVolume || in.RunID != spec.RunID || in.CreatedAt.IsZero() || in.Labels[providers.LabelOwnerPID] == "" {
				t.Errorf("volume entry = %+v, want state %q, the run id, a creation time and the owner pid", in, StateVolume)
			}
		}
	}
	// gc as after the owner died: every entry of the run goes, whatever the order.
	rep, err := reaper.GCLedger(t.Context(), map[string]providers.Lister{Name: p}, nil, 0, false,
		reaper.Options{RunID: spec.RunID, Alive: func(int) bool { return false }, Now: func() time.Time { return time.Now().Add(time.Minute) }})
	if err != nil {
		t.Fatalf("gc: %v (report %+v)", err, rep)
	}
	if len(rep.Deleted) != 3 {
		t.Errorf("gc deleted %d entries, want 3: %+v", len(rep.Deleted), rep)
	}
	if ids, _ := aliveIDs(context.WithoutCancel(t.Context()), p, tok); len(ids) != 0 {
		t.Errorf("after gc, alive = %v", ids)
	}
}

// A volume removal the engine does not finish within volumeHandoff does not hold the
// teardown: Close returns soon after, with a note that says what is left, and gc removes
// the volume if the engine does not.
func TestTeardownHandsVolumeRemovalToEngine(t *testing.T) {
	t.Parallel()
	ep, p := newEngineProxy(t, Options{})
	tok := token(t)
	defer removeLeft(t, p, tok)
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "handoff", Labels: map[string]string{testLabel: tok}})
	if err != nil {
		t.Fatal(err)
	}
	volDelete := regexp.MustCompile(`^/volumes/[^/]+$`)
	ep.set(func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
		if !match(r, http.MethodDelete, volDelete) {
			return false
		}
		ep.hang(r, make(chan struct{}))
		return true
	})
	ctx, cancel := context.WithTimeout(t.Context(), 7*time.Second) // a signal's teardown budget
	defer cancel()
	start := time.Now()
	if err := sb.Close(ctx); err != nil {
		t.Fatalf("Close with the volume removal still running: %v, want nil", err)
	}
	took := time.Since(start)
	if took < volumeHandoff || ctx.Err() != nil {
		t.Errorf("Close returned after %s (ctx %v), want after the handoff bound %s and inside the budget", took, ctx.Err(), volumeHandoff)
	}
	note := sb.(*Sandbox).TeardownNote()
	if !strings.Contains(note, "still removing volume(s) "+sb.(*Sandbox).volume) || !strings.Contains(note, "talkops sandbox gc") {
		t.Errorf("TeardownNote = %q, want it to name the volume and gc", note)
	}
	ids, _ := aliveIDs(t.Context(), p, tok)
	if len(ids) != 1 || ids[0] != VolumeIDPrefix+sb.(*Sandbox).volume {
		t.Errorf("after Close, left = %v, want only the workspace volume", ids)
	}
	ep.set(nil)
	rep, err := reaper.GCLedger(t.Context(), map[string]providers.Lister{Name: p}, nil, 0, false,
		reaper.Options{RunID: "handoff", Alive: func(int) bool { return false }, Now: func() time.Time { return time.Now().Add(time.Minute) }})
	if err != nil {
		t.Fatalf("gc: %v (report %+v)", err, rep)
	}
	if ids, _ := aliveIDs(t.Context(), p, tok); len(ids) != 0 {
		t.Errorf("after gc, left = %v", ids)
	}
}
