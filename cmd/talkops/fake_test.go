package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/providers/state"
)

// fakeEnv is a hermetic environment that enables the fake provider with a ledger file the
// test reads afterwards, and optional injected faults.
func fakeEnv(t *testing.T, faults string) (env map[string]string, ledger string) {
	t.Helper()
	dir := t.TempDir()
	ledger = filepath.Join(dir, "ledger.json")
	env = testEnv(t, map[string]string{
		fake.EnvEnable: "1",
		fake.EnvDir:    filepath.Join(dir, "sandboxes"),
		fake.EnvLedger: ledger,
		fake.EnvFaults: faults,
	})
	return env, ledger
}

// alive returns the ids the fake's ledger still holds.
func alive(t *testing.T, ledger string) []string {
	t.Helper()
	recs, err := fake.ReadLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		if r.DeletedAt.IsZero() {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func created(t *testing.T, ledger string) int {
	t.Helper()
	recs, err := fake.ReadLedger(ledger)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

func stateEntries(t *testing.T, env map[string]string) []state.Entry {
	t.Helper()
	entries, err := state.List(state.DefaultDir(func(k string) string { return env[k] }))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return entries
}

// TestPipelineOnFakeProvider runs the whole pipeline against the fake provider and checks
// its ledger: every sandbox created is deleted, whatever fails, and the state file holds
// exactly the sandboxes that could not be deleted.
func TestPipelineOnFakeProvider(t *testing.T) {
	t.Parallel()
	// The checks look at the synced copy: README.md and tests/ are there, .env is not.
	const syncRubric = `
[[check]]
id = "synced"
run = "test -f README.md && test -f tests/unit.sh && test ! -e .env && test ! -e node_modules"
`
	files := map[string]string{
		"r.toml": syncRubric, "README.md": "hi", "tests/unit.sh": "true\n", ".env": "TOKEN=canary",
		"node_modules/x/index.js": "x", "setup.sh": "echo ok\n", "fail.sh": "exit 9\n",
	}
	tests := []struct {
		name      string
		faults    string
		args      []string
		want      int
		created   int
		leaked    int // sandboxes left alive (and kept in the state file for gc)
		errSubstr string
	}{
		{name: "pass with sync and setup", args: []string{"--sandbox-setup", "setup.sh"}, want: 0, created: 1},
		{name: "setup fails", args: []string{"--sandbox-setup", "fail.sh"}, want: 3, created: 1, errSubstr: "exited with code 9"},
		{name: "create fails", faults: "create=error", want: 3, created: 0, errSubstr: "create fake sandbox"},
		{name: "upload fails", faults: "upload-fail=1", want: 3, created: 1, errSubstr: "sync workspace"},
		{name: "exec fails", faults: "exec-fail=1", want: 3, created: 1},
		{name: "delete fails", faults: "close-fail=100", want: 3, created: 1, leaked: 1, errSubstr: "sandbox gc"},
		{name: "no sync", args: []string{"--no-sync"}, want: 1, created: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, files)
			env, ledger := fakeEnv(t, tc.faults)
			args := append([]string{"--sandbox", "fake", "--rubric", "r.toml"}, tc.args...)
			got := runIn(t, dir, env, args...)
			if got.code != tc.want {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, tc.want, got.stdout, got.stderr)
			}
			if n := created(t, ledger); n != tc.created {
				t.Errorf("created %d sandboxes, want %d", n, tc.created)
			}
			if ids := alive(t, ledger); len(ids) != tc.leaked {
				t.Errorf("sandboxes alive after the run: %v, want %d", ids, tc.leaked)
			}
			if entries := stateEntries(t, env); len(entries) != tc.leaked {
				t.Errorf("state file entries %v, want %d (only what could not be deleted)", entries, tc.leaked)
			}
			r := readResult(t, dir)
			if r.ExitCode != tc.want {
				t.Errorf("result.json exit %d, want %d", r.ExitCode, tc.want)
			}
			if tc.errSubstr != "" && !strings.Contains(r.Reason, tc.errSubstr) {
				t.Errorf("result.json reason %q does not mention %q", r.Reason, tc.errSubstr)
			}
			if tc.created > 0 && tc.want == 0 && (r.Sync == nil || r.Sync.Files == 0 || len(r.Sync.Secrets) != 1) {
				t.Errorf("result.json sync = %+v, want files synced and .env withheld", r.Sync)
			}
		})
	}
}

func TestFakeProviderIsHiddenByDefault(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{"r.toml": passRubric})
	got := runIn(t, dir, testEnv(t, nil), "--sandbox=fake", "--rubric", "r.toml")
	if got.code != 2 {
		t.Fatalf("--sandbox=fake without the test switch: exit %d, want 2", got.code)
	}
	help := runIn(t, dir, testEnv(t, nil), "run", "--help")
	if strings.Contains(help.stdout, "fake") {
		t.Errorf("help mentions the test-only fake provider:\n%s", help.stdout)
	}
}
