//go:build unix && !linux

package local

import "syscall"

// setPdeathsig does nothing where there is no parent-death signal; the recorded process
// groups are then the only way to reap a killed run's commands.
func setPdeathsig(*syscall.SysProcAttr) {}
