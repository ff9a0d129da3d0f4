package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A live limit may lengthen a window's period while its key counts a
// window that starts where the new period's does (1h to 2h at an even
// hour). A decision then counts on in that window and must give the key
// the new window's expiry: one kept from the old period would drop the
// count an hour early, admitting up to a quota more in the new window (a
// sliding window's an hour before its count stops weighing).
func TestAWindowWhosePeriodGrewGetsTheNewExpiry(t *testing.T) {
	srv, store := singleStore(t)
	ctx := context.Background()
	const twoHours = int64(2 * time.Hour / time.Microsecond)
	for _, a := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow} {
		t.Run(string(a), func(t *testing.T) {
			single, _ := scriptsAt(t, a)
			key := "grown:" + string(a)
			keys := store.Keys(key, a)
			clock := newInstants()
			// Ten minutes into a window of both periods.
			clock.now = (clock.now/twoHours+1)*twoHours + int64(10*time.Minute/time.Microsecond)
			for i, period := range []time.Duration{time.Hour, 2 * time.Hour} {
				lim := limiter.Limit{Algorithm: a, Rate: 1000, Period: period, AlignWindows: true}
				reply, err := single.Run(ctx, store.client, keys, append(scriptArgs(key, lim, 1, limiter.ModeConsume), clock.clockArgs()...)...).Result()
				if err != nil {
					t.Fatalf("decision %d: %v", i+1, err)
				}
				ints, err := anyInts(reply, nil)
				if err != nil || ints[0] != 1 {
					t.Fatalf("decision %d: %v %v, want admitted", i+1, ints, err)
				}
				reset := ints[2] / 1000 // ms
				pttl, err := srv.Do("PTTL", keys[0])
				ms, _ := pttl.(int64)
				// 2 ms of rounding, as in TestWindowsSetTheirKeysExpiryOncePerWindow.
				if err != nil || ms < reset-1000 || ms > reset+2 {
					t.Fatalf("after decision %d (period %v): PTTL %v ms (%v), want its reset %d ms", i+1, period, pttl, err, reset)
				}
				clock.advance(int64(time.Second / time.Microsecond))
			}
		})
	}
}
