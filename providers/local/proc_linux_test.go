package local

import (
	"os"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stat    string
		want    procInfo
		wantErr bool
	}{
		{"Plain", "42 (sleep) S 1 40 30 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 10",
			procInfo{PID: 42, PPID: 1, PGID: 40, SID: 30, Start: 123456}, false},
		{"CommWithSpacesAndParen", "42 (a b) c) Z 1 40 30 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 77 1000 10",
			procInfo{PID: 42, PPID: 1, PGID: 40, SID: 30, Start: 77, Zombie: true}, false},
		{"Truncated", "42 (sleep) S 1 40 30", procInfo{}, true},
		{"NoComm", "42 sleep S 1 40 30", procInfo{}, true},
		{"BadNumber", "42 (sleep) S 1 x 30 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 1 1000 10", procInfo{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStat(42, []byte(tc.stat))
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseStat(%q) error = %v, want error %v", tc.stat, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseStat(%q) (-want +got):\n%s", tc.stat, diff)
			}
		})
	}
}

func TestProcStatSelf(t *testing.T) {
	t.Parallel()
	p, err := procStat(os.Getpid())
	if err != nil {
		t.Fatalf("procStat(self): %v", err)
	}
	pgid, _ := syscall.Getpgid(0)
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if errno != 0 {
		t.Fatalf("getsid: %v", errno)
	}
	if p.PGID != pgid || p.SID != int(sid) || p.Start == 0 || p.Zombie {
		t.Errorf("procStat(self) = %+v, want pgid %d, sid %d, a start time, not a zombie", p, pgid, sid)
	}
	if bootID() == "" {
		t.Error("bootID() is empty on Linux")
	}
}
