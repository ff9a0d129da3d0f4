package rls_test

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
			b.ReportAllocs()
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

// stubService answers every call with one response of the shape a Service gives one admitted
// descriptor (its status, limit, reset and headers), doing nothing else.
type stubService struct {
	rlsv3.UnimplementedRateLimitServiceServer
	resp *rlsv3.RateLimitResponse
}

func (s stubService) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return s.resp, nil
}

// BenchmarkGRPCOnly measures what gRPC itself costs a ShouldRateLimit call, client and server
// (-benchmem's allocations are both sides'), as BenchmarkShouldRateLimit drives it, with a
// handler that returns a response made once: the difference between the two is the handler's.
//
//	go test -run '^$' -bench 'GRPCOnly|ShouldRateLimit/memory' -benchmem ./rls/
func BenchmarkGRPCOnly(b *testing.B) {
	svc := handlerService(b, limiter.NewMemoryStore(limiter.MemoryConfig{}))
	reqs := allocRequests(1000)
	resp, err := svc.ShouldRateLimit(context.Background(), reqs[0])
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, stubService{resp: resp})
	go func() { _ = gs.Serve(ln) }()
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	client := rlsv3.NewRateLimitServiceClient(conn)
	var next atomic.Int64
	b.SetParallelism((benchStreams + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := client.ShouldRateLimit(ctx, reqs[next.Add(1)%int64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
