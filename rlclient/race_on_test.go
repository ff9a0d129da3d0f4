//go:build race

package rlclient

// raceEnabled skips timing assertions under the race detector, which slows
// everything down; the tests themselves still run.
const raceEnabled = true
