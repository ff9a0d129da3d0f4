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
	tick := time.NewTicker(Every)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		<-tick.C
	}
	return time.Since(start)
}
