//go:build race

package httplimit

// raceEnabled skips timing assertions (not tests) under the race detector.
const raceEnabled = true
