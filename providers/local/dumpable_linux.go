package local

import "syscall"

// prSetDumpable is PR_SET_DUMPABLE from <linux/prctl.h>.
const prSetDumpable = 4

// MarkNonDumpable makes this process non-dumpable: a process of the same user (a local
// command) can then no longer read its /proc/<pid>/environ, mem or fds. A command
// running as root still can; local is for trusted code only.
func MarkNonDumpable() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
