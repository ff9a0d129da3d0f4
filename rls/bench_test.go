package rls_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// benchStreams is the number of calls in flight at once, as from a fleet
// of Envoys sharing one rl-exporter.
const benchStreams = 64

// BenchmarkShouldRateLimit measures ShouldRateLimit calls per second over
// one gRPC connection with 64 calls in flight, one descriptor each, on 1000
// users under a fixed window that admits them all.
//
//	go test -run '^$' -bench ShouldRateLimit -benchtime 5s ./rls/
func BenchmarkShouldRateLimit(b *testing.B) {
	dir := writeDir(b, map[string]string{"bench.yaml": `
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
`})
	// One private redis-server for every round of the benchmark.
	var redisOnce limiter.Store
	redis := func() limiter.Store {
		if redisOnce == nil {
			redisOnce = redisStore(b, redisstore.ClientConfig{URL: redistest.Single(b).URL()})
		}
		return redisOnce
	}
	stores := []struct {
		name string
		open func(b *testing.B) limiter.Store
	}{
		{"memory", func(*testing.B) limiter.Store { return limiter.NewMemoryStore(limiter.MemoryConfig{}) }},
		{"redis", func(*testing.B) limiter.Store { return redis() }},
	}
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			h := start(b, s.open(b), dir, nil)
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "u"+strconv.Itoa(i))}}
			}
			var next, over atomic.Int64
			b.SetParallelism((benchStreams + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					resp, err := h.client.ShouldRateLimit(ctx, reqs[next.Add(1)%int64(len(reqs))])
					if err != nil {
						b.Error(err)
						return
					}
					if resp.OverallCode != rlsv3.RateLimitResponse_OK {
						over.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			if over.Load() > 0 {
				b.Errorf("%d calls over the limit; the benchmark measures admitted calls", over.Load())
			}
		})
	}
}
