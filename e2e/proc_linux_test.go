package e2e

import "syscall"

// sysProcAttr makes the kernel kill a started program if the test binary
// dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
