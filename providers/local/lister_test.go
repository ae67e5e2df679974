//go:build unix

package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

func listed(t *testing.T, p *local.Provider) []providers.Info {
	t.Helper()
	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return infos
}

func TestListWhileOpen(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	p := local.New(local.Options{StateDir: stateDir})
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	labels := map[string]string{providers.LabelRunID: "run-1", providers.LabelExpiresAt: expires.Format(time.RFC3339), providers.LabelCreatedBy: "talkops"}
	before := time.Now()
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "run-1", ProjectDir: t.TempDir(), Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	wantLabels := map[string]string{
		providers.LabelRunID: "run-1", providers.LabelExpiresAt: expires.Format(time.RFC3339), providers.LabelCreatedBy: "talkops",
		providers.LabelOwnerPID: strconv.Itoa(os.Getpid()), providers.LabelOwnerHost: host,
	}
	want := []providers.Info{{Provider: "local", ID: "local-run-1", RunID: "run-1", ExpiresAt: expires, State: local.StateIdle, Labels: wantLabels}}
	got := listed(t, p)
	if len(got) == 1 && (got[0].CreatedAt.Before(before.Add(-time.Second)) || got[0].CreatedAt.After(time.Now())) {
		t.Errorf("CreatedAt = %v, want about %v", got[0].CreatedAt, before)
	}
	for i := range got {
		got[i].CreatedAt = time.Time{}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List of an idle sandbox (-want +got):\n%s", diff)
	}

	// A background process keeps its group, and the sandbox, running.
	if res := run(t, sb, providers.Shell("sleep 30 >/dev/null 2>&1 &")); res.ExitCode != 0 {
		t.Fatalf("start a background sleep: exit %d", res.ExitCode)
	}
	if got := listed(t, p); len(got) != 1 || got[0].State != local.StateRunning {
		t.Errorf("List with a background process = %+v, want one sandbox %q", got, local.StateRunning)
	}
	if err := sb.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := listed(t, p); len(got) != 0 {
		t.Errorf("List after Close = %+v, want nothing", got)
	}
	if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
		t.Errorf("state directory after Close holds %v, want nothing", ents)
	}
}

func TestFinishedCommandLeavesNoGroupRecord(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	p := local.New(local.Options{StateDir: stateDir})
	sb := create(t, p, providers.Spec{RunID: "quick", ProjectDir: t.TempDir()})
	// While it runs the command sees its own record. The record is written just after the
	// command starts, so the command waits for it (up to 10 s) before listing.
	script := `i=0; while [ $i -lt 100 ] && ! ls "$0" | grep -q '^pgid-'; do sleep 0.1; i=$((i+1)); done; ls "$0"`
	res := run(t, sb, providers.Cmd{Argv: []string{"sh", "-c", script, filepath.Join(stateDir, sb.ID())}})
	if !regexp.MustCompile(`(?m)^pgid-[0-9]+\.json$`).Match(res.Stdout) {
		t.Errorf("the record directory while a command runs holds %q, want a pgid-<N>.json", res.Stdout)
	}
	ents, err := os.ReadDir(filepath.Join(stateDir, sb.ID()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		// The command's token stays until Close: a process it detached is found by it.
		if !strings.HasPrefix(e.Name(), "cmd-") {
			names = append(names, e.Name())
		}
	}
	if diff := cmp.Diff([]string{"sandbox.json"}, names); diff != "" {
		t.Errorf("the record directory after the command ended (-want +got):\n%s", diff)
	}
}

func TestDeleteOpenSandboxClosesIt(t *testing.T) {
	t.Parallel()
	p := local.New(local.Options{StateDir: t.TempDir()})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "mine", ProjectDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Fatalf("Delete(%s): %v", sb.ID(), err)
	}
	if _, err := sb.Exec(t.Context(), providers.Shell("true")); !errors.Is(err, providers.ErrClosed) {
		t.Errorf("Exec after Delete = %v, want ErrClosed", err)
	}
	if got := listed(t, p); len(got) != 0 {
		t.Errorf("List after Delete = %+v, want nothing", got)
	}
}

func TestSameRunIDGetsDistinctIDs(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	a := create(t, local.New(local.Options{StateDir: stateDir}), providers.Spec{RunID: "twice", ProjectDir: t.TempDir()})
	// Another process (another provider) with the same run id and state directory.
	b := create(t, local.New(local.Options{StateDir: stateDir}), providers.Spec{RunID: "twice", ProjectDir: t.TempDir()})
	if a.ID() != "local-twice" || !regexp.MustCompile(`^local-twice-[0-9a-f]{6}$`).MatchString(b.ID()) {
		t.Errorf("IDs = %q, %q; want local-twice and local-twice-<6 hex>", a.ID(), b.ID())
	}
	if got := listed(t, local.New(local.Options{StateDir: stateDir})); len(got) != 2 {
		t.Errorf("List = %+v, want both sandboxes", got)
	}
}

func TestDeleteIDs(t *testing.T) {
	t.Parallel()
	p := local.New(local.Options{StateDir: t.TempDir()})
	for _, id := range []string{"", "../etc", "local-../x", "docker-1", "local-a/b"} {
		if err := p.Delete(t.Context(), id); err == nil || !strings.Contains(err.Error(), "not a local sandbox id") {
			t.Errorf("Delete(%q) = %v, want a 'not a local sandbox id' error", id, err)
		}
	}
	if err := p.Delete(t.Context(), "local-unknown"); err != nil {
		t.Errorf("Delete of an unknown sandbox = %v, want nil", err)
	}
	if err := local.New(local.Options{}).Delete(t.Context(), "local-unknown"); err != nil {
		t.Errorf("Delete without a state directory = %v, want nil", err)
	}
	if got := listed(t, local.New(local.Options{})); len(got) != 0 {
		t.Errorf("List without a state directory = %+v, want nothing", got)
	}
}

func TestUnreadableRecordIsListedAndDeleted(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	dir := filepath.Join(stateDir, "local-broken")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"sandbox.json": "{not json", "pgid-123.json": "{"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := local.New(local.Options{StateDir: stateDir})
	got := listed(t, p)
	if len(got) != 1 || got[0].ID != "local-broken" || got[0].State != local.StateUnreadable || got[0].CreatedAt.IsZero() {
		t.Errorf("List = %+v, want local-broken %q with the directory's time", got, local.StateUnreadable)
	}
	if err := p.Delete(t.Context(), "local-broken"); err != nil {
		t.Fatalf("Delete(local-broken): %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s after Delete: %v, want it gone", dir, err)
	}
}

func TestCreateWithUnusableStateDir(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(file, "state")
	_, err := local.New(local.Options{StateDir: stateDir}).Create(t.Context(), providers.Spec{ProjectDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), stateDir) {
		t.Errorf("Create with the state directory under a file = %v, want an error naming %s", err, stateDir)
	}
}

func TestDefaultStateDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG", map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/ci"}, "/x/state/talkops/local"},
		{"Home", map[string]string{"HOME": "/home/ci"}, "/home/ci/.local/state/talkops/local"},
		{"TMPDIR", map[string]string{"TMPDIR": "/run/tmp"}, "/run/tmp/talkops-" + strconv.Itoa(os.Getuid()) + "/local"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := local.DefaultStateDir(hostEnv(tc.env)); got != tc.want {
				t.Errorf("DefaultStateDir(%v) = %q, want %q", tc.env, got, tc.want)
			}
		})
	}
}
