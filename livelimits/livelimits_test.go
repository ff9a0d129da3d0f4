package livelimits

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestMalformedHashesAreRefusedNamingTheField(t *testing.T) {
	for _, c := range []struct {
		name   string
		fields map[string]string
		want   string
	}{
		{"a zero limit", map[string]string{"max_requests": "0"}, "max_requests"},
		{"a limit that is not a number", map[string]string{"max_requests": "lots"}, "max_requests"},
		{"a negative window", map[string]string{"window": "-1m"}, "window"},
		{"a window that is not a duration", map[string]string{"window": "60"}, "window"},
		{"an unknown algorithm", map[string]string{"algorithm": "magic"}, "algorithm"},
		{"an unknown field", map[string]string{"max_request": "5"}, "max_request"},
		{"a rollout above 100", map[string]string{"max_requests": "5", "rollout_percent": "150"}, "rollout_percent"},
		{"a bad expiry", map[string]string{"max_requests": "5", "expires_at": "tomorrow"}, "expires_at"},
		{"rate and max_requests together", map[string]string{"max_requests": "5", "rate": "5/1s"}, "rate"},
		{"a malformed rate", map[string]string{"rate": "5 per second"}, "rate"},
		{"no limit field at all", map[string]string{"shadow": "true"}, "no limit field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFields(c.fields)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one naming %q", err, c.want)
			}
		})
	}
	ch, err := ParseFields(map[string]string{"rate": "10/s", "burst": "20", "rollout_percent": "25", "shadow": "true"})
	if err != nil || ch.MaxRequests != 10 || ch.Window != time.Second || ch.Burst != 20 || ch.RolloutPercent != 25 || !ch.Shadow {
		t.Errorf("ParseFields = %+v, %v", ch, err)
	}
	back, err := ParseFields(ch.Fields())
	if err != nil || back != ch {
		t.Errorf("Fields round trip: %+v, %v; want %+v", back, err, ch)
	}
}

var targets = []Target{
	{Class: "public", Tier: "free", Limit: limiter.PerMinute(limiter.TokenBucket, 10), Cost: 1},
	{Class: "public", Tier: "pro", Limit: limiter.PerMinute(limiter.TokenBucket, 100), Cost: 1},
	{Class: "bulk", Tier: "free", Limit: limiter.PerMinute(limiter.FixedWindow, 50), Cost: 5},
	{Class: "bulk", Tier: "pro", Limit: limiter.PerMinute(limiter.FixedWindow, 500), Cost: 5},
}

// instance is one process's cache on a shared Redis.
type instance struct {
	cache  *Cache
	errors atomic.Int32
	reads  atomic.Int64 // reads the cache began on its backend
	mu     sync.Mutex
	last   Overlay
}

// countingBackend counts the reads begun on a backend.
type countingBackend struct {
	Backend
	reads *atomic.Int64
}

func (b countingBackend) Read(ctx context.Context, keys []string) (map[string]map[string]string, error) {
	b.reads.Add(1)
	return b.Backend.Read(ctx, keys)
}

func (in *instance) overlay() Overlay {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.last
}

func startInstance(t *testing.T, client redis.UniversalClient, refresh time.Duration) *instance {
	t.Helper()
	in := &instance{}
	c, err := New(Config{
		Backend: countingBackend{&Redis{Client: client, Channel: Channel("rl")}, &in.reads}, Targets: targets, RefreshInterval: refresh,
		OnChange: func(o Overlay) { in.mu.Lock(); in.last = o; in.mu.Unlock() },
		OnError:  func(string, error) { in.errors.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	in.cache = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return in
}

// waitFor polls cond for up to limit (five times longer under the race
// detector, where timings are not asserted) and returns how long it took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	if raceEnabled {
		limit *= 5
	}
	return eventually.True(t, limit, what, cond)
}

// waitSubscribed waits until n instances listen on the live-limit channel
// of prefix "rl", so that a change published next reaches them all.
func waitSubscribed(t *testing.T, srv *redistest.Server, n int64) {
	t.Helper()
	c := newClient(t, srv)
	ch := Channel("rl")
	waitFor(t, 2*time.Second, "the instances subscribed", func() bool {
		got, err := c.PubSubNumSub(context.Background(), ch).Result()
		return err == nil && got[ch] >= n
	})
}

func newClient(t *testing.T, srv *redistest.Server) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func rateOf(o Overlay, class, tier string) int64 {
	return o[class][tier].Limit.Rate
}

func TestAChangeOnOneInstanceReachesAnotherWithinASecondAndTheMoreSpecificHashWins(t *testing.T) {
	srv := redistest.Single(t)
	// A refresh interval far beyond the test: only pub/sub can deliver in time.
	a := startInstance(t, newClient(t, srv), time.Hour)
	b := startInstance(t, newClient(t, srv), time.Hour)
	waitSubscribed(t, srv, 2)
	ctx := context.Background()

	if err := a.cache.Backend().Write(ctx, TierKey("rl", "free"), Change{MaxRequests: 20, RolloutPercent: 100}.Fields(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, time.Second, "the tier change on the other instance", func() bool {
		o := b.overlay()
		return rateOf(o, "public", "free") == 20 && rateOf(o, "bulk", "free") == 20
	})
	t.Logf("the other instance applied the change after %s", took)
	if _, ok := b.overlay()["public"]["pro"]; ok {
		t.Errorf("the free tier's change applies to pro: %+v", b.overlay())
	}
	if err := a.cache.Backend().Write(ctx, ClassKey("rl", "public", "free"), Change{MaxRequests: 30, RolloutPercent: 100}.Fields(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "the class change on the other instance", func() bool { return rateOf(b.overlay(), "public", "free") == 30 })
	if o := b.overlay(); rateOf(o, "bulk", "free") != 20 || o["public"]["free"].Source != "rl:config:public:free" {
		t.Errorf("overlay %+v: the class hash should win for public only", o)
	}
	if err := a.cache.Backend().Delete(ctx, ClassKey("rl", "public", "free")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "the deletion on the other instance", func() bool { return rateOf(b.overlay(), "public", "free") == 20 })
}

func TestAMalformedValueInTheHashIsIgnoredCountedOnceAndTheLastGoodValueKeepsApplying(t *testing.T) {
	srv := redistest.Single(t)
	in := startInstance(t, newClient(t, srv), 200*time.Millisecond)
	ctx := context.Background()
	admin := newClient(t, srv)
	key := TierKey("rl", "free")
	admin.HSet(ctx, key, "max_requests", "25")
	waitFor(t, 2*time.Second, "the good value", func() bool { return rateOf(in.overlay(), "public", "free") == 25 })

	// What an operator might type by hand: not a number. No PUBLISH: the
	// periodic refresh must find it.
	admin.HSet(ctx, key, "max_requests", "25k")
	waitFor(t, 2*time.Second, "the error counted", func() bool { return in.errors.Load() == 1 })
	// The claim is that the next three refreshes (at 200ms) do not count
	// the same bad content again. Nothing publishes here, so the reads
	// are the periodic refreshes, one after the other: once the fourth
	// read after the error has begun, three have been taken in.
	counted := in.reads.Load()
	waitFor(t, 2*time.Second, "three more refreshes", func() bool { return in.reads.Load() >= counted+4 })
	if got := in.errors.Load(); got != 1 {
		t.Errorf("the same bad content was counted %d times, want once", got)
	}
	if got := rateOf(in.overlay(), "public", "free"); got != 25 {
		t.Errorf("rate %d in force, want the last good 25", got)
	}
	ents := in.cache.Entries()
	if len(ents) != 1 || !strings.Contains(ents[0].Error, "max_requests") || ents[0].Change == nil || ents[0].Change.MaxRequests != 25 {
		t.Errorf("entries %+v: want the error and the last good value", ents)
	}
	// A value valid on its own but below the bulk class's cost of 5 is
	// refused too, exactly as the config file would be.
	admin.HSet(ctx, key, "max_requests", "3")
	waitFor(t, 2*time.Second, "the second error counted", func() bool { return in.errors.Load() == 2 })
	if ents := in.cache.Entries(); !strings.Contains(ents[0].Error, "bulk") || !strings.Contains(ents[0].Error, "cost") {
		t.Errorf("error %q, want the class and the cost named", ents[0].Error)
	}
	// Fixed: applies again.
	admin.HSet(ctx, key, "max_requests", "40")
	waitFor(t, 2*time.Second, "the fixed value", func() bool { return rateOf(in.overlay(), "public", "free") == 40 })
}

func TestALiveChangeWithAnExpiryRevertsOnEveryInstanceOnTime(t *testing.T) {
	srv := redistest.Single(t)
	a := startInstance(t, newClient(t, srv), time.Hour)
	b := startInstance(t, newClient(t, srv), time.Hour)
	waitSubscribed(t, srv, 2)
	expires := time.Now().Add(700 * time.Millisecond)
	if err := a.cache.Backend().Write(context.Background(), TierKey("rl", "pro"), Change{MaxRequests: 999, RolloutPercent: 100, ExpiresAt: expires}.Fields(), expires); err != nil {
		t.Fatal(err)
	}
	for _, in := range []*instance{a, b} {
		waitFor(t, time.Second, "the change", func() bool { return rateOf(in.overlay(), "public", "pro") == 999 })
	}
	var wg sync.WaitGroup
	late := make([]time.Duration, 2)
	for i, in := range []*instance{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(eventually.Every)
			defer tick.Stop()
			for ; ; <-tick.C {
				if _, ok := in.overlay()["public"]["pro"]; !ok {
					late[i] = time.Since(expires)
					return
				}
				if time.Since(expires) > 3*time.Second {
					late[i] = time.Hour
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, l := range late {
		if l < 0 || l > 500*time.Millisecond && !raceEnabled || l == time.Hour {
			t.Errorf("instance %d reverted %s after the expiry, want within 500ms", i, l)
		}
	}
	if in := a.cache; rateOf(in.Overlay(), "public", "pro") != 0 {
		t.Errorf("overlay after expiry %+v", in.Overlay())
	}
}

func TestAfterRedisComesBackTheCacheReadsWhatChangedWhileItWasAway(t *testing.T) {
	srv := redistest.Single(t)
	in := startInstance(t, newClient(t, srv), time.Hour)
	waitSubscribed(t, srv, 1)
	srv.Restart() // the subscription breaks; data is gone
	admin := newClient(t, srv)
	admin.HSet(context.Background(), TierKey("rl", "free"), "max_requests", "77") // no PUBLISH
	waitFor(t, 5*time.Second, "the change made while disconnected", func() bool { return rateOf(in.overlay(), "public", "free") == 77 })
}
