package limiter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// admitted sends the requests (times since epoch, cost 1 each, in order)
// to a fresh memory store and returns the times of those admitted.
func admitted(t *testing.T, lim limiter.Limit, key string, times []time.Duration) []time.Duration {
	t.Helper()
	clock := newFakeClock()
	l, err := limiter.New(limiter.Config{Limit: lim, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})})
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for _, at := range times {
		clock.Set(at)
		d, err := l.Allow(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			out = append(out, at)
		}
	}
	return out
}

// busiestSpan returns the largest number of admissions in any half-open
// span [t, t+span), sweeping t over every admission.
func busiestSpan(times []time.Duration, span time.Duration) int {
	most, j := 0, 0
	for i := range times {
		for j < len(times) && times[j] < times[i]+span {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// burst returns n request times at at.
func burst(at time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = at
	}
	return out
}

// boundaryAttack is the attack on a fixed window: 60 requests just before
// second 60 and 60 just after.
func boundaryAttack() []time.Duration {
	return append(burst(59*time.Second, 60), burst(61*time.Second, 60)...)
}

// flood is a client that also sends a request every 100 ms for 5 minutes,
// with the boundary attack inside it.
func flood() []time.Duration {
	var out []time.Duration
	for at := time.Duration(0); at < 5*time.Minute; at += 100 * time.Millisecond {
		if at == 59*time.Second || at == 61*time.Second {
			out = append(out, burst(at, 60)...)
			continue
		}
		out = append(out, at)
	}
	return out
}

func TestBoundaryBurst(t *testing.T) {
	const minute = time.Minute
	t.Run("a fixed window admits 120 requests within 2 seconds across its boundary", func(t *testing.T) {
		lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 60, Period: minute, AlignWindows: true}
		got := admitted(t, lim, "k", boundaryAttack())
		if len(got) != 120 {
			t.Fatalf("admitted %d, want all 120", len(got))
		}
	})
	t.Run("a staggered fixed window has the same weakness at the key's own boundary", func(t *testing.T) {
		lim := limiter.PerMinute(limiter.FixedWindow, 60)
		// The key's windows start at its offset: attack around its boundary.
		off := limiter.WindowOffset("k", minute)
		times := append(burst(off+59*time.Second, 60), burst(off+61*time.Second, 60)...)
		if got := admitted(t, lim, "k", times); len(got) != 120 {
			t.Fatalf("admitted %d, want all 120", len(got))
		}
	})
	t.Run("a sliding log admits at most 60 in any 60 s span", func(t *testing.T) {
		lim := limiter.PerMinute(limiter.SlidingLog, 60)
		if got := admitted(t, lim, "k", boundaryAttack()); len(got) != 60 {
			t.Fatalf("boundary attack: admitted %d, want 60", len(got))
		}
		got := admitted(t, lim, "k", flood())
		if most := busiestSpan(got, minute); most != 60 {
			t.Fatalf("flood: busiest 60 s span admitted %d, want exactly 60", most)
		}
	})
	// A bucket of size B refilled at R per P admits at most B + R·W/P in any
	// span W. "60 per 60 s" with burst 60 therefore admits the 60 of the
	// burst plus what refills during the span; the 2 s boundary attack gets
	// 62 through, not 120. Configured as burst 30 + 30 per minute, a bucket
	// never admits more than 60 in any minute.
	for _, a := range []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA} {
		t.Run(fmt.Sprintf("%s admits the burst plus the refill across a boundary, not twice the limit", a), func(t *testing.T) {
			lim := limiter.Limit{Algorithm: a, Rate: 60, Period: minute, Burst: 60}
			got := admitted(t, lim, "k", boundaryAttack())
			if len(got) != 62 {
				t.Fatalf("boundary attack: admitted %d, want 62 (60 + 2 s of refill at 1/s)", len(got))
			}
			got = admitted(t, lim, "k", flood())
			for _, span := range []time.Duration{time.Second, 10 * time.Second, minute, 3 * minute} {
				bound := 60 + int(span/time.Second)
				if most := busiestSpan(got, span); most > bound {
					t.Fatalf("flood: busiest %s span admitted %d, more than burst + refill = %d", span, most, bound)
				}
			}
		})
		t.Run(fmt.Sprintf("%s with burst 30 and 30 per minute admits at most 60 in any 60 s span", a), func(t *testing.T) {
			lim := limiter.Limit{Algorithm: a, Rate: 30, Period: minute, Burst: 30}
			got := admitted(t, lim, "k", flood())
			if most := busiestSpan(got, minute); most > 60 || most < 59 {
				t.Fatalf("flood: busiest 60 s span admitted %d, want at most 60 (and close to it)", most)
			}
		})
	}
	t.Run("a sliding window counter admits at most twice the rate in any span of one period", func(t *testing.T) {
		lim := limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: 60, Period: minute, AlignWindows: true}
		// Worst case: the previous window's traffic all at its very end.
		// then a request every 100 ms for two more windows.
		times := burst(minute-time.Microsecond, 60)
		for at := minute; at < 3*minute; at += 100 * time.Millisecond {
			times = append(times, at)
		}
		got := admitted(t, lim, "k", times)
		most := busiestSpan(got, minute)
		t.Logf("busiest 60 s span admitted %d", most)
		if most > 120 {
			t.Fatalf("busiest 60 s span admitted %d, more than 2×60", most)
		}
		if most <= 60 {
			t.Fatalf("busiest 60 s span admitted %d: the documented overshoot did not show", most)
		}
		got = admitted(t, lim, "k", burst(10*time.Second, 100))
		if len(got) != 60 {
			t.Fatalf("within one window: admitted %d, want exactly 60", len(got))
		}
	})
}

func TestFixedWindowStaggering(t *testing.T) {
	const n = 1000
	firstReset := func(lim limiter.Limit) map[time.Duration]int {
		clock := newFakeClock()
		clock.Set(17 * time.Second)
		store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
		resets := map[time.Duration]int{}
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("client-%d", i)
			d, err := store.Decide(context.Background(), key, lim, 1)
			if err != nil {
				t.Fatal(err)
			}
			// The reset is where the key's window ends, per WindowOffset.
			off := limiter.WindowOffset(key, lim.Period)
			if !lim.AlignWindows {
				into := ((17*time.Second-off)%lim.Period + lim.Period) % lim.Period
				want := lim.Period - into
				if lim.Algorithm == limiter.SlidingWindow {
					want += lim.Period // until the current count no longer weighs
				}
				if d.ResetAfter != want {
					t.Fatalf("%s: ResetAfter = %s, want %s from its offset %s", key, d.ResetAfter, want, off)
				}
			}
			resets[d.ResetAfter]++
		}
		return resets
	}
	for _, a := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow} {
		t.Run(string(a)+" windows of different keys start at different instants by default", func(t *testing.T) {
			lim := limiter.PerMinute(a, 10)
			resets := firstReset(lim)
			if len(resets) < n*9/10 {
				t.Fatalf("%d keys reset at only %d distinct instants", n, len(resets))
			}
		})
		t.Run(string(a)+" windows with AlignWindows all start on multiples of the period since the epoch", func(t *testing.T) {
			lim := limiter.PerMinute(a, 10)
			lim.AlignWindows = true
			resets := firstReset(lim)
			want := 43 * time.Second // from second 17 of an aligned minute
			if a == limiter.SlidingWindow {
				want += time.Minute // until the current count no longer weighs
			}
			if len(resets) != 1 || resets[want] != n {
				t.Fatalf("resets %v, want all %d at %s", resets, n, want)
			}
		})
	}
}
