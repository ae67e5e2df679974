package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers/state"
)

// TestSandboxGCRunIDFollowsTheLedger SIGKILLs a run whose provider (--sandbox fake) is not
// the configured one, as a --sandbox among a caller's extra arguments makes it, and reaps
// it with `sandbox gc --run-id` and no --provider: gc asks the provider the ledger records
// for that run. The ledger also holds another run's daytona sandbox and no Daytona
// credentials are set: gc must not build a provider the run never used (that would fail
// the whole sweep) nor touch the other run's entry. With --state-dir, the providers come
// from that ledger, not the default one.
func TestSandboxGCRunIDFollowsTheLedger(t *testing.T) {
	t.Parallel()
	const longCheck = "[[check]]\nid = \"long\"\nrun = \"sleep 60\"\n"
	for _, moved := range []bool{false, true} {
		name := "default state dir"
		if moved {
			name = "--state-dir"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env, fakeLedger := fakeEnv(t, "")
			dir := project(t, map[string]string{"r.toml": longCheck})
			cmd, out := startTalkops(t, dir, env, "--sandbox=fake", "--rubric", "r.toml", "-q")
			runID := waitStage(t, dir, "rubric", 60*time.Second)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, 30*time.Second); code != -1 && code != 137 {
				t.Fatalf("SIGKILL: exit %d\n%s", code, out)
			}
			if got := alive(t, fakeLedger); len(got) != 1 {
				t.Fatalf("after SIGKILL the fake holds %v, want the run's sandbox", got)
			}

			stateDir := state.DefaultDir(func(k string) string { return env[k] })
			gcArgs := []string{"sandbox", "gc", "--run-id", runID, "--older-than", "0s"}
			if moved {
				// gc reads the ledger it is pointed at; the default one is then empty.
				to := filepath.Join(t.TempDir(), "ledger")
				if err := os.Rename(stateDir, to); err != nil {
					t.Fatal(err)
				}
				stateDir = to
				gcArgs = append(gcArgs, "--state-dir", to)
			}
			other := state.Entry{Provider: "daytona", ID: "sb-other", RunID: "other-run", CreatedAt: time.Now().Add(-2 * time.Hour)}
			if err := state.Record(stateDir, other); err != nil {
				t.Fatal(err)
			}

			gc := runIn(t, dir, env, gcArgs...)
			if gc.code != 0 {
				t.Fatalf("sandbox gc: exit %d\n%s%s", gc.code, gc.stdout, gc.stderr)
			}
			if !strings.Contains(gc.stdout, "1 deleted, 0 failed") {
				t.Errorf("sandbox gc did not delete the run's sandbox:\n%s", gc.stdout)
			}
			if got := alive(t, fakeLedger); len(got) != 0 {
				t.Errorf("after gc the fake still holds %v\n%s", got, gc.stdout)
			}
			entries, err := state.List(stateDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 || entries[0].ID != other.ID {
				t.Errorf("ledger after gc = %+v, want only the other run's entry", entries)
			}
		})
	}
}
