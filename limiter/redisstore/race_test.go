//go:build race

package redisstore_test

// raceEnabled is true under -race, where timing assertions are not made.
const raceEnabled = true
