package state_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers/state"
)

func TestDefaultDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG", map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}, "/x/state/talkops/sandboxes"},
		{"RelativeXDGIgnored", map[string]string{"XDG_STATE_HOME": "rel", "HOME": "/home/u"}, "/home/u/.local/state/talkops/sandboxes"},
		{"Home", map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/talkops/sandboxes"},
		{"Nothing", map[string]string{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := state.DefaultDir(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("DefaultDir(%v) = %q, want %q", tc.env, got, tc.want)
			}
		})
	}
}

func TestFileName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ provider, id, want string }{
		{"docker", "talkops-abc123", "docker-talkops-abc123.json"},
		{"agentcore", "arn:aws:x/y", "agentcore-arn%3Aaws%3Ax%2Fy.json"},
		{"local", "../../etc", "local-..%2F..%2Fetc.json"},
		{"vercel", "sbx_ü", "vercel-sbx_%C3%BC.json"},
	} {
		if got := state.FileName(tc.provider, tc.id); got != tc.want {
			t.Errorf("FileName(%q, %q) = %q, want %q", tc.provider, tc.id, got, tc.want)
		}
	}
}

func TestRecordListRemove(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "sandboxes")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := state.Entry{Provider: "docker", ID: "c1", RunID: "run-1", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), ProjectDir: "/src/p", PID: 42}
	b := state.Entry{Provider: "daytona", ID: "sb/2", RunID: "run-2", CreatedAt: t0.Add(-time.Minute)}
	for _, e := range []state.Entry{a, b} {
		if err := state.Record(dir, e); err != nil {
			t.Fatalf("Record(%+v): %v", e, err)
		}
	}
	got, err := state.List(dir)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]state.Entry{b, a}, got); diff != "" {
		t.Errorf("List after two Records (-want +got):\n%s", diff)
	}

	// Record of the same key replaces.
	a.PID = 43
	if err := state.Record(dir, a); err != nil {
		t.Fatal(err)
	}
	if err := state.Remove(dir, b.Provider, b.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := state.Remove(dir, b.Provider, b.ID); err != nil {
		t.Errorf("second Remove = %v, want nil", err)
	}
	got, err = state.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]state.Entry{a}, got); diff != "" {
		t.Errorf("List after replace and remove (-want +got):\n%s", diff)
	}

	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode = %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	files, _ := os.ReadDir(dir)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
		if info, _ := f.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", f.Name(), info.Mode().Perm())
		}
	}
	if diff := cmp.Diff([]string{"docker-c1.json"}, names); diff != "" {
		t.Errorf("files in the state dir (-want +got):\n%s", diff)
	}
}

func TestRecordFillsCreatedAt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	before := time.Now()
	if err := state.Record(dir, state.Entry{Provider: "p", ID: "i"}); err != nil {
		t.Fatal(err)
	}
	got, err := state.List(dir)
	if err != nil || len(got) != 1 {
		t.Fatalf("List = %v, %v", got, err)
	}
	if got[0].CreatedAt.Before(before.Add(-time.Second)) || got[0].CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("CreatedAt = %v, want about now", got[0].CreatedAt)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"NoDir", state.Record("", state.Entry{Provider: "p", ID: "i"}), "no state directory"},
		{"NoProvider", state.Record(dir, state.Entry{ID: "i"}), "no provider"},
		{"NoID", state.Record(dir, state.Entry{Provider: "p"}), "no id"},
		{"RemoveNoID", state.Remove(dir, "p", ""), "no id"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want one containing %q", tc.name, tc.err, tc.want)
		}
	}
	if _, err := state.List(""); err == nil {
		t.Error(`List("") error = nil, want one`)
	}
	if got, err := state.List(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Errorf("List(missing dir) = %v, %v; want empty, nil", got, err)
	}
}

func TestListReportsCorruptFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := state.Entry{Provider: "docker", ID: "ok", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := state.Record(dir, good); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"broken.json":   "{not json",
		"empty-id.json": `{"provider":"docker"}`,
		".tmp-123":      "partial",
		"notes.txt":     "ignored",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := state.List(dir)
	if diff := cmp.Diff([]state.Entry{good}, got); diff != "" {
		t.Errorf("List with corrupt files (-want +got):\n%s", diff)
	}
	if err == nil || !strings.Contains(err.Error(), "broken.json") || !strings.Contains(err.Error(), "empty-id.json") {
		t.Errorf("List error = %v, want one naming broken.json and empty-id.json", err)
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := state.Record(dir, state.Entry{Provider: "fake", ID: strconv.Itoa(i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, err := state.List(dir); err != nil || len(got) != 20 {
		t.Errorf("List after 20 concurrent Records = %d entries, %v; want 20, nil", len(got), err)
	}
}

const helperEnv = "TALKOPS_STATE_TEST_HELPER"

// TestHelperProcess is not a test: TestConcurrentProcesses runs the test binary with
// helperEnv set, and this records entries from that separate process.
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process for TestConcurrentProcesses")
	}
	dir, who, _ := strings.Cut(spec, "|")
	for i := range 25 {
		id := fmt.Sprintf("%s-%d", who, i)
		if err := state.Record(dir, state.Entry{Provider: "fake", ID: id, PID: os.Getpid()}); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			if err := state.Remove(dir, "fake", id); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := state.List(dir); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for p := range 4 {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir+"|p"+strconv.Itoa(p))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	got, err := state.List(dir)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	// Each process recorded 25 and removed 5.
	if len(got) != 4*20 {
		t.Errorf("List after 4 processes = %d entries, want 80", len(got))
	}
	pids := map[int]bool{}
	for _, e := range got {
		pids[e.PID] = true
	}
	if len(pids) != 4 {
		t.Errorf("entries come from %d processes, want 4", len(pids))
	}
}

func TestExpired(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		e    state.Entry
		want bool
	}{
		{state.Entry{}, false},
		{state.Entry{ExpiresAt: now.Add(-time.Second)}, true},
		{state.Entry{ExpiresAt: now.Add(time.Hour)}, false},
	} {
		if got := tc.e.Expired(now); got != tc.want {
			t.Errorf("Entry{ExpiresAt: %v}.Expired(now) = %v, want %v", tc.e.ExpiresAt, got, tc.want)
		}
	}
}
