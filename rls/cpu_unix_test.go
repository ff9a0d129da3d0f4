//go:build unix

package rls_test

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time this process has used, the steady figure of a
// benchmark on a busy machine, where wall-clock time swings.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
