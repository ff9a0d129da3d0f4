//go:build !race

package limiter_test

// raceEnabled is true under -race, where timing assertions are not made.
const raceEnabled = false
