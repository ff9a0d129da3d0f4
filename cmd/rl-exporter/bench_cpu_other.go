//go:build !unix

package main

import "time"

// processCPU is 0 where the process's CPU time is not read.
func processCPU() time.Duration { return 0 }
