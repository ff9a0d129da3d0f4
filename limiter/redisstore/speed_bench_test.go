package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// BenchmarkSpeedMechanisms measures what each speed mechanism of the store
// buys: benchConcurrent's costs (our CPU per decision, cpu-µs/op, and
// Redis's, redis-µs/op) on the load the mechanism is for, on a store as it
// runs (on) and on one with the mechanism switched off (off, SwitchOff).
// Run it a few times and compare the rounds side by side: on and off of
// one load run one after the other, on the same redis-server.
func BenchmarkSpeedMechanisms(b *testing.B) {
	srv := redistest.Single(b)
	type load struct {
		alg           limiter.Algorithm
		keys, callers int
	}
	hot := []load{{limiter.GCRA, 1, 64}, {limiter.FixedWindow, 1, 64}}
	spread := []load{{limiter.GCRA, 1000, 64}}
	few := []load{{limiter.GCRA, 1000, 64}, {limiter.GCRA, 1000, 2}}
	loads := map[string][]load{"cache": hot, "compact-args": spread, "raw-replies": few, "own-conn": few}
	for _, m := range redisstore.SpeedMechanisms {
		for _, l := range loads[m] {
			for _, on := range []bool{true, false} {
				state := "on"
				if !on {
					state = "off"
				}
				b.Run(fmt.Sprintf("%s/%s/keys=%d/callers=%d/%s", m, l.alg, l.keys, l.callers, state), func(b *testing.B) {
					store := newStore(b, redisstore.ClientConfig{URL: srv.URL()})
					if !on {
						if err := store.SwitchOff(m); err != nil {
							b.Fatal(err)
						}
					}
					benchConcurrent(b, srv, store, l.alg, l.keys, l.callers)
				})
			}
		}
	}
}
