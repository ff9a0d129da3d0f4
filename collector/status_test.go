package collector

import (
	"context"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Every status a decision is recorded under has its own series of rate_limit_requests_total,
// counting its decisions alone: a status added to limiter's list gets its counter and label
// with it, and none shares another's.
func TestEveryStatusIsCountedUnderItsOwnLabel(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/a"}, Tiers: []string{"free"}})
	ctx := context.Background()
	for i, s := range limiter.AllStatuses() {
		for range i + 1 {
			c.RecordDecision(ctx, rec("/a", "free", s))
		}
	}
	for i, s := range limiter.AllStatuses() {
		l := map[string]string{"endpoint": "/a", "plan_tier": "free", "status": string(s)}
		if got := counter(t, c, "rate_limit_requests_total", l); got != float64(i+1) {
			t.Errorf("status %s counted %v times, want %d", s, got, i+1)
		}
	}
	n := 0
	for _, m := range gather(t, c)["rate_limit_requests_total"].GetMetric() {
		if l := labelsOf(m); l["endpoint"] == "/a" && l["plan_tier"] == "free" {
			n++
		}
	}
	if n != limiter.NumStatuses {
		t.Errorf("%d series of rate_limit_requests_total for one label set, want one per status (%d)", n, limiter.NumStatuses)
	}
}
