package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

const (
	ms = time.Millisecond
	s  = time.Second
)

// step is one request at epoch+at and the decision it must get.
type step struct {
	at   time.Duration
	cost int64
	want limiter.Decision // Limit is filled in from the limit
}

func ok(at time.Duration, cost, remaining int64, reset time.Duration) step {
	return step{at: at, cost: cost, want: limiter.Decision{Allowed: true, Remaining: remaining, ResetAfter: reset, Admitted: cost}}
}

func delayed(at time.Duration, cost, remaining int64, reset, delay time.Duration) step {
	return step{at: at, cost: cost, want: limiter.Decision{Allowed: true, Remaining: remaining, ResetAfter: reset, Delay: delay, Admitted: cost}}
}

func no(at time.Duration, cost, remaining int64, reset, retry time.Duration) step {
	return step{at: at, cost: cost, want: limiter.Decision{Remaining: remaining, ResetAfter: reset, RetryAfter: retry}}
}

func TestMemorySemantics(t *testing.T) {
	fixed := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Minute, AlignWindows: true}
	sliding := limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: 10, Period: 10 * s, AlignWindows: true}
	log := limiter.Limit{Algorithm: limiter.SlidingLog, Rate: 3, Period: 10 * s}
	token := limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Period: s, Burst: 5}
	leaky := limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 1, Period: s, Burst: 3}
	leakyNoDelay := leaky
	leakyNoDelay.NoDelay = true
	gcra := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1, Period: s, Burst: 3}
	thirds := func(a limiter.Algorithm, burst int64) limiter.Limit {
		return limiter.Limit{Algorithm: a, Rate: 3, Period: s, Burst: burst}
	}

	cases := []struct {
		name  string
		limit limiter.Limit
		steps []step
	}{
		{"fixed window admits up to the rate and rejects the rest until the window ends", fixed, []step{
			ok(0, 1, 9, 60*s),
			ok(10*s, 8, 1, 50*s),
			no(20*s, 2, 1, 40*s, 40*s),
			ok(20*s, 1, 0, 40*s),
			no(60*s-time.Microsecond, 1, 0, time.Microsecond, time.Microsecond),
		}},
		{"fixed window starts a new count at the next window", fixed, []step{
			ok(0, 10, 0, 60*s),
			no(30*s, 1, 0, 30*s, 30*s),
			ok(60*s, 1, 9, 60*s),
			ok(185*s, 10, 0, 55*s),
		}},
		{"sliding window weighs the previous window by the share still inside", sliding, []step{
			ok(0, 5, 5, 20*s),
			ok(5*s, 5, 0, 15*s),
			no(6*s, 1, 0, 14*s, 5*s), // 1 s into the next window the previous 10 weigh 9
			no(11*s-time.Microsecond, 1, 0, 9*s+time.Microsecond, time.Microsecond),
			ok(11*s, 1, 0, 19*s),
			ok(15*s, 2, 2, 15*s),      // weighted 5, current 3
			no(15*s, 3, 2, 15*s, 1*s), // at 16 s the previous weighs 4: 3+3+4 = 10
			ok(35*s, 1, 9, 15*s),      // two windows later nothing weighs
			ok(41*s, 9, 0, 19*s),      // previous 1 weighs 0.9: 9+0.9 ≤ 10, floor(0.1) = 0 remaining
			no(41*s, 1, 0, 19*s, 9*s), // 9+1+0.9 > 10; in the next window the previous 9 weigh 9 at its start
			ok(50*s, 1, 0, 20*s),      // 1 + 9 = 10
		}},
		{"sliding log admits exactly the rate in any period and retries when the oldest expires", log, []step{
			ok(0, 1, 2, 10*s),
			ok(1*s, 1, 1, 10*s),
			no(2*s, 2, 1, 9*s, 8*s), // needs the oldest (t=0) to expire at 10 s
			ok(2*s, 1, 0, 10*s),
			no(5*s, 1, 0, 7*s, 5*s),
			ok(10*s, 1, 0, 10*s),      // t=0 expired at exactly now−P
			no(10*s, 2, 0, 10*s, 2*s), // needs t=1 and t=2 to expire
			no(12*s-time.Microsecond, 2, 1, 8*s+time.Microsecond, time.Microsecond),
			ok(12*s, 2, 0, 10*s),
		}},
		{"token bucket starts full, refills at the rate and caps at the burst", token, []step{
			ok(0, 1, 4, 1*s),
			ok(0, 4, 0, 5*s),
			no(0, 1, 0, 5*s, 1*s),
			no(500*ms, 1, 0, 4500*ms, 500*ms),
			ok(2500*ms, 2, 0, 4500*ms),
			no(2500*ms, 1, 0, 4500*ms, 500*ms),
			ok(100*s, 5, 0, 5*s), // long idle: full, not more
			no(100*s, 3, 0, 5*s, 3*s),
		}},
		{"token bucket carries fractional refill exactly", thirds(limiter.TokenBucket, 2), []step{
			ok(0, 2, 0, 666667*time.Microsecond),
			no(0, 1, 0, 666667*time.Microsecond, 333334*time.Microsecond),
			no(333333*time.Microsecond, 1, 0, 333334*time.Microsecond, time.Microsecond), // 999999 of 1000000
			ok(333334*time.Microsecond, 1, 0, 666666*time.Microsecond),                   // 2 units left over
			ok(666667*time.Microsecond, 1, 0, 666667*time.Microsecond),                   // 2 + 999999 ≥ 1000000
		}},
		{"leaky bucket admits exactly the burst at once with growing delays", leaky, []step{
			delayed(0, 1, 2, 1*s, 0),
			delayed(0, 1, 1, 2*s, 1*s),
			delayed(0, 1, 0, 3*s, 2*s),
			no(0, 1, 0, 3*s, 1*s),
			no(500*ms, 1, 0, 2500*ms, 500*ms),
			delayed(1*s, 1, 0, 3*s, 2*s),
			delayed(10*s, 2, 1, 2*s, 0), // drained empty: cost 2 fills two places
		}},
		{"leaky bucket with nodelay admits at once but still counts the bucket", leakyNoDelay, []step{
			ok(0, 1, 2, 1*s),
			ok(0, 1, 1, 2*s),
			ok(0, 1, 0, 3*s),
			no(0, 1, 0, 3*s, 1*s),
			ok(1*s, 1, 0, 3*s),
		}},
		{"leaky bucket with cost 2 queues behind the cost already in the bucket",
			limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 2, Period: s, Burst: 4}, []step{
				delayed(0, 2, 2, 1*s, 0),
				delayed(0, 2, 0, 2*s, 1*s),
				no(0, 1, 0, 2*s, 500*ms),
			}},
		{"gcra admits the burst at once and then one per emission interval", gcra, []step{
			ok(0, 1, 2, 1*s),
			ok(0, 2, 0, 3*s),
			no(0, 1, 0, 3*s, 1*s),
			ok(1500*ms, 1, 0, 2500*ms),
			no(1500*ms, 1, 0, 2500*ms, 500*ms),
			ok(2*s, 1, 0, 3*s),
			ok(10*s, 3, 0, 3*s),
		}},
		{"gcra rounds a fractional emission interval up to the microsecond", thirds(limiter.GCRA, 1), []step{
			ok(0, 1, 0, 333334*time.Microsecond),
			no(0, 1, 0, 333334*time.Microsecond, 333334*time.Microsecond),
			no(333333*time.Microsecond, 1, 0, time.Microsecond, time.Microsecond),
			ok(333334*time.Microsecond, 1, 0, 333334*time.Microsecond),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			l, err := limiter.New(limiter.Config{Limit: tc.limit, Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				clock.Set(st.at)
				got, err := l.AllowN(context.Background(), "client-1", st.cost)
				if err != nil {
					t.Fatalf("step %d (at %s, cost %d): %v", i, st.at, st.cost, err)
				}
				want := st.want
				want.Limit = tc.limit.Quota()
				if got != want {
					t.Fatalf("step %d (at %s, cost %d):\n got %+v\nwant %+v", i, st.at, st.cost, got, want)
				}
			}
		})
	}
}

func TestCostValidation(t *testing.T) {
	for _, a := range limiter.AllAlgorithms() {
		lim := limiter.Limit{Algorithm: a, Rate: 5, Period: s, Burst: 5}
		store := limiter.NewMemoryStore(limiter.MemoryConfig{})
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			cost    int64
			wantErr error
		}{
			{"a cost above the quota is rejected with ErrCostExceedsLimit", 6, limiter.ErrCostExceedsLimit},
			{"a cost of zero is rejected with ErrInvalidCost", 0, limiter.ErrInvalidCost},
			{"a negative cost is rejected with ErrInvalidCost", -1, limiter.ErrInvalidCost},
		}
		for _, tc := range tests {
			t.Run(string(a)+": "+tc.name, func(t *testing.T) {
				d, err := l.AllowN(context.Background(), "k", tc.cost)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if d.Allowed {
					t.Fatalf("decision allowed: %+v", d)
				}
				if store.Len() != 0 {
					t.Fatalf("store was called: %d keys", store.Len())
				}
			})
		}
		t.Run(string(a)+": a cost equal to the quota is admitted from a fresh key", func(t *testing.T) {
			d, err := l.AllowN(context.Background(), "k", 5)
			if err != nil || !d.Allowed || d.Remaining != 0 {
				t.Fatalf("got %+v, %v; want allowed with 0 remaining", d, err)
			}
		})
	}
}
