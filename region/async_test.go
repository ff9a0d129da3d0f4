package region_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/region"
)

// What one region admitted reaches the other with the next shipping round,
// and the other then admits only the rest, for every async algorithm.
func TestAsyncCountsWhatTheOtherRegionAdmittedOnceShipped(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}, syncInterval: 20 * time.Millisecond})
	for _, a := range region.Algorithms(region.ModeAsync) {
		t.Run(string(a), func(t *testing.T) {
			const quota = 20
			lim := limiter.Limit{Algorithm: a, Rate: quota, Period: time.Hour}
			key := keyWithRoom(t, "async-"+string(a), time.Hour, time.Minute)
			ls := w.limiters(t, region.ModeAsync, region.StoreOptions{}, lim)
			for i := range 12 {
				d, err := ls["eu"].Allow(context.Background(), key)
				if err != nil || !d.Allowed {
					t.Fatalf("eu decision %d: %+v, %v", i, d, err)
				}
			}
			waitSlot(t, w, "us", hashKey(key, a), "eu")
			admitted := 0
			for range quota {
				d, err := ls["us"].Allow(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if admitted != quota-12 {
				t.Fatalf("us admitted %d after eu's 12 were shipped, want %d", admitted, quota-12)
			}
			// And back: eu now knows us's units and admits nothing more.
			waitSlot(t, w, "eu", hashKey(key, a), "us")
			d, err := ls["eu"].Allow(context.Background(), key)
			if err != nil || d.Allowed {
				t.Fatalf("eu after both spent the limit: %+v, %v", d, err)
			}
		})
	}
}

// waitSlot waits until region in's copy of hash holds from's slot as
// from's own Redis has it.
func waitSlot(t *testing.T, w *world, in, hash, from string) {
	t.Helper()
	ctx := context.Background()
	var got, want string
	eventually(t, 5*time.Second, func() string {
		return fmt.Sprintf("%s's slot of %s in %s is %q, want %q", from, hash, in, got, want)
	}, func() bool {
		var err error
		if want, err = w.direct[from].HGet(ctx, hash, "r:"+from).Result(); err != nil {
			t.Fatalf("%s's own slot of %s: %v", from, hash, err)
		}
		got, _ = w.direct[in].HGet(ctx, hash, "r:"+from).Result()
		return got == want
	})
}

func TestAsyncRefusesAnAlgorithmItCannotReplicate(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}})
	st, err := w.sets["eu"].Store(region.ModeAsync, region.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Decide(context.Background(), "k", limiter.Limit{Algorithm: limiter.SlidingLog, Rate: 5, Period: time.Minute}, 1)
	if err == nil {
		t.Fatal("async decided a sliding_log limit")
	}
}

// Units learnt from another region are taken once: once the bucket has
// refilled, the region that learnt them has the whole bucket again.
func TestAsyncBucketsRefillWhatTheOtherRegionTookOnce(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}, syncInterval: 20 * time.Millisecond})
	for _, a := range []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA} {
		t.Run(string(a), func(t *testing.T) {
			const burst = 20
			lim := limiter.Limit{Algorithm: a, Rate: burst, Period: time.Second}
			key := "refill-" + string(a)
			ls := w.limiters(t, region.ModeAsync, region.StoreOptions{}, lim)
			spend := func(n string) int {
				admitted := 0
				for range burst + 5 {
					d, err := ls[n].Allow(context.Background(), key)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						admitted++
					}
				}
				return admitted
			}
			if got := spend("eu"); got < burst || got > burst+1 {
				t.Fatalf("eu admitted %d from a full bucket of %d", got, burst)
			}
			waitSlot(t, w, "us", hashKey(key, a), "eu")
			if got := spend("us"); got > 1 {
				t.Fatalf("us admitted %d once eu's %d were shipped, want at most the refill of a moment", got, burst)
			}
			// A full refill later, us has the whole bucket: eu's units
			// were taken once, not again by a later round.
			time.Sleep(lim.Window() + 100*time.Millisecond) // not synchronisation: the bucket refills
			if got := spend("us"); got < burst || got > burst+1 {
				t.Fatalf("us admitted %d from a refilled bucket of %d", got, burst)
			}
		})
	}
}

// One region's async store decides as the memory store does: its state is
// the store's own scripts in their multi-region mode.
func TestAsyncInOneRegionConforms(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu"}})
	st, err := w.sets["eu"].Store(region.ModeAsync, region.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	limitertest.RunAlgorithms(t, func(*testing.T) limiter.Store { return st },
		[]limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow, limiter.TokenBucket, limiter.GCRA})
}
