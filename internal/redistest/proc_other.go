//go:build !linux

package redistest

import (
	"errors"
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalProcess(p *os.Process, freeze bool) error {
	return errors.New("Freeze and Thaw need Linux")
}
