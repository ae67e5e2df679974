//go:build unix

package workspace

import "syscall"

// openFlags makes opening a file that was swapped for a FIFO return at once instead of
// blocking the walk; the Stat after opening then rejects it.
const openFlags = syscall.O_NONBLOCK
