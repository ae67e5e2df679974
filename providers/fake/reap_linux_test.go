package fake_test

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

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/fake"
)

const reapHelperEnv = "TALKOPS_FAKE_REAP_HELPER"

// TestReapHelperProcess is not a test: TestDeleteKillsAKilledRunsCommands runs the test
// binary with reapHelperEnv set. It creates a sandbox through a ledger file, starts a
// command that leaves a background process, says so, and waits to be SIGKILLed.
func TestReapHelperProcess(t *testing.T) {
	if os.Getenv(reapHelperEnv) != "1" {
		t.Skip("helper process for TestDeleteKillsAKilledRunsCommands")
	}
	p, err := fake.FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(context.Background(), providers.Spec{RunID: "killed-run"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		res, err := sb.Exec(context.Background(), providers.Shell("sleep 60 & sleep 60"))
		fmt.Printf("Exec returned early: %+v %v\n", res, err)
	}()
	for range 500 {
		if m, _ := filepath.Glob(filepath.Join(os.Getenv(fake.EnvDir), fake.LocalStateDir, "*", "pgid-*.json")); len(m) == 1 {
			fmt.Printf("\nREADY %s %s\n", sb.ID(), sb.WorkDir())
			time.Sleep(time.Minute)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the command's process group was never recorded")
}

// sleepsIn returns the pids of the sleep processes whose working directory is dir.
func sleepsIn(dir string) []int {
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
		if c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.TrimSpace(string(c)) == "sleep" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestDeleteKillsAKilledRunsCommands is weakness W2: the Lister.Delete of another process
// must kill what a SIGKILLed run's command left running, as a remote delete would.
func TestDeleteKillsAKilledRunsCommands(t *testing.T) {
	// Orphans of the helper become this process's children, so that the test can reap
	// them and read how they died.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.json")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReapHelperProcess$", "-test.timeout=2m")
	helper.Env = append(os.Environ(), reapHelperEnv+"=1", fake.EnvDir+"="+dir, fake.EnvLedger+"="+ledger)
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
	var id, wd string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "READY" {
			id, wd = f[1], f[2]
			break
		}
	}
	if id == "" {
		t.Fatal("the helper process never reported its sandbox")
	}
	var sleeps []int
	for deadline := time.Now().Add(10 * time.Second); len(sleeps) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		sleeps = sleepsIn(wd)
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
	left := sleepsIn(wd)
	if len(left) == 0 {
		t.Fatal("no sleep outlived the helper: the test cannot show that Delete kills them")
	}

	p := fake.New(fake.Options{Dir: dir, LedgerFile: ledger})
	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("Delete(%s): %v", id, err)
	}
	for _, pid := range left {
		var ws syscall.WaitStatus
		got := 0
		for deadline := time.Now().Add(10 * time.Second); got != pid && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if got, err = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil {
				t.Fatalf("wait4(%d): %v", pid, err)
			}
		}
		if got != pid || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("sleep %d after Delete: reaped %v, status %v; want killed by SIGKILL", pid, got == pid, ws)
		}
	}
	for _, pid := range sleeps {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill(%d, 0) after Delete = %v, want ESRCH", pid, err)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, fake.LocalStateDir)); err != nil || len(ents) != 0 {
		t.Errorf("local records after Delete = %v, %v; want none", ents, err)
	}
	if ids := alive(t, p); len(ids) != 0 {
		t.Errorf("Alive after Delete = %v, want none", ids)
	}
}
