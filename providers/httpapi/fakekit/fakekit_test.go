package fakekit

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFaults(t *testing.T) {
	var f Faults
	f.Inject("create", 2, Fault{Status: 503})
	var got []int
	for range 3 {
		fl, ok := f.Hit("create")
		if ok {
			got = append(got, fl.Status)
		} else {
			got = append(got, 0)
		}
	}
	if want := []int{0, 503, 0}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	f.InjectAll("delete", Fault{Status: 500})
	for range 2 {
		if _, ok := f.Hit("delete"); !ok {
			t.Error("InjectAll fault missing")
		}
	}
	f.Clear("delete")
	if _, ok := f.Hit("delete"); ok {
		t.Error("fault still injected after Clear")
	}
	if n := f.Calls("delete"); n != 3 {
		t.Errorf("Calls(delete) = %d, want 3", n)
	}
}

func TestRunTimeoutAndExitCodes(t *testing.T) {
	var p Procs
	home := t.TempDir()
	o := p.Run(t.Context(), Command{Path: "/bin/sh", Args: []string{"-c", "echo out; echo err >&2; exit 7"}, Env: BaseEnv(home)})
	if string(o.Stdout) != "out\n" || string(o.Stderr) != "err\n" || o.ExitCode != 7 {
		t.Errorf("Run = %+v, want out/err/7", o)
	}
	o = p.Run(t.Context(), Command{Path: "/bin/sh", Args: []string{"-c", "echo $HOME; echo $FAKEKIT_SANDBOX | wc -c"}, Env: BaseEnv(home), Combined: true})
	if lines := strings.Split(strings.TrimSpace(string(o.Stdout)), "\n"); len(lines) != 2 || lines[0] != home || strings.TrimSpace(lines[1]) != "17" {
		t.Errorf("combined output = %q, want HOME and a 16-character marker", o.Stdout)
	}
	start := time.Now()
	o = p.Run(t.Context(), Command{Path: "/bin/sh", Args: []string{"-c", "sleep 30"}, Timeout: 100 * time.Millisecond})
	if !o.TimedOut || time.Since(start) > 5*time.Second {
		t.Errorf("Run(sleep 30, timeout 100ms) = %+v after %v, want TimedOut promptly", o, time.Since(start))
	}
}

func TestKillAllReachesOtherProcessGroups(t *testing.T) {
	var p Procs
	dir := t.TempDir()
	beat := filepath.Join(dir, "beat")
	done := make(chan Outcome, 1)
	go func() {
		// setsid-like escape: the loop runs in its own process group via `timeout`.
		done <- p.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c",
			"timeout 60 sh -c 'while :; do echo x >> " + beat + "; sleep 0.1; done' & wait"}, Env: BaseEnv(dir)})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(beat); err == nil && fi.Size() > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.KillAll()
	select {
	case o := <-done:
		if !o.Killed {
			t.Errorf("Outcome.Killed = false after KillAll")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after KillAll")
	}
	fi1, _ := os.Stat(beat)
	time.Sleep(400 * time.Millisecond)
	fi2, _ := os.Stat(beat)
	if fi2.Size() != fi1.Size() {
		t.Errorf("heartbeat grew from %d to %d after KillAll: a process in another group survived", fi1.Size(), fi2.Size())
	}
	if o := p.Run(t.Context(), Command{Path: "/bin/true"}); o.StartErr == nil {
		t.Error("Run after KillAll started a command")
	}
}
