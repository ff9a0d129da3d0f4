package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

func TestSingleServerPenaltiesConform(t *testing.T) {
	srv := redistest.Single(t)
	limitertest.RunPenalties(t, newStore(t, redisstore.ClientConfig{URL: srv.URL()}))
}

func TestClusterPenaltiesConform(t *testing.T) {
	cl := redistest.Cluster(t, 3)
	limitertest.RunPenalties(t, newStore(t, redisstore.ClientConfig{ClusterAddrs: cl.Addrs}))
}

// The strikes expire within after the first, and the box exactly For
// after the strike that trips it, both on Redis's clock (PX).
func TestAPenaltysKeysExpireOnRedisOwnClock(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	p := limiter.Penalty{After: 3, Within: 90 * time.Second, For: 10 * time.Minute}
	if _, err := store.Strike(ctx, "user:{7}", p, 0); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "*penalty*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys after one strike: %v %v, want the strike counter alone", keys, err)
	}
	if ttl := rdb.PTTL(ctx, keys[0]).Val(); ttl <= 89*time.Second || ttl > p.Within {
		t.Errorf("strike counter %s expires in %s, want just under %s", keys[0], ttl, p.Within)
	}
	store.Strike(ctx, "user:{7}", p, 0)
	if d, _ := store.Strike(ctx, "user:{7}", p, 0); d != p.For {
		t.Fatalf("third strike: %s, want %s", d, p.For)
	}
	keys, _ = rdb.Keys(ctx, "*penalty*").Result()
	if len(keys) != 1 {
		t.Fatalf("keys once boxed: %v, want the box alone (the strikes are forgotten)", keys)
	}
	if ttl := rdb.PTTL(ctx, keys[0]).Val(); ttl <= p.For-time.Second || ttl > p.For {
		t.Errorf("box %s expires in %s, want just under %s", keys[0], ttl, p.For)
	}
	if left, _ := store.Penalized(ctx, "user:{7}", 0); left <= p.For-time.Second || left > p.For {
		t.Errorf("Penalized: %s, want the box's PTTL", left)
	}
}

// TestScriptRunsAfterTheScriptCacheIsFlushed runs a Script, flushes
// Redis's script cache and runs it again: EVALSHA's NOSCRIPT is answered
// by EVAL, and the script's SHA1 is what EVALSHA names.
func TestScriptRunsAfterTheScriptCacheIsFlushed(t *testing.T) {
	srv := redistest.Single(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	sc := redisstore.NewScript("return tonumber(ARGV[1]) + 1")
	ctx := context.Background()
	for i := range 2 {
		if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		if n, err := sc.Run(ctx, c, nil, 41).Int64(); err != nil || n != 42 {
			t.Fatalf("run %d: %d, %v; want 42", i, n, err)
		}
		// EVAL cached the script under the SHA1 that EVALSHA names.
		if ok, err := c.ScriptExists(ctx, sc.Hash()).Result(); err != nil || len(ok) != 1 || !ok[0] {
			t.Fatalf("SCRIPT EXISTS %s after run %d: %v, %v", sc.Hash(), i, ok, err)
		}
	}
}
