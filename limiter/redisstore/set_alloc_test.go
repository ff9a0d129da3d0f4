//go:build !race

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A set of three limits on a single server allocates each part's key, the
// command and the call's deadline, nothing per argument or reply element.
func TestSetOfThreeLimitsAllocatesLittle(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	month := limiter.PerCalendar(1<<40, &limiter.Calendar{Unit: limiter.Month, Location: time.UTC})
	parts := []limiter.Part{
		{Key: "user", Limit: limiter.PerMinute(limiter.SlidingWindow, 1<<20), Cost: 1},
		{Key: "user", Limit: limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1 << 20, Period: time.Minute}, Cost: 7},
		{Key: "org", Limit: month, Cost: 1},
	}
	out := make([]limiter.Decision, len(parts))
	for i := 0; i < 10; i++ {
		if ok, err := store.DecideSet(ctx, parts, limiter.ModeConsume, time.Second, out); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := store.DecideSet(ctx, parts, limiter.ModeConsume, time.Second, out); err != nil {
			t.Fatal(err)
		}
	})
	// 4 keys (sliding_window has two), the command, the deadline's context,
	// timer and channel, go-redis's health check of the pooled connection
	// (3), slack: nothing per part's argument or reply element.
	if allocs > 13 {
		t.Fatalf("%.1f allocations per set of three, want at most 13", allocs)
	}
}
