package collector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestLeasesInFlightAndExpiredAreCountedPerEndpointAndTier(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/jobs"}, Tiers: []string{"free"}, DefaultTier: "free"})
	if err := c.SetLeaseLimit("/jobs", "free", limiter.LeaseLimit{Limit: 5, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, c)
	if v := find(t, mfs, "rate_limit_in_flight", map[string]string{"endpoint": "/jobs", "plan_tier": "free"}).GetGauge().GetValue(); v != 0 {
		t.Fatalf("in flight starts at %g", v)
	}
	find(t, mfs, "rate_limit_leases_expired_total", map[string]string{"endpoint": "/jobs", "plan_tier": "free"})
	lim := find(t, mfs, "rate_limit_limit", map[string]string{"endpoint": "/jobs", "plan_tier": "free"})
	if lim.GetGauge().GetValue() != 5 || labelsOf(lim)["algorithm"] != "concurrency" {
		t.Fatalf("rate_limit_limit %v", lim)
	}
	for _, m := range mfs["rate_limit_quota"].GetMetric() {
		if labelsOf(m)["endpoint"] == "/jobs" {
			t.Fatalf("a concurrency limit is exported as a quota per window: %v", m)
		}
	}
	ctx := context.Background()
	c.RecordLeases(ctx, "/jobs", "free", 1, 0)
	c.RecordLeases(ctx, "/jobs", "free", 1, 2)
	c.RecordLeases(ctx, "/jobs", "free", -1, 1)
	c.RecordLeases(ctx, "/unknown", "gold", 1, 0)
	mfs = gather(t, c)
	if v := find(t, mfs, "rate_limit_in_flight", map[string]string{"endpoint": "/jobs"}).GetGauge().GetValue(); v != 1 {
		t.Fatalf("in flight %g, want 1", v)
	}
	if v := find(t, mfs, "rate_limit_leases_expired_total", map[string]string{"endpoint": "/jobs"}).GetCounter().GetValue(); v != 3 {
		t.Fatalf("expired %g, want 3", v)
	}
	if v := find(t, mfs, "rate_limit_in_flight", map[string]string{"endpoint": OtherEndpoint, "plan_tier": "free"}).GetGauge().GetValue(); v != 1 {
		t.Fatalf("an unknown endpoint and tier fold: %g", v)
	}
	if err := c.SetLeaseLimit("/nope", "free", limiter.LeaseLimit{Limit: 1}); !errors.Is(err, ErrUnknownLabel) {
		t.Fatalf("unknown endpoint: %v", err)
	}
}
