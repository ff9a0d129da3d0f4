// Package eventually is the tests' wait on a condition: poll it until it
// holds or a deadline passes, instead of sleeping for a guessed time.
package eventually

import (
	"testing"
	"time"
)

// Every is how often a condition is polled.
const Every = 5 * time.Millisecond

// True polls cond every Every until it holds, and fails t naming what when
// it still does not after within. It returns how long cond took to hold.
// Call it from the test's goroutine.
func True(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !Within(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
	return time.Since(start)
}

// Within polls cond every Every until it holds or within has passed, and
// reports whether it held, for a caller that goes on either way.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(Every)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		<-tick.C
	}
	return true
}
