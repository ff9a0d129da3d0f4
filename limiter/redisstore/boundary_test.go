package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// TestBoundaryBurst shows on Redis, whose clock cannot be faked, what the
// memory store's boundary test shows on a controllable clock: a burst just
// before a window boundary and another just after are both admitted by a
// fixed window (twice the limit within much less than one period), while a
// sliding log admits the limit once and the buckets admit the burst plus
// what refilled in between.
func TestBoundaryBurst(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	const (
		rate   = 10
		period = 2 * time.Second
	)
	// Aligned windows end on multiples of the period; a probe tells how
	// far away the next boundary is on Redis's clock.
	probe := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1000, Period: period, AlignWindows: true}
	d, err := store.Decide(ctx, "boundary:probe", probe, 1)
	if err != nil {
		t.Fatal(err)
	}
	untilBoundary := d.ResetAfter
	if untilBoundary < 600*time.Millisecond {
		untilBoundary += period // too close: use the next boundary
	}
	// First burst 400 ms before the boundary, second 100 ms after it.
	time.Sleep(untilBoundary - 400*time.Millisecond)

	algs := []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.GCRA}
	first := map[limiter.Algorithm]int{}
	second := map[limiter.Algorithm]int{}
	burst := func(into map[limiter.Algorithm]int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, a := range algs {
			wg.Add(1)
			go func(a limiter.Algorithm) {
				defer wg.Done()
				lim := limiter.Limit{Algorithm: a, Rate: rate, Period: period, AlignWindows: true}
				n := 0
				for i := 0; i < rate; i++ {
					d, err := store.Decide(ctx, "boundary:"+string(a), lim, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						n++
					}
				}
				mu.Lock()
				into[a] = n
				mu.Unlock()
			}(a)
		}
		wg.Wait()
	}
	start := time.Now()
	burst(first)
	firstDone := time.Since(start)
	time.Sleep(500*time.Millisecond - firstDone)
	burst(second)
	span := time.Since(start)
	t.Logf("bursts of %d each over %s: first %v, second %v", rate, span, first, second)

	if !raceEnabled && (firstDone > 350*time.Millisecond || span > period-500*time.Millisecond) {
		t.Fatalf("schedule slipped: first burst took %s, both %s (want well inside one period of %s)", firstDone, span, period)
	}
	if got := first[limiter.FixedWindow] + second[limiter.FixedWindow]; got != 2*rate {
		t.Errorf("fixed_window admitted %d across the boundary, want all %d: the boundary burst", got, 2*rate)
	}
	if got := first[limiter.SlidingLog] + second[limiter.SlidingLog]; got != rate {
		t.Errorf("sliding_log admitted %d within one period, want exactly the limit %d", got, rate)
	}
	// A bucket of B refilled at R per P admits at most B + R·span/P in a span.
	refill := int(float64(rate) * span.Seconds() / period.Seconds())
	for _, a := range []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA} {
		got := first[a] + second[a]
		if first[a] != rate || got > rate+refill+1 {
			t.Errorf("%s admitted %d then %d over %s, want %d then at most the refill of %d", a, first[a], second[a], span, rate, refill+1)
		}
	}
}
