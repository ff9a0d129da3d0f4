//go:build !race

package rls_test

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/rls"
)

// maxHandlerAllocs bounds what ShouldRateLimit allocates for one descriptor a rule admits,
// response headers and the collector's recording included.
const maxHandlerAllocs = 20

// handlerAllocs is the mean allocations of one ShouldRateLimit called directly on svc, every
// call admitted.
func handlerAllocs(t *testing.T, svc *rls.Service) float64 {
	t.Helper()
	reqs := allocRequests(100)
	ctx := context.Background()
	for _, r := range reqs { // every key exists: the steady state
		if _, err := svc.ShouldRateLimit(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	i := 0
	n := testing.AllocsPerRun(500, func() {
		resp, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		i++
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("ShouldRateLimit: %v, %v", resp, err)
		}
	})
	t.Logf("%.1f allocations per call", n)
	return n
}

// TestGoalHandlerAllocations holds ShouldRateLimit's allocations for one admitted descriptor,
// on the memory store and on Redis.
func TestGoalHandlerAllocations(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		svc := handlerService(t, limiter.NewMemoryStore(limiter.MemoryConfig{}))
		if n := handlerAllocs(t, svc); n > maxHandlerAllocs {
			t.Errorf("%.1f allocations per call, want at most %d", n, maxHandlerAllocs)
		}
	})
	t.Run("redis", func(t *testing.T) {
		svc := handlerService(t, redisStore(t, redisstore.ClientConfig{URL: redistest.Single(t).URL()}))
		if n := handlerAllocs(t, svc); n > maxHandlerAllocs {
			t.Errorf("%.1f allocations per call, want at most %d", n, maxHandlerAllocs)
		}
	})
}
