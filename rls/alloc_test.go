//go:build !race

package rls_test

import (
	"context"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/rls"
)

// maxHandlerAllocs bounds what ShouldRateLimit allocates for one descriptor a rule admits,
// response headers and the collector's recording included.
const maxHandlerAllocs = 20

const allocRules = `
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
`

// handlerService is a Service as serve builds it by default (response headers on, the collector
// as recorder and store observer) on store, for calls made directly, without gRPC.
func handlerService(t testing.TB, store limiter.Store) *rls.Service {
	t.Helper()
	rules, err := rls.LoadDir(writeDir(t, map[string]string{"bench.yaml": allocRules}))
	if err != nil {
		t.Fatal(err)
	}
	col, err := collector.New(collector.Config{Endpoints: []string{"bench.user"}, Tiers: []string{"free"}, DefaultTier: "free"})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rls.New(rls.Config{
		Engine:   limiter.Config{Store: store, Observer: col},
		Recorder: col, Costs: col, ResponseHeaders: true, Tiers: []string{"free"}, DefaultTier: "free",
	}, rules)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// allocRequests are one-descriptor requests over users distinct values.
func allocRequests(users int) []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, users)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "u"+strconv.Itoa(i))}}
	}
	return reqs
}

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
	return testing.AllocsPerRun(500, func() {
		resp, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		i++
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("ShouldRateLimit: %v, %v", resp, err)
		}
	})
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
