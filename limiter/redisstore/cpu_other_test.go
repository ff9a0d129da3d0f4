//go:build !unix

package redisstore

import "time"

// processCPU is not measured here: benchmarks report 0 µs per decision.
func processCPU() time.Duration { return 0 }
