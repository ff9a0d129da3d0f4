package main

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// The mapping of docs/coming-from-peers.md, checked against the peers
// themselves on one redis-server: the same sequence of AllowN, peek,
// AllowAtMost and Reset gets the same answers from redis_rate's GCRA and
// rl-exporter's gcra, and from ulule/limiter's fixed window and
// rl-exporter's fixed_window, except where the page says they differ.
func TestTheCallsOfThePeersMapOntoRLExporters(t *testing.T) {
	ctx := context.Background()
	srv, err := startRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	client, err := newPeerClient(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	store, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	newLimiter := func(lim limiter.Limit) *limiter.Limiter {
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: limiter.FailClosed, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	t.Run("redis_rate PerMinute(10) is gcra 10 per minute", func(t *testing.T) {
		rr := redis_rate.NewLimiter(client)
		rl := newLimiter(limiter.PerMinute(limiter.GCRA, 10))
		const key = "peers:rr"
		for i, n := range []int64{4, 8, 8} { // AllowAtMost: 4, then the 6 left, then none
			res, err := rr.AllowAtMost(ctx, key, redis_rate.PerMinute(10), int(n))
			if err != nil {
				t.Fatal(err)
			}
			d, err := rl.AllowAtMost(ctx, key, n)
			if err != nil {
				t.Fatal(err)
			}
			if int64(res.Allowed) != d.Admitted || int64(res.Remaining) != d.Remaining {
				t.Fatalf("AllowAtMost %d (n %d): redis_rate admitted %d, %d remaining; rl-exporter %d, %d", i+1, n, res.Allowed, res.Remaining, d.Admitted, d.Remaining)
			}
			// Refused, both say when one unit will fit: 6 s per unit.
			if res.Allowed == 0 && (res.RetryAfter < 5*time.Second || d.RetryAfter < 5*time.Second || (res.RetryAfter-d.RetryAfter).Abs() > time.Second) {
				t.Fatalf("refused AllowAtMost: redis_rate retry %s, rl-exporter %s; want both about 6s", res.RetryAfter, d.RetryAfter)
			}
		}
		// redis_rate's AllowN with n = 0 is Peek.
		res, err := rr.AllowN(ctx, key, redis_rate.PerMinute(10), 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := rl.Peek(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed != 0 || p.Admitted != 0 || int64(res.Remaining) != p.Remaining || p.Allowed {
			t.Fatalf("peek at a spent key: redis_rate %+v, rl-exporter %+v; want nothing admitted, 0 remaining", res, p)
		}
		// Reset gives both the whole budget back.
		if err := rr.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := rl.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		res, _ = rr.AllowN(ctx, key, redis_rate.PerMinute(10), 10)
		d, _ := rl.AllowN(ctx, key, 10)
		if res.Allowed != 10 || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("the full quota after Reset: redis_rate %+v, rl-exporter %+v", res, d)
		}
		// Where they differ: RetryAfter when allowed, Remaining when refused, Burst 0.
		res, _ = rr.Allow(ctx, "peers:rr:fresh", redis_rate.PerMinute(10))
		d, _ = rl.Allow(ctx, "peers:rr:fresh")
		if res.RetryAfter != -1 || d.RetryAfter != 0 {
			t.Fatalf("RetryAfter when allowed: redis_rate %s, rl-exporter %s; the page says -1 and 0", res.RetryAfter, d.RetryAfter)
		}
		res, _ = rr.AllowN(ctx, "peers:rr:fresh", redis_rate.PerMinute(10), 10)
		d, _ = rl.AllowN(ctx, "peers:rr:fresh", 10)
		if res.Allowed != 0 || res.Remaining != 0 || d.Allowed || d.Remaining != 9 {
			t.Fatalf("a cost of 10 with 9 left: redis_rate %+v, rl-exporter %+v; the page says 0 and 9 remaining", res, d)
		}
		res, _ = rr.Allow(ctx, "peers:rr:burst0", redis_rate.Limit{Rate: 10, Period: time.Minute})
		d, _ = newLimiter(limiter.Limit{Algorithm: limiter.GCRA, Rate: 10, Period: time.Minute}).Allow(ctx, "peers:rr:burst0")
		if res.Allowed != 0 || !d.Allowed || d.Limit != 10 {
			t.Fatalf("Burst 0: redis_rate %+v, rl-exporter %+v; the page says redis_rate refuses and rl-exporter's quota is Rate", res, d)
		}
	})

	t.Run("ulule 10-H on its Redis store is fixed_window 10 per hour", func(t *testing.T) {
		us, err := ululeredis.NewStoreWithOptions(client, ulule.StoreOptions{Prefix: "peers-ulule"})
		if err != nil {
			t.Fatal(err)
		}
		ul := ulule.New(us, ulule.Rate{Period: time.Hour, Limit: 10})
		rl := newLimiter(limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Hour})
		const key = "peers:ulule"
		c, err := ul.Increment(ctx, key, 7)
		if err != nil {
			t.Fatal(err)
		}
		d, err := rl.AllowN(ctx, key, 7)
		if err != nil {
			t.Fatal(err)
		}
		if c.Reached || !d.Allowed || c.Remaining != d.Remaining {
			t.Fatalf("Increment(7): ulule %+v, rl-exporter %+v", c, d)
		}
		for i := 0; i < 3; i++ { // Peek takes nothing in both
			c, _ = ul.Peek(ctx, key)
			p, _ := rl.Peek(ctx, key)
			if c.Remaining != 3 || p.Remaining != 3 || c.Reached || !p.Allowed {
				t.Fatalf("peek %d: ulule %+v, rl-exporter %+v; want 3 remaining, not reached", i+1, c, p)
			}
		}
		// A refused request: ulule counts it, rl-exporter does not.
		c, _ = ul.Increment(ctx, key, 5)
		d, _ = rl.AllowN(ctx, key, 5)
		if !c.Reached || d.Allowed {
			t.Fatalf("Increment(5) with 3 left: ulule %+v, rl-exporter %+v; want both refused", c, d)
		}
		c, _ = ul.Peek(ctx, key)
		p, _ := rl.Peek(ctx, key)
		if c.Remaining != 0 || p.Remaining != 3 {
			t.Fatalf("after a refused request: ulule %d remaining, rl-exporter %d; the page says ulule counted it (0) and rl-exporter did not (3)", c.Remaining, p.Remaining)
		}
		if _, err := ul.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := rl.Reset(ctx, key); err != nil {
			t.Fatal(err)
		}
		c, _ = ul.Peek(ctx, key)
		p, _ = rl.Peek(ctx, key)
		if c.Remaining != 10 || p.Remaining != 10 {
			t.Fatalf("after Reset: ulule %+v, rl-exporter %+v; want the full 10", c, p)
		}
	})
}
