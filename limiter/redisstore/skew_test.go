package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// Two application servers whose clocks are 30 s apart share one limit
// exactly, because only Redis's clock counts: each has its own client and
// its own injected clock (for its local fallback store and its breaker).
func TestSkewedClocksShareOneExactLimit(t *testing.T) {
	t.Parallel()
	srv := redistest.Single(t)
	base := time.Now()
	clockA := func() time.Time { return base }
	clockB := func() time.Time { return base.Add(30 * time.Second) }
	newLimiter := func(lim limiter.Limit, now func() time.Time) *limiter.Limiter {
		l, err := limiter.New(limiter.Config{
			Limit:      lim,
			Store:      newStore(t, redisstore.ClientConfig{URL: srv.URL()}),
			FailPolicy: limiter.FailLocal,
			Local:      limiter.NewMemoryStore(limiter.MemoryConfig{Now: now}),
			Breaker:    limiter.BreakerConfig{Threshold: 3, Now: now},
		})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx := context.Background()
	for _, a := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingLog, limiter.TokenBucket, limiter.LeakyBucket, limiter.GCRA} {
		t.Run(string(a), func(t *testing.T) {
			lim := limiter.Limit{Algorithm: a, Rate: 10, Period: time.Minute, NoDelay: true}
			servers := []*limiter.Limiter{newLimiter(lim, clockA), newLimiter(lim, clockB)}
			admitted := 0
			for i := 0; i < 30; i++ {
				d, err := servers[i%2].Allow(ctx, "skew:"+string(a))
				if err != nil || d.Failure != limiter.FailureNone {
					t.Fatalf("request %d: %+v, %v", i, d, err)
				}
				if d.Allowed {
					admitted++
					if d.Remaining != 10-int64(admitted) {
						t.Fatalf("request %d on server %d: Remaining = %d, want %d (one count shared by both)", i, i%2, d.Remaining, 10-admitted)
					}
				}
			}
			if admitted != 10 {
				t.Fatalf("two servers 30 s apart admitted %d, want exactly the shared limit of 10", admitted)
			}
		})
	}
}
