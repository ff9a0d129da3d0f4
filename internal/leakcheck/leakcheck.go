// Package leakcheck fails a package's tests when goroutines they started
// are still running after them, with go.uber.org/goleak. It is for
// TestMain only.
package leakcheck

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Settle is how long goroutines get to end on their own after the tests
// before the check: the Redis store's idle batch senders exit 2 s after
// their last batch, which is not a leak; one still running after Settle is.
const Settle = 3 * time.Second

// Main runs m's tests, waits up to Settle for the goroutines they started to
// end, then fails the run (exit status 1, the goroutines' stacks on stderr)
// if any is left; it calls after (when not nil) and exits with the status.
// ignore are goleak filters for goroutines that are not leaks; each use
// must say why. It never returns.
func Main(m *testing.M, after func(), ignore ...goleak.Option) {
	opts := append(ignore[:len(ignore):len(ignore)], goleak.Cleanup(func(code int) {
		if after != nil {
			after()
		}
		os.Exit(code)
	}))
	goleak.VerifyTestMain(settled{m: m, ignore: ignore}, opts...)
}

// settled runs the tests, then waits until no goroutine is left over (or
// Settle has passed), so that the check that follows sees only goroutines
// that never end.
type settled struct {
	m      *testing.M
	ignore []goleak.Option
}

func (s settled) Run() int {
	code := s.m.Run()
	deadline := time.Now().Add(Settle)
	for goleak.Find(s.ignore...) != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	return code
}
