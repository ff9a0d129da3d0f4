//go:build !unix

package main

import "time"

// processCPU is 0 where getrusage is not available: the report's client
// CPU figures then read 0.
func processCPU() time.Duration { return 0 }
