package decision

import (
	"context"
	"slices"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// The recorder is told which limits of several refused, so that it counts each.
func TestRecordedNamesTheLimitsThatRefused(t *testing.T) {
	ctx := context.Background()
	set := setOf(t, limiter.NewMemoryStore(limiter.MemoryConfig{}),
		limiter.PerMinute(limiter.FixedWindow, 1), limiter.PerMinute(limiter.FixedWindow, 1), limiter.PerMinute(limiter.FixedWindow, 5))
	ask := Ask{Endpoint: "/chat", Tier: "pro", Set: &SetAsk{Set: set, Parts: []SetPart{
		{Name: "rpm", Key: "k|rpm", Cost: 1}, {Name: "burst", Key: "k|burst", Cost: 1}, {Name: "hourly", Key: "k|hourly", Cost: 1}}}}
	if rec := Decide(ctx, ask).Recorded(); rec.Status != limiter.StatusAllowed || rec.RefusedBy != nil {
		t.Fatalf("first: %s refused by %v, want allowed by all", rec.Status, rec.RefusedBy)
	}
	rec := Decide(ctx, ask).Recorded()
	if rec.Status != limiter.StatusRejected || !slices.Equal(rec.RefusedBy, []string{"rpm", "burst"}) {
		t.Fatalf("second: %s refused by %v, want rejected by rpm and burst", rec.Status, rec.RefusedBy)
	}
}
