package redistest

import (
	"os"
	"syscall"
)

// sysProcAttr makes the kernel kill the server if the test binary dies
// without running its cleanups, so no redis-server outlives a crashed test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func signalProcess(p *os.Process, freeze bool) error {
	if freeze {
		return p.Signal(syscall.SIGSTOP)
	}
	return p.Signal(syscall.SIGCONT)
}
