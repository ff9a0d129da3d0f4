package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

var _ limiter.LeasePeeker = (*redisstore.Store)(nil)

// Peeking at a key's leases on Redis reads Redis's clock and the set alone: a fresh key gets
// no key, a held lease is counted with its expiry, and the set is left as it was.
func TestPeekingAtLeasesOnRedisWritesNothing(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	ls, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: 4, TTL: time.Minute}, Store: store, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := ls.Peek(ctx, "fresh"); err != nil || u.InFlight != 0 || len(u.ExpiresIn) != 0 {
		t.Fatalf("a fresh key: %+v, %v; want nothing held", u, err)
	}
	if n, err := srv.Do("DBSIZE"); err != nil || n != int64(0) {
		t.Fatalf("DBSIZE after peeking at a fresh key = %v, %v; want 0", n, err)
	}
	for range 3 {
		if _, d, err := ls.Acquire(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("Acquire = %+v, %v", d, err)
		}
	}
	u, err := ls.Peek(ctx, "k")
	if err != nil || u.InFlight != 3 || len(u.ExpiresIn) != 3 {
		t.Fatalf("three held: %+v, %v; want 3 in flight, 3 expiries", u, err)
	}
	for i, e := range u.ExpiresIn {
		if e <= 50*time.Second || e > time.Minute || i > 0 && e < u.ExpiresIn[i-1] {
			t.Fatalf("expiries %v: want each within the minute's TTL, earliest first", u.ExpiresIn)
		}
	}
	if n, err := srv.Do("ZCARD", store.LeaseKey("k")); err != nil || n != int64(3) {
		t.Fatalf("ZCARD after the peek = %v, %v; want the 3 leases untouched", n, err)
	}
}
