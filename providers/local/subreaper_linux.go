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
	open   = map[*sandbox]struct{}{} // sandboxes not closed: their tokens mark their processes
)

// BecomeSubreaper makes this process the child subreaper of everything local commands
// start: a process that detaches and also clears its environment (env -i setsid ...),
// and so carries no command token, is reparented to this process instead of init, and
// Close kills it. Only a process whose only children are local commands may call it (the
// talkops CLI, whose run has one provider): Close kills every other child it did not
// start. It cannot be undone.
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

// killOrphans SIGKILLs and reaps this process's children that no Exec started and no
// open sandbox's token marks: what local commands detached from their environment. It
// does nothing unless BecomeSubreaper succeeded.
func killOrphans() error {
	if !subreaper.Load() {
		return nil
	}
	starting.Lock()
	defer starting.Unlock()
	liveMu.Lock()
	var protected []string
	for sb := range open {
		sb.mu.Lock()
		protected = append(protected, sb.tokens...)
		sb.mu.Unlock()
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
	for _, pid := range marked(procs, protected) {
		skip[pid] = struct{}{}
	}
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
