package local_test

import (
	"context"
	"errors"
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

// Environment of the helper process TestOrphanSweepWaitsForTheLastSandbox starts: a
// directory holding main/, room/ and host/.
const lastSandboxHelperEnv = "TALKOPS_LOCAL_LAST_SANDBOX_HELPER"

// TestLastSandboxHelperProcess is not a test: TestOrphanSweepWaitsForTheLastSandbox runs
// the test binary with lastSandboxHelperEnv set. As in a run verified in a clean room, a
// second sandbox (room) closes while the run's own (main) stays open beside a host
// process talkops started itself (an MCP server): closing the room must kill neither.
func TestLastSandboxHelperProcess(t *testing.T) {
	base := os.Getenv(lastSandboxHelperEnv)
	if base == "" {
		t.Skip("helper process for TestOrphanSweepWaitsForTheLastSandbox")
	}
	if err := local.BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	detach := "env -i /bin/sh -c 'setsid sleep 1000 >/dev/null 2>&1 < /dev/null &'"
	p := local.New(local.Options{})
	main := startDetached(t, p, base+"/main", detach)
	room := startDetached(t, p, base+"/room", detach)
	bystander := exec.Command("sleep", "1000")
	bystander.Dir = base + "/host"
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	if err := room.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(processesIn(base+"/main", "sleep")) == 0 {
		t.Error("closing the clean room killed what the still open sandbox detached")
	}
	_ = bystander.Process.Kill()
	var exit *exec.ExitError
	if err := bystander.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("host process talkops started: Wait() = %v after the clean room closed, want killed by this test's own SIGKILL", err)
	}
	if err := main.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOrphanSweepWaitsForTheLastSandbox(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, d := range []string{"main", "room", "host"} {
		if err := os.Mkdir(base+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLastSandboxHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lastSandboxHelperEnv+"="+base)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("helper: %v\n%s", err, out)
	}
	for _, d := range []string{"main", "room"} {
		if left := waitGone(base + "/" + d); len(left) > 0 {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("%s: env -i setsid left %v running after the last Close", d, left)
		}
	}
}
