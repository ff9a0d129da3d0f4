package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// A window's key expires at the same instant whatever decision in that
// window wrote it last (its end, or the end of the next for a sliding
// window's), so a decision on a key its window already counts has no
// expiry to renew: one PEXPIRE a key and window, whatever the decisions.
// The key still expires when the decisions say the full quota is back.
func TestWindowsSetTheirKeysExpiryOncePerWindow(t *testing.T) {
	const day = 24 * time.Hour
	for _, alg := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow} {
		lim := limiter.Limit{Algorithm: alg, Rate: 1_000_000, Period: day}
		t.Run(string(alg), func(t *testing.T) {
			srv := redistest.Single(t)
			st := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
			ctx := context.Background()
			const decisions = 50
			var last limiter.Decision
			for try := 0; ; try++ {
				before := commandCalls(t, srv, "pexpire")
				key := "k" + strconv.Itoa(try)
				first, err := st.Decide(ctx, key, lim, 1)
				if err != nil || !first.Allowed {
					t.Fatalf("decision 1: %+v %v", first, err)
				}
				for i := 2; i <= decisions; i++ {
					if last, err = st.Decide(ctx, key, lim, 1); err != nil || !last.Allowed {
						t.Fatalf("decision %d: %+v %v", i, last, err)
					}
				}
				// A day's window ends during the run once in thousands of runs: try again on a new key.
				if last.ResetAfter > first.ResetAfter {
					continue
				}
				if n := commandCalls(t, srv, "pexpire") - before; n != 1 {
					t.Fatalf("%d decisions on one key sent %d PEXPIREs, want 1", decisions, n)
				}
				reply, err := srv.Do("PTTL", st.Keys(key, alg)[0])
				ms, _ := reply.(int64)
				reset := last.ResetAfter.Milliseconds()
				// The PTTL is read after the last decision, on a loaded machine up to a second later;
				// it may pass the reset by 2 ms of rounding: the expiry is whole ms from the first
				// write (rounded up, on Redis's ms clock), the reset µs truncated to ms.
				if err != nil || ms < reset-1000 || ms > reset+2 {
					t.Fatalf("PTTL %v ms (%v), want the reset the decisions answered, %d ms", reply, err, reset)
				}
				return
			}
		})
	}
}
