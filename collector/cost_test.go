package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// The real cost over the estimate is a ratio, and named as one.
func TestTheRealCostOverTheEstimateIsExportedAsARatio(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/chat"}, Tiers: []string{"free"}, DefaultTier: "free"})
	c.CostReserved("/chat", "free", 800)
	c.CostSettled("/chat", "free", limiter.Settlement{Estimate: 800, Actual: 312, Refunded: 488}, true)
	mfs := gather(t, c)
	h := find(t, mfs, "rate_limit_cost_estimate_ratio", map[string]string{"endpoint": "/chat", "plan_tier": "free"}).GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.39 {
		t.Errorf("rate_limit_cost_estimate_ratio: %d samples summing to %g, want 1 of 312/800 = 0.39", h.GetSampleCount(), h.GetSampleSum())
	}
	if _, old := mfs["rate_limit_cost_estimate_error"]; old {
		t.Error("rate_limit_cost_estimate_error is still exported")
	}
	problems, err := testutil.CollectAndLint(c, "rate_limit_cost_estimate_ratio")
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}
