package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func TestSingleServerConforms(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	limitertest.Run(t, func(*testing.T) limiter.Store { return store })
}

// The conformance suite on a Redis Cluster runs in TestCluster.

func TestSentinelReachesThePrimary(t *testing.T) {
	t.Parallel()
	sn := redistest.Sentinel(t)
	store := newStore(t, redisstore.ClientConfig{SentinelAddrs: sn.SentinelAddrs, MasterName: sn.MasterName})
	lim := limiter.Limit{Algorithm: limiter.SlidingLog, Rate: 2, Period: time.Minute}
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		d, err := store.Decide(ctx, "through-sentinel", lim, 1)
		if err != nil {
			t.Fatalf("decision %d through Sentinel: %v", i+1, err)
		}
		if d.Allowed != want {
			t.Fatalf("decision %d through Sentinel: Allowed = %v, want %v", i+1, d.Allowed, want)
		}
	}
	if s := store.Shard("through-sentinel"); s != "" {
		t.Fatalf("Shard through Sentinel = %q, want \"\": one server decides every key", s)
	}
	// The state is on the primary the Sentinel named.
	for _, k := range store.Keys("through-sentinel", limiter.SlidingLog) {
		n, err := sn.Primary.Do("EXISTS", k)
		if err != nil || n != int64(1) {
			t.Fatalf("EXISTS %s on the primary %s = %v, %v; want 1", k, sn.Primary.Addr(), n, err)
		}
	}
	if n, err := sn.Primary.Do("ZCARD", store.Keys("through-sentinel", limiter.SlidingLog)[0]); n != int64(2) {
		t.Fatalf("log on the primary holds %v entries (%v), want 2", n, err)
	}
}

func TestSentinelHoldsReservationsOnThePrimary(t *testing.T) {
	t.Parallel()
	sn := redistest.Sentinel(t)
	store := newStore(t, redisstore.ClientConfig{SentinelAddrs: sn.SentinelAddrs, MasterName: sn.MasterName})
	l, err := limiter.New(limiter.Config{Limit: limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 10, Period: time.Hour}, Store: store, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, d, err := l.Reserve(ctx, "through-sentinel", 8)
	if err != nil || !d.Allowed || r.ID == "" {
		t.Fatalf("Reserve through Sentinel = %+v, %+v, %v", r, d, err)
	}
	for _, k := range store.ReservationKeys("through-sentinel", limiter.TokenBucket) {
		if n, err := sn.Primary.Do("EXISTS", k); err != nil || n != int64(1) {
			t.Fatalf("EXISTS %s on the primary = %v, %v; want 1", k, n, err)
		}
	}
	if st, err := l.Commit(ctx, r, 3); err != nil || st.Refunded != 5 {
		t.Fatalf("Commit through Sentinel = %+v, %v; want 5 refunded", st, err)
	}
	if d, err := l.PeekN(ctx, "through-sentinel", 7); err != nil || !d.Allowed || d.Remaining != 7 {
		t.Fatalf("PeekN(7) after committing 3 of 10 = %+v, %v", d, err)
	}
}

func TestSentinelDecidesSets(t *testing.T) {
	t.Parallel()
	sn := redistest.Sentinel(t)
	store := newStore(t, redisstore.ClientConfig{SentinelAddrs: sn.SentinelAddrs, MasterName: sn.MasterName})
	limitertest.RunSets(t, store)
}
