package local

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOwnedMembers(t *testing.T) {
	t.Parallel()
	g := groupRecord{PGID: 100, Start: 5000, SID: 7, BootID: "boot-a"}
	leader := procInfo{PID: 100, PGID: 100, SID: 7, Start: 5000}
	child := procInfo{PID: 101, PGID: 100, SID: 7, Start: 5003}
	other := procInfo{PID: 300, PGID: 300, SID: 7, Start: 5001}
	tests := []struct {
		name  string
		g     groupRecord
		procs []procInfo
		boot  string
		want  []int
	}{
		{"LeaderAndChild", g, []procInfo{leader, child, other}, "boot-a", []int{100, 101}},
		{"LeaderGoneChildLeft", g, []procInfo{child, other}, "boot-a", []int{101}},
		{"ZombieLeaderChildLeft", g, []procInfo{{PID: 100, PGID: 100, SID: 7, Start: 5000, Zombie: true}, child}, "boot-a", []int{101}},
		{"OnlyZombies", g, []procInfo{{PID: 100, PGID: 100, SID: 7, Start: 5000, Zombie: true}}, "boot-a", nil},
		{"GroupEmpty", g, []procInfo{other}, "boot-a", nil},
		// The pgid was handed to a new process that leads a group of its own.
		{"ReusedLeader", g, []procInfo{{PID: 100, PGID: 100, SID: 7, Start: 9000}, {PID: 102, PGID: 100, SID: 7, Start: 9001}}, "boot-a", nil},
		// A reused group whose leader exited: its members are in another session...
		{"ReusedOtherSession", g, []procInfo{{PID: 102, PGID: 100, SID: 8, Start: 9001}}, "boot-a", nil},
		// ...or started before our leader, so they cannot descend from it.
		{"MemberOlderThanLeader", g, []procInfo{{PID: 99, PGID: 100, SID: 7, Start: 4000}}, "boot-a", nil},
		{"OtherBoot", g, []procInfo{leader, child}, "boot-b", nil},
		{"BootUnknown", g, []procInfo{leader}, "", []int{100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []int
			for _, p := range ownedMembers(tc.g, tc.procs, tc.boot) {
				got = append(got, p.PID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ownedMembers(%+v) pids (-want +got):\n%s", tc.g, diff)
			}
		})
	}
}

// A command whose talkops died after starting it but before recording its process group
// is still found, by the token in its environment, even when it left the group (setsid).
func TestTokenMarkedProcessesAreReaped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const token = "0123456789abcdef01234567"
	if err := writeJSON(filepath.Join(dir, tokenFile(token)), tokenRecord{Token: token, BootID: bootID()}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), tokenEnv + "=" + token}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	if err := reapGroups(t.Context(), dir); err != nil {
		t.Fatalf("reapGroups: %v", err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the marked process ended with %v, want SIGKILL from reapGroups", err)
	}
}
