package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

// Environment of the helper process TestKilledRunIsReaped starts.
const (
	reapHelperEnv     = "TALKOPS_LOCAL_REAP_HELPER" // the state directory
	reapHelperProject = "TALKOPS_LOCAL_REAP_PROJECT"
)

// TestReapHelperProcess is not a test: TestKilledRunIsReaped runs the test binary with
// reapHelperEnv set. It creates a recorded sandbox, starts a command that leaves a
// background process, says so, and waits to be SIGKILLed.
func TestReapHelperProcess(t *testing.T) {
	stateDir := os.Getenv(reapHelperEnv)
	if stateDir == "" {
		t.Skip("helper process for TestKilledRunIsReaped")
	}
	p := local.New(local.Options{StateDir: stateDir})
	sb, err := p.Create(context.Background(), providers.Spec{RunID: "killed-run", ProjectDir: os.Getenv(reapHelperProject)})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		res, err := sb.Exec(context.Background(), providers.Shell("sleep 60 & sleep 60"))
		fmt.Printf("Exec returned early: %+v %v\n", res, err)
	}()
	for range 500 {
		if m, _ := filepath.Glob(filepath.Join(stateDir, sb.ID(), "pgid-*.json")); len(m) == 1 {
			fmt.Printf("\nREADY %s %s\n", sb.ID(), strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), "pgid-"), ".json"))
			time.Sleep(time.Minute)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the command's process group was never recorded")
}

// processesIn returns the pids of the processes named comm whose working directory is
// dir (zombies have none).
func processesIn(dir, comm string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		if c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.TrimSpace(string(c)) == comm {
			pids = append(pids, pid)
		}
	}
	return pids
}

// reapKilled waits (bounded) for pid, a child of this process, to end and returns its
// wait status.
func reapKilled(t *testing.T, pid int) syscall.WaitStatus {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if err != nil {
			t.Fatalf("wait4(%d): %v", pid, err)
		}
		if got == pid {
			return ws
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL) // best effort before failing: leave no stray process
	t.Fatalf("process %d still runs", pid)
	return 0
}

// TestKilledRunIsReaped is weakness W1: a talkops process SIGKILLed while a command runs
// cannot close its sandbox. The parent-death signal must kill the command itself, and
// another process's List and Delete must find and kill what the command started.
func TestKilledRunIsReaped(t *testing.T) {
	// Orphans of the helper become this process's children, so that the test can reap
	// them and read how they died (init on a CI machine may never reap them).
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	stateDir, project := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReapHelperProcess$", "-test.timeout=2m")
	helper.Env = append(os.Environ(), reapHelperEnv+"="+stateDir, reapHelperProject+"="+project)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	// The test kills the helper itself; this is the backstop when it fails first.
	defer func() { _ = helper.Process.Kill() }()
	var id string
	var pgid int
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "READY" {
			id = f[1]
			pgid, _ = strconv.Atoi(f[2])
			break
		}
	}
	if id == "" || pgid <= 1 {
		t.Fatal("the helper process never reported its sandbox")
	}
	var sleeps []int
	for deadline := time.Now().Add(10 * time.Second); len(sleeps) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		sleeps = processesIn(project, "sleep")
	}
	if len(sleeps) != 2 {
		t.Fatalf("sleeps running in the sandbox = %v, want 2", sleeps)
	}
	t.Cleanup(func() {
		for _, pid := range sleeps {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ESRCH when the test already saw them die
		}
	})

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()

	// The parent-death signal killed the group leader (the shell, or the sleep it
	// exec'd). It is this process's child now.
	if ws := reapKilled(t, pgid); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the command's leader %d ended with %v, want killed by SIGKILL (the parent-death signal)", pgid, ws)
	}
	left := processesIn(project, "sleep")
	if len(left) == 0 {
		t.Fatal("no sleep outlived the helper: the test cannot show that Delete kills them")
	}

	p := local.New(local.Options{StateDir: stateDir})
	infos, err := p.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	type listed struct{ ID, RunID, State, Owner string }
	var got []listed
	for _, in := range infos {
		got = append(got, listed{in.ID, in.RunID, in.State, in.Labels[providers.LabelOwnerPID]})
	}
	want := []listed{{id, "killed-run", local.StateRunning, strconv.Itoa(helper.Process.Pid)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("List after the owner was killed (-want +got):\n%s", diff)
	}

	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("Delete(%s): %v", id, err)
	}
	for _, pid := range left {
		if ws := reapKilled(t, pid); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("sleep %d ended with %v, want killed by SIGKILL", pid, ws)
		}
	}
	for _, pid := range sleeps {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill(%d, 0) after Delete = %v, want ESRCH", pid, err)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of %s after Delete: stat error %v, want it gone", id, err)
	}
	if infos, err := p.List(ctx); err != nil || len(infos) != 0 {
		t.Errorf("List after Delete = %+v, %v; want nothing", infos, err)
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Errorf("second Delete(%s) = %v, want nil", id, err)
	}
}
