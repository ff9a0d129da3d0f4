package collector

import (
	"context"
	"errors"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A tier of several limits exports each limit's quota by name and counts each refusing limit of
// a refused request once; a single limit counts under its own name.
func TestRefusalsAreCountedPerRefusingLimit(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/chat", "/search"}, Tiers: []string{"free", "pro"}, DefaultTier: "free"})
	rpm, tpm := limiter.PerMinute(limiter.FixedWindow, 10), limiter.PerMinute(limiter.SlidingWindow, 1000)
	if err := c.SetLimits("/chat", "pro", []NamedLimit{{Name: "rpm", Limit: rpm}, {Name: "tpm", Limit: tpm}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLimits("/search", "free", []NamedLimit{{Name: "search", Limit: limiter.PerMinute(limiter.GCRA, 60)}}); err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, c)
	for _, q := range []struct {
		endpoint, tier, limit string
		want                  float64
	}{{"/chat", "pro", "rpm", 10}, {"/chat", "pro", "tpm", 1000}, {"/search", "free", "search", 60}} {
		lbl := map[string]string{"endpoint": q.endpoint, "plan_tier": q.tier, "limit": q.limit}
		if v := find(t, mfs, "rate_limit_quota", lbl).GetGauge().GetValue(); v != q.want {
			t.Errorf("quota of %v: %g, want %g", lbl, v, q.want)
		}
		if v := find(t, mfs, "rate_limit_refusals_total", lbl).GetCounter().GetValue(); v != 0 {
			t.Errorf("refusals of %v start at %g", lbl, v)
		}
	}
	if n := len(mfs["rate_limit_quota"].GetMetric()); n != 3 {
		t.Errorf("%d quota series, want 3", n)
	}
	for _, m := range mfs["rate_limit_limit"].GetMetric() {
		if labelsOf(m)["endpoint"] == "/chat" {
			t.Errorf("a tier of several limits has one rate_limit_limit: %v", m)
		}
	}

	ctx := context.Background()
	refused := limiter.Record{Endpoint: "/chat", PlanTier: "pro", Status: limiter.StatusRejected, RefusedBy: []string{"rpm", "tpm"}}
	c.RecordDecision(ctx, refused)
	refused.RefusedBy = []string{"tpm"}
	c.RecordDecision(ctx, refused)
	// Neither a shadow refusal nor an admission refuses anything.
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/chat", PlanTier: "pro", Status: limiter.StatusShadowRejected, RefusedBy: []string{"rpm"}})
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/chat", PlanTier: "pro", Status: limiter.StatusAllowed, Decision: limiter.Decision{Allowed: true}})
	// A single limit is named by its endpoint and tier; a name the collector was not told of is "other".
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/search", PlanTier: "free", Status: limiter.StatusRejected})
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/chat", PlanTier: "pro", Status: limiter.StatusRejected, RefusedBy: []string{"daily"}})
	c.RecordDecision(ctx, limiter.Record{Endpoint: "/unknown", PlanTier: "pro", Status: limiter.StatusRejected})
	mfs = gather(t, c)
	for _, w := range []struct {
		endpoint, tier, limit string
		want                  float64
	}{
		{"/chat", "pro", "rpm", 1}, {"/chat", "pro", "tpm", 2}, {"/search", "free", "search", 1},
		{"/chat", "pro", OtherLimit, 1}, {OtherEndpoint, "pro", OtherLimit, 1},
	} {
		lbl := map[string]string{"endpoint": w.endpoint, "plan_tier": w.tier, "limit": w.limit}
		if v := find(t, mfs, "rate_limit_refusals_total", lbl).GetCounter().GetValue(); v != w.want {
			t.Errorf("refusals of %v: %g, want %g", lbl, v, w.want)
		}
	}
	if n := len(mfs["rate_limit_refusals_total"].GetMetric()); n != 5 {
		t.Errorf("%d refusal series, want 5", n)
	}

	// A reload that keeps a limit keeps its count; one that drops it drops its series.
	if err := c.SetLimits("/chat", "pro", []NamedLimit{{Name: "tpm", Limit: tpm}}); err != nil {
		t.Fatal(err)
	}
	mfs = gather(t, c)
	if v := find(t, mfs, "rate_limit_refusals_total", map[string]string{"endpoint": "/chat", "limit": "tpm"}).GetCounter().GetValue(); v != 2 {
		t.Errorf("tpm's refusals after a reload: %g, want 2", v)
	}
	for _, m := range append(mfs["rate_limit_refusals_total"].GetMetric(), mfs["rate_limit_quota"].GetMetric()...) {
		if labelsOf(m)["limit"] == "rpm" {
			t.Errorf("a limit gone is still exported: %v", m)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { c.RecordDecision(ctx, refused) }); n != 0 {
		t.Errorf("a refused request of several limits allocates %g times", n)
	}

	for _, bad := range [][]NamedLimit{
		nil,
		{{Name: "a", Limit: rpm}, {Name: "a", Limit: tpm}},
		{{Name: "a", Limit: limiter.Limit{Algorithm: "nope"}}},
	} {
		if err := c.SetLimits("/chat", "pro", bad); err == nil {
			t.Errorf("SetLimits(%v) accepted", bad)
		}
	}
	if err := c.SetLimits("/nope", "pro", []NamedLimit{{Name: "a", Limit: rpm}}); !errors.Is(err, ErrUnknownLabel) {
		t.Errorf("unknown endpoint: %v", err)
	}
}

// SetLimit names its limit after the endpoint: the limit of a rule with no other name.
func TestSetLimitNamesTheLimitAfterItsEndpoint(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/x"}, Tiers: []string{"free"}, DefaultTier: "free"})
	if err := c.SetLimit("/x", "free", limiter.PerMinute(limiter.FixedWindow, 5)); err != nil {
		t.Fatal(err)
	}
	c.RecordDecision(context.Background(), limiter.Record{Endpoint: "/x", PlanTier: "free", Status: limiter.StatusRejected})
	mfs := gather(t, c)
	lbl := map[string]string{"endpoint": "/x", "plan_tier": "free", "limit": "/x"}
	if v := find(t, mfs, "rate_limit_quota", lbl).GetGauge().GetValue(); v != 5 {
		t.Errorf("quota %g, want 5", v)
	}
	if v := find(t, mfs, "rate_limit_refusals_total", lbl).GetCounter().GetValue(); v != 1 {
		t.Errorf("refusals %g, want 1", v)
	}
}
