package httplimit

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A tier under a concurrency limit answers its leases held, the limit and when each held lease
// expires, beside the rate limits of the other tiers and classes: no panic, no empty answer.
func TestUsageAnswersAConcurrencyTierWithItsLeasesInFlight(t *testing.T) {
	clk := newClock()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
	m, h, _ := setup(t, PolicyConfig{Store: store, Tiers: []string{"free", "pro"}, DefaultTier: "free", DefaultClass: "other", Classes: []Class{
		{Name: "jobs", Routes: []string{"/jobs/"},
			Limits: map[string]limiter.Limit{"pro": limiter.PerMinute(limiter.GCRA, 100)},
			Leases: map[string]limiter.LeaseLimit{"free": {Limit: 2, TTL: 30 * time.Second}}},
		{Name: "other", Limits: map[string]limiter.Limit{"free": limiter.PerMinute(limiter.FixedWindow, 10)}},
	}}, clk)
	g := newGate()
	srv := httptest.NewServer(m.Handler(g))
	defer srv.Close()
	defer close(g.release)
	go func() { _, _ = srv.Client().Get(srv.URL + "/jobs/1") }()
	<-g.entered
	_ = h

	w := getUsage(m.UsageHandler(), "?key=ip:127.0.0.1")
	if w.Code != 200 {
		t.Fatalf("status %d, want 200: %s", w.Code, w.Body)
	}
	var r UsageReport
	decodeJSON(t, w.Body.Bytes(), &r)
	j := findUsage(t, r, "jobs", "/jobs/")
	if j.Algorithm != limiter.Concurrency || j.InFlight == nil || *j.InFlight != 1 || j.Quota != 2 || j.Used != 1 || j.Remaining != 1 {
		t.Fatalf("jobs: %+v, want concurrency, 1 in flight of 2", j)
	}
	if len(j.Leases) != 1 || !j.Leases[0].Expires.Equal(clk.Now().Add(30*time.Second)) || j.LeaseTTLSeconds != 30 {
		t.Fatalf("jobs' leases %+v (TTL %d s), want one expiring in 30 s", j.Leases, j.LeaseTTLSeconds)
	}
	if o := findUsage(t, r, "other", "/"); o.Algorithm != limiter.FixedWindow || o.InFlight != nil {
		t.Fatalf("other: %+v, want the rate limit with no in_flight", o)
	}
	// The pro tier of the same class is rate limited: its usage is the GCRA budget.
	pro, err := m.Usage(context.Background(), "ip:127.0.0.1", "pro")
	if err != nil {
		t.Fatal(err)
	}
	if j := findUsage(t, pro, "jobs", "/jobs/"); j.Algorithm != limiter.GCRA || j.Quota != 100 {
		t.Fatalf("jobs on pro: %+v, want the GCRA limit", j)
	}
}
