package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// boundaryAlgorithms are the algorithms the boundary burst is sent to.
var boundaryAlgorithms = []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.GCRA}

// burstResult is what one burst got, per algorithm.
type burstResult struct {
	admitted map[limiter.Algorithm]int
	// resets are the fixed window's ResetAfter values: where each request
	// fell relative to the window boundary, on Redis's clock.
	resets []time.Duration
}

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
	const (
		rate   = 10
		period = 2 * time.Second
	)
	// On a loaded machine a burst may slip across the boundary; the fixed
	// window's ResetAfter says so on Redis's clock, and the attempt is
	// repeated at a later boundary.
	for attempt := 1; attempt <= 3; attempt++ {
		first, second, span := boundaryAttempt(t, store, fmt.Sprintf("boundary:%d:", attempt), rate, period)
		t.Logf("attempt %d: bursts of %d each over %s: first %v, second %v", attempt, rate, span, first.admitted, second.admitted)
		if !placed(first.resets, 0, 600*time.Millisecond) || !placed(second.resets, period-900*time.Millisecond, period) {
			t.Logf("attempt %d: the bursts did not straddle the boundary (first %v, second %v); again", attempt, first.resets, second.resets)
			continue
		}
		if got := first.admitted[limiter.FixedWindow] + second.admitted[limiter.FixedWindow]; got != 2*rate {
			t.Errorf("fixed_window admitted %d within one period across the boundary, want all %d: the boundary burst", got, 2*rate)
		}
		if got := first.admitted[limiter.SlidingLog] + second.admitted[limiter.SlidingLog]; got != rate {
			t.Errorf("sliding_log admitted %d within one period, want exactly the limit %d", got, rate)
		}
		// A bucket of B refilled at R per P admits at most B + R·span/P in a span.
		refill := int(float64(rate) * span.Seconds() / period.Seconds())
		for _, a := range []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA} {
			if first.admitted[a] != rate || second.admitted[a] > refill+1 {
				t.Errorf("%s admitted %d then %d over %s, want %d then at most the refill of %d", a, first.admitted[a], second.admitted[a], span, rate, refill+1)
			}
		}
		return
	}
	t.Fatalf("in 3 attempts the bursts never straddled a window boundary")
}

// placed reports whether every d is within (lo, hi].
func placed(ds []time.Duration, lo, hi time.Duration) bool {
	for _, d := range ds {
		if d <= lo || d > hi {
			return false
		}
	}
	return len(ds) > 0
}

// boundaryAttempt sends a burst of rate requests per algorithm about 400
// ms before an aligned window boundary and another about 100 ms after it,
// and returns both and the time from the first request to the last reply.
func boundaryAttempt(t *testing.T, store *redisstore.Store, prefix string, rate int64, period time.Duration) (first, second burstResult, span time.Duration) {
	t.Helper()
	ctx := context.Background()
	// Aligned windows end on multiples of the period; a probe tells how
	// far away the next boundary is on Redis's clock.
	probe := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1 << 20, Period: period, AlignWindows: true}
	d, err := store.Decide(ctx, prefix+"probe", probe, 1)
	if err != nil {
		t.Fatal(err)
	}
	untilBoundary := d.ResetAfter
	if untilBoundary < 600*time.Millisecond {
		untilBoundary += period // too close: use the next boundary
	}
	// Not synchronisation: the bursts must straddle an instant of Redis's clock.
	time.Sleep(untilBoundary - 400*time.Millisecond)

	burst := func() burstResult {
		res := burstResult{admitted: map[limiter.Algorithm]int{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, a := range boundaryAlgorithms {
			wg.Add(1)
			go func(a limiter.Algorithm) {
				defer wg.Done()
				lim := limiter.Limit{Algorithm: a, Rate: rate, Period: period, AlignWindows: true}
				for i := int64(0); i < rate; i++ {
					d, err := store.Decide(ctx, prefix+string(a), lim, 1)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if d.Allowed {
						res.admitted[a]++
					}
					if a == limiter.FixedWindow {
						res.resets = append(res.resets, d.ResetAfter)
					}
					mu.Unlock()
				}
			}(a)
		}
		wg.Wait()
		return res
	}
	start := time.Now()
	first = burst()
	// Not synchronisation: the second burst comes 500 ms after the first.
	time.Sleep(500*time.Millisecond - time.Since(start))
	second = burst()
	return first, second, time.Since(start)
}
