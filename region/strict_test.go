package region_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// Two regions driving one key as fast as they can: strict admits exactly the
// limit, whichever region is home, for every algorithm.
func TestStrictAdmitsExactlyTheLimitForEveryAlgorithmFromTwoRegions(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}, oneWay: 5 * time.Millisecond})
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			const quota = 40
			lim := limiter.Limit{Algorithm: a, Rate: quota, Period: time.Hour}
			key := keyWithRoom(t, "strict-"+string(a), time.Hour, time.Minute)
			ls := w.limiters(t, region.ModeStrict, region.StoreOptions{}, lim)
			var admitted, errs atomic.Int64
			var wg sync.WaitGroup
			for _, l := range ls {
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range quota {
							d, err := l.Allow(context.Background(), key)
							if err != nil {
								errs.Add(1)
							} else if d.Allowed {
								admitted.Add(1)
							}
						}
					}()
				}
			}
			wg.Wait()
			if errs.Load() != 0 {
				t.Fatalf("%d decisions failed", errs.Load())
			}
			if got := admitted.Load(); got != quota {
				t.Fatalf("two regions admitted %d, want exactly %d (1.00×)", got, quota)
			}
		})
	}
	eu, us := w.obs["eu"], w.obs["us"]
	if eu.remote.Load() == 0 && us.remote.Load() == 0 {
		t.Error("no decision crossed regions")
	}
	if eu.rtts.Load() != eu.remote.Load() || us.rtts.Load() != us.remote.Load() {
		t.Errorf("RTTs observed (%d, %d) differ from remote decisions (%d, %d)", eu.rtts.Load(), us.rtts.Load(), eu.remote.Load(), us.remote.Load())
	}
}

func TestStrictDecidesOnTheHomeRegionAndNamesItsShard(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}})
	st, err := w.sets["eu"].Store(region.ModeStrict, region.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := w.sets["eu"].Store(region.ModeStrict, region.StoreOptions{Home: "us"})
	if err != nil {
		t.Fatal(err)
	}
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 10, Period: time.Minute}
	for i := range 20 {
		key := "k" + strings.Repeat("x", i)
		home := w.sets["eu"].Home(key)
		if home != w.sets["us"].Home(key) {
			t.Fatalf("regions disagree on the home of %q", key)
		}
		if got := st.(limiter.ShardedStore).Shard(key); got != "region/"+home {
			t.Fatalf("Shard(%q) = %q, want region/%s", key, got, home)
		}
		if got := pinned.(limiter.ShardedStore).Shard(key); got != "region/us" {
			t.Fatalf("pinned Shard(%q) = %q, want region/us", key, got)
		}
		if _, err := st.Decide(context.Background(), key, lim, 1); err != nil {
			t.Fatal(err)
		}
		n, err := w.direct[home].Exists(context.Background(), "rl:{"+key+"}:gcra").Result()
		if err != nil || n != 1 {
			t.Fatalf("the state of %q is not on its home %s: %v, %v", key, home, n, err)
		}
	}
}

// A lost home region is a store failure for its keys only: the limiter's
// fail policy decides them, and keys homed on the local region still work.
func TestStrictWithALostHomeFailsOnlyItsKeys(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}})
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Minute}
	st, err := w.sets["eu"].Store(region.ModeStrict, region.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := limiter.NewGuard(limiter.GuardConfig{Store: "redis", Breaker: limiter.BreakerConfig{Threshold: 2, Cooldown: time.Minute}})
	l, err := limiter.New(limiter.Config{Limit: lim, Store: st, Guard: g, FailPolicy: limiter.FailClosed, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var euKey, usKey string
	for i := 0; euKey == "" || usKey == ""; i++ {
		k := "key-" + strings.Repeat("y", i)
		if w.sets["eu"].Home(k) == "eu" {
			euKey = k
		} else {
			usKey = k
		}
	}
	w.links[[2]string{"eu", "us"}].BlackHole()
	defer w.links[[2]string{"eu", "us"}].Restore()
	for range 3 {
		d, err := l.Allow(context.Background(), usKey)
		if err == nil || d.Failure != limiter.FailureClosed {
			t.Fatalf("a key homed on the lost region: %+v, %v; want a fail-closed failure", d, err)
		}
	}
	start := time.Now()
	d, err := l.Allow(context.Background(), euKey)
	if err != nil || !d.Allowed {
		t.Fatalf("a key homed on the local region: %+v, %v", d, err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("a local key took %s with the other region lost", took)
	}
}
