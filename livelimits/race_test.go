//go:build race

package livelimits

// raceEnabled relaxes timing assertions under the race detector, which slows everything.
const raceEnabled = true
