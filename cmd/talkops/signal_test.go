package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// startTalkops starts the test binary as a real talkops process in dir.
func startTalkops(t *testing.T, dir string, env map[string]string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = dir
	cmd.Env = []string{"TALKOPS_TEST_BE_MAIN=1"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, &out
}

// waitFile polls until path exists and returns its content.
func waitFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(data)) > 0 {
			return strings.TrimSpace(string(data))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not appear within %s", path, within)
	return ""
}

// waitExit waits for the process and returns its exit code, failing if it hangs.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		_ = cmd.Process.Kill()
		t.Fatalf("talkops did not exit within %s of the signal", within)
		return -1
	}
}

func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// TestSignals sends SIGINT or SIGTERM to a real talkops process during the setup script and
// during a long check: teardown runs, the sandbox's processes are gone, result.json
// records the interruption, and the exit code is 130 or 143.
func TestSignals(t *testing.T) {
	t.Parallel()
	const longCheck = "[[check]]\nid = \"long\"\nrun = \"echo $$ > work.pid; sleep 30\"\n"
	tests := []struct {
		name   string
		sig    syscall.Signal
		want   int
		files  map[string]string
		args   []string
		stage  result.StageName
		second bool // send SIGTERM right after the first signal
	}{
		{name: "SIGINT during setup", sig: syscall.SIGINT, want: 130, stage: "setup",
			files: map[string]string{"r.toml": passRubric, "setup.sh": "echo $$ > work.pid\nsleep 30\n"},
			args:  []string{"--rubric", "r.toml", "--sandbox-setup", "setup.sh"}},
		{name: "SIGTERM during setup", sig: syscall.SIGTERM, want: 143, stage: "setup",
			files: map[string]string{"r.toml": passRubric, "setup.sh": "echo $$ > work.pid\nsleep 30\n"},
			args:  []string{"--rubric", "r.toml", "--sandbox-setup", "setup.sh"}},
		{name: "SIGINT during check", sig: syscall.SIGINT, want: 130, stage: "rubric",
			files: map[string]string{"r.toml": longCheck}, args: []string{"--rubric", "r.toml"}},
		{name: "SIGTERM during check", sig: syscall.SIGTERM, want: 143, stage: "rubric",
			files: map[string]string{"r.toml": longCheck}, args: []string{"--rubric", "r.toml"}},
		{name: "second signal forces", sig: syscall.SIGINT, want: 130, stage: "rubric", second: true,
			files: map[string]string{"r.toml": longCheck}, args: []string{"--rubric", "r.toml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, tc.files)
			cmd, out := startTalkops(t, dir, testEnv(t, nil), tc.args...)
			pid, err := strconv.Atoi(waitFile(t, filepath.Join(dir, "work.pid"), 20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			if tc.second {
				time.Sleep(50 * time.Millisecond)
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
			if code := waitExit(t, cmd, 15*time.Second); code != tc.want {
				t.Fatalf("exit %d, want %d\n%s", code, tc.want, out)
			}
			// The sandboxed process must be gone once talkops has exited.
			deadline := time.Now().Add(2 * time.Second)
			for !processGone(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if !processGone(pid) {
				t.Errorf("the sandbox's process %d survived talkops", pid)
			}
			r := readResult(t, dir)
			if r.ExitCode != tc.want || r.Interrupted == "" || r.Verdict != "error" {
				t.Errorf("result.json: exit %d interrupted %q verdict %q, want exit %d, interrupted, verdict error",
					r.ExitCode, r.Interrupted, r.Verdict, tc.want)
			}
			if r.Teardown == nil || r.Teardown.Status != "deleted" {
				t.Errorf("result.json teardown = %+v, want deleted", r.Teardown)
			}
			if got := stageStatus(r, tc.stage); got != "interrupted" {
				t.Errorf("stage %s status %q, want interrupted", tc.stage, got)
			}
		})
	}
}
