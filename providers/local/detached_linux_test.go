package local_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

// detachers are the ways a command leaves a process that escapes its process group.
var detachers = map[string]string{
	"setsid":      "setsid sleep 1000 >/dev/null 2>&1 < /dev/null &",
	"double fork": "(sleep 1000 >/dev/null 2>&1 < /dev/null &) ; true",
	"nohup":       "nohup setsid sleep 1000 >/dev/null 2>&1 < /dev/null &",
}

// waitGone waits (bounded) until no sleep runs in dir.
func waitGone(dir string) []int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesIn(dir, "sleep")
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startDetached runs cmd in a new sandbox and returns it once the detached sleep runs.
func startDetached(t *testing.T, p *local.Provider, dir, cmd string) providers.Sandbox {
	t.Helper()
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "detached", ProjectDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(t.Context(), providers.Shell(cmd)); err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%q) = %+v, %v", cmd, res, err)
	}
	for range 250 {
		if len(processesIn(dir, "sleep")) > 0 {
			return sb
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%q left no sleep running: the test cannot see a survivor", cmd)
	return nil
}

func TestCloseKillsDetachedProcesses(t *testing.T) {
	t.Parallel()
	for name, cmd := range detachers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			sb := startDetached(t, local.New(local.Options{}), dir, cmd)
			if err := sb.Close(context.Background()); err != nil {
				t.Errorf("Close() = %v", err)
			}
			if left := waitGone(dir); len(left) > 0 {
				t.Errorf("after Close, %q left %v running", cmd, left)
			}
		})
	}
}

func TestGCKillsDetachedProcessesOfADeadRun(t *testing.T) {
	t.Parallel()
	for name, cmd := range detachers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, state := t.TempDir(), t.TempDir()
			// The run that started it never closes its sandbox, as if SIGKILLed.
			sb := startDetached(t, local.New(local.Options{StateDir: state}), dir, cmd)
			gc := local.New(local.Options{StateDir: state})
			infos, err := gc.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(infos, func(i providers.Info) bool { return i.ID == sb.ID() }) {
				t.Fatalf("List() = %+v, want %s", infos, sb.ID())
			}
			if err := gc.Delete(context.Background(), sb.ID()); err != nil {
				t.Errorf("Delete() = %v", err)
			}
			if left := waitGone(dir); len(left) > 0 {
				t.Errorf("after gc, %q left %v running", cmd, left)
			}
		})
	}
}

// Environment of the helper process TestCloseKillsDetachedProcessesWithoutEnvironment
// starts: the project directory.
const subreaperHelperEnv = "TALKOPS_LOCAL_SUBREAPER_HELPER"

// TestSubreaperHelperProcess is not a test: the test below runs the test binary with
// subreaperHelperEnv set, so that only this process becomes a subreaper. It starts a
// process that detaches and clears its environment, closes the sandbox and exits.
func TestSubreaperHelperProcess(t *testing.T) {
	dir := os.Getenv(subreaperHelperEnv)
	if dir == "" {
		t.Skip("helper process for TestCloseKillsDetachedProcessesWithoutEnvironment")
	}
	if err := local.BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	sb := startDetached(t, local.New(local.Options{}), dir, "env -i /bin/sh -c 'setsid sleep 1000 >/dev/null 2>&1 < /dev/null &'")
	if err := sb.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCloseKillsDetachedProcessesWithoutEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSubreaperHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), subreaperHelperEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if left := waitGone(dir); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("env -i setsid left %v running after Close", left)
	}
}
