package limiter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

const century = 100 * 365 * 24 * time.Hour

func TestLimitsWhoseResetTimesWouldOverflowAreInvalid(t *testing.T) {
	cases := []struct {
		name  string
		limit limiter.Limit
		field string
	}{
		{"a sliding window of 2,000,000 hours", limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: 1, Period: 2_000_000 * time.Hour}, "period:"},
		{"a fixed window just over a century", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1, Period: century + time.Hour}, "period:"},
		{"a token bucket that takes a million hours to refill", limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Period: time.Hour, Burst: 1_000_000}, "burst:"},
		{"a GCRA bucket of two centuries", limiter.Limit{Algorithm: limiter.GCRA, Rate: 1, Period: century / 2, Burst: 4}, "burst:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.limit.Validate()
			if err == nil {
				t.Fatalf("%+v accepted", c.limit)
			}
			if !strings.HasPrefix(err.Error(), c.field) || !strings.Contains(err.Error(), "overflow") {
				t.Errorf("error %q, want it to start with %q and say the times would overflow", err, c.field)
			}
		})
	}
}

func TestTheLongestValidWindowsGiveResetTimesThatNeverGoNegative(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.LeakyBucket, limiter.GCRA} {
		for _, l := range []limiter.Limit{
			{Algorithm: alg, Rate: 1, Period: century},
			{Algorithm: alg, Rate: 2, Period: century / 2, Burst: 2},
		} {
			t.Run(fmt.Sprintf("%s %d per %s", alg, l.Rate, l.Period), func(t *testing.T) {
				if err := l.Validate(); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				store := limiter.NewMemoryStore(limiter.MemoryConfig{})
				for i := range 20 {
					key := fmt.Sprint("k", i%5) // per-key window offsets differ
					d, err := store.Decide(ctx, key, l, 1)
					if err != nil {
						t.Fatal(err)
					}
					if d.ResetAfter < 0 || d.RetryAfter < 0 || d.Delay < 0 {
						t.Fatalf("decision %d: reset %s, retry %s, delay %s: a negative time", i, d.ResetAfter, d.RetryAfter, d.Delay)
					}
					// Unix nanoseconds end in 2262.
					if reset := time.Now().Add(d.ResetAfter); reset.Year() >= 2262 || reset.UnixNano() < 0 {
						t.Fatalf("decision %d: reset at %s, beyond what Unix nanoseconds hold", i, reset)
					}
				}
			})
		}
	}
}
