package local

import "syscall"

// setPdeathsig makes the kernel SIGKILL the command when the thread that started it
// exits, which covers talkops being SIGKILLed (Exec keeps that thread locked until the
// command is waited for). It reaches the command itself, not its children.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
