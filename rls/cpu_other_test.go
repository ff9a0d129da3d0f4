//go:build !unix

package rls_test

import "time"

// processCPU is not measured off unix.
func processCPU() (time.Duration, bool) { return 0, false }
