//go:build !race

package redisstore

// The race detector drops a quarter of what goes back into a sync.Pool, so
// allocation counts are only meaningful without it.

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A decision on a single server allocates its key and one command, and
// nothing per argument or per reply element.
func TestGoalDecisionAllocatesLittle(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Minute}
	for i := 0; i < 10; i++ {
		if _, err := store.DecideMode(ctx, "allocs", lim, 1, limiter.ModeConsume, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := store.Decide(ctx, "allocs", lim, 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Fatalf("%.1f allocations per decision, want at most 3 (the key, the command, slack)", allocs)
	}
}
