//go:build !race

package server_test

// raceEnabled relaxes timing assertions (not tests) under the race detector.
const raceEnabled = false
