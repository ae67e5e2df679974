package local

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

var (
	// subreaper is set once BecomeSubreaper succeeded: orphans of local commands are then
	// this process's children, and Close sweeps them.
	subreaper atomic.Bool

	// starting is held for reading from a command's start until its pid is registered in
	// direct, and for writing by the orphan sweep: a command just started is never taken
	// for an orphan.
	starting sync.RWMutex

	liveMu sync.Mutex
	direct = map[int]struct{}{}      // pids of commands Exec started and has not waited for
	open   = map[*sandbox]struct{}{} // sandboxes not closed: the orphan sweep waits for the last
)

// BecomeSubreaper makes this process the child subreaper of everything local commands
// start: a process that detaches and also clears its environment (env -i setsid ...),
// and so carries no command token, is reparented to this process instead of init, and
// the Close of the last open local sandbox kills it. Only a process whose only children
// are local commands once its last local sandbox closes may call it (the talkops CLI,
// which stops its MCP servers before the teardown): that Close kills every other child
// it did not start. It cannot be undone.
func BecomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	subreaper.Store(true)
	return nil
}

func registerOpen(s *sandbox) {
	liveMu.Lock()
	open[s] = struct{}{}
	liveMu.Unlock()
}

func unregisterOpen(s *sandbox) {
	liveMu.Lock()
	delete(open, s)
	liveMu.Unlock()
}

func registerDirect(pid int) {
	liveMu.Lock()
	direct[pid] = struct{}{}
	liveMu.Unlock()
}

func unregisterDirect(pid int) {
	liveMu.Lock()
	delete(direct, pid)
	liveMu.Unlock()
}

// killOrphans SIGKILLs and reaps this process's children that no Exec started: what
// local commands detached from their environment. It does nothing unless BecomeSubreaper
// succeeded, nor while another local sandbox is open.
func killOrphans() error {
	if !subreaper.Load() {
		return nil
	}
	starting.Lock()
	defer starting.Unlock()
	liveMu.Lock()
	if len(open) > 0 {
		// Another sandbox is still open (the run's own, while a clean room closes): what
		// it detached, and the host processes talkops runs beside it (MCP servers), are
		// children of this process too and carry no token of the closing sandbox. The
		// last Close sweeps.
		liveMu.Unlock()
		return nil
	}
	skip := make(map[int]struct{}, len(direct))
	for pid := range direct {
		skip[pid] = struct{}{}
	}
	liveMu.Unlock()

	procs, err := readProcs()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var orphans []int
	for _, p := range procs {
		if _, ok := skip[p.PID]; ok || p.PPID != self {
			continue
		}
		if !p.Zombie {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		orphans = append(orphans, p.PID)
	}
	// They are our children now: reap them, or they stay zombies until we exit.
	deadline := time.Now().Add(reapWait)
	for _, pid := range orphans {
		for {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if got == pid || errors.Is(err, syscall.ECHILD) || (err != nil && !errors.Is(err, syscall.EINTR)) {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("orphaned processes did not die after SIGKILL")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}
