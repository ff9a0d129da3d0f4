package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/heartbeat"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

func newBeat(t *testing.T, url, id string, ttl time.Duration) *heartbeat.Heartbeat {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	h, err := heartbeat.New(heartbeat.Config{Client: rdb, ID: id, Interval: ttl / 4, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func beat(t *testing.T, h *heartbeat.Heartbeat) int {
	t.Helper()
	n, err := h.Beat(context.Background())
	if err != nil {
		t.Fatalf("beat %s: %v", h.ID(), err)
	}
	return n
}

func TestInstancesCountEachOtherAndOneThatLeavesOrFallsSilentStopsCounting(t *testing.T) {
	rds := redistest.Single(t)
	const ttl = 400 * time.Millisecond
	a, b, c := newBeat(t, rds.URL(), "a", ttl), newBeat(t, rds.URL(), "b", ttl), newBeat(t, rds.URL(), "c", ttl)
	if a.InstanceCount() != 0 {
		t.Fatalf("count before any heartbeat: %d, want 0 (unknown)", a.InstanceCount())
	}
	beat(t, a)
	bLast := time.Now() // before the write: Redis's TTL starts between this and beat's return
	beat(t, b)
	if n := beat(t, c); n != 3 || c.InstanceCount() != 3 {
		t.Fatalf("three instances: count %d (InstanceCount %d), want 3", n, c.InstanceCount())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := beat(t, a); n != 2 {
		t.Fatalf("after c left: count %d, want 2 at once", n)
	}
	// b falls silent (a crash): a counts it until the TTL has passed.
	eventually.True(t, 3*ttl, "a counts b no more", func() bool { return beat(t, a) == 1 })
	if silent := time.Since(bLast); silent < ttl {
		t.Fatalf("b was dropped after %s of silence, before its TTL of %s", silent, ttl)
	}
}

func TestTheCountOutlivesARedisOutageAndARedisThatReturnsEmpty(t *testing.T) {
	rds := redistest.Single(t)
	const ttl = time.Second
	a, b := newBeat(t, rds.URL(), "a", ttl), newBeat(t, rds.URL(), "b", ttl)
	beat(t, a)
	beat(t, b)
	beat(t, a)
	rds.Stop()
	if _, err := a.Beat(context.Background()); err == nil {
		t.Fatal("a heartbeat with Redis down succeeded")
	}
	if a.InstanceCount() != 2 {
		t.Fatalf("Redis down: count %d, want the last known 2", a.InstanceCount())
	}
	rds.Start() // empty: only a beats first
	back := time.Now()
	if n := beat(t, a); n != 2 {
		t.Fatalf("first heartbeat on a Redis that came back empty: count %d, want 2 (held for one TTL)", n)
	}
	eventually.True(t, 3*ttl, "a counts b no more", func() bool { return beat(t, a) == 1 })
	if held := time.Since(back); held < ttl {
		t.Fatalf("the last known count was held %s after Redis came back, want one TTL (%s)", held, ttl)
	}
}

func TestStartBeatsInTheBackgroundUntilClose(t *testing.T) {
	rds := redistest.Single(t)
	h := newBeat(t, rds.URL(), "bg", 400*time.Millisecond)
	h.Start()
	eventually.True(t, 5*time.Second, "the background heartbeat counts this instance", func() bool { return h.InstanceCount() == 1 })
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := rds.Do("ZCARD", "rl:instances"); err != nil || n != int64(0) {
		t.Fatalf("after Close the set holds %v (%v), want 0: the instance left", n, err)
	}
}

func TestNewRefusesATTLNotLongerThanTheInterval(t *testing.T) {
	_, err := heartbeat.New(heartbeat.Config{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Interval: time.Second, TTL: time.Second})
	if err == nil {
		t.Fatal("a TTL equal to the interval was accepted")
	}
}

// TestABeatAfterTheScriptCacheIsFlushedSendsTheScriptWhole beats once,
// flushes Redis's script cache (a restart, a fresh replica), and beats
// again: the runner answers NOSCRIPT by sending the script whole.
func TestABeatAfterTheScriptCacheIsFlushedSendsTheScriptWhole(t *testing.T) {
	srv := redistest.Single(t)
	h := newBeat(t, srv.URL(), "a", 2*time.Second)
	if n := beat(t, h); n != 1 {
		t.Fatalf("first beat counts %d, want 1", n)
	}
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if n := beat(t, h); n != 1 {
		t.Fatalf("beat after SCRIPT FLUSH counts %d, want 1", n)
	}
}
