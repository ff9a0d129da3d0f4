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
