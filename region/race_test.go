package region_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// Decisions on many keys from many goroutines in two regions while rounds
// ship every few milliseconds, then Close: every region's copy of the
// other's slots ends equal to the other's own (run it with -race).
func TestShippingWhileManyGoroutinesDecideAndThenClosing(t *testing.T) {
	w := newWorld(t, worldConfig{regions: []string{"eu", "us"}, syncInterval: 5 * time.Millisecond})
	algs := region.Algorithms(region.ModeAsync)
	var wg sync.WaitGroup
	for _, n := range w.names {
		for g := range 6 {
			a := algs[g%len(algs)]
			l, err := limiter.New(limiter.Config{
				Limit: limiter.Limit{Algorithm: a, Rate: 1000, Period: time.Hour}, Timeout: 5 * time.Second, FailPolicy: limiter.FailClosed,
				Store: mustStore(t, w.sets[n], region.ModeAsync),
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 150 {
					if _, err := l.Allow(context.Background(), fmt.Sprintf("race-%d", i%10)); err != nil {
						t.Errorf("%s: %v", n, err)
						return
					}
				}
			}()
		}
	}
	// Close while some decisions may still be on their way: they still
	// decide; only their shipping may be left out.
	wg.Wait()
	var closing sync.WaitGroup
	for _, s := range w.sets {
		closing.Add(1)
		go func() { defer closing.Done(); _ = s.Close() }()
	}
	closing.Wait()
	ctx := context.Background()
	for _, a := range algs {
		for i := range 10 {
			hash := hashKey(fmt.Sprintf("race-%d", i), a)
			for _, pair := range [][2]string{{"eu", "us"}, {"us", "eu"}} {
				want, err := w.direct[pair[0]].HGet(ctx, hash, "r:"+pair[0]).Result()
				if err != nil {
					continue // this region never decided the key under a
				}
				got, _ := w.direct[pair[1]].HGet(ctx, hash, "r:"+pair[0]).Result()
				if got != want {
					t.Errorf("%s's slot of %s in %s is %q after Close, want %q", pair[0], hash, pair[1], got, want)
				}
			}
		}
	}
}

func mustStore(t *testing.T, s *region.Set, m region.Mode) limiter.Store {
	t.Helper()
	st, err := s.Store(m, region.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
