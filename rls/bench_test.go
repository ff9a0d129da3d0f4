package rls_test

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/rls"
)

// benchStreams is the number of calls in flight at once, as from a fleet
// of Envoys sharing one rl-exporter.
const benchStreams = 64

// BenchmarkShouldRateLimit measures ShouldRateLimit calls per second over
// one gRPC connection with 64 calls in flight, one descriptor each, on 1000
// users under a fixed window that admits them all, on the server options serve
// uses by default and without stream workers (a goroutine per call); and, as
// all-or-nothing, calls of three descriptors (the user, one of 10
// organisations, one of 3 routes) decided as one (Config.AllOrNothing).
//
//	go test -run '^$' -bench ShouldRateLimit -benchtime 5s ./rls/
func BenchmarkShouldRateLimit(b *testing.B) {
	dir := writeDir(b, map[string]string{"bench.yaml": `
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: org
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: route
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
		for _, workers := range []int{-1, 0} {
			name := s.name
			if workers < 0 {
				name += "/no-workers"
			}
			b.Run(name, func(b *testing.B) {
				benchCalls(b, startOpts(b, s.open(b), dir, nil, rls.ServerConfig{StreamWorkers: workers}.Options()...), false)
			})
		}
		b.Run(s.name+"/all-or-nothing", func(b *testing.B) {
			benchCalls(b, startOpts(b, s.open(b), dir, allOrNothing, rls.ServerConfig{}.Options()...), true)
		})
	}
}

// benchCalls drives h as BenchmarkShouldRateLimit says: each call of three descriptors when
// three is set, else of one.
func benchCalls(b *testing.B, h *harness, three bool) {
	reqs := allocRequests(1000)
	if three {
		reqs = threeDescriptorRequests(1000)
	}
	var next, over atomic.Int64
	b.SetParallelism((benchStreams + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, _ := processCPU()
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
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	if over.Load() > 0 {
		b.Errorf("%d calls over the limit; the benchmark measures admitted calls", over.Load())
	}
}

// reportCPU reports the process's CPU time per call since cpu0, client and server together.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu1, ok := processCPU(); ok && b.N > 0 {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
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
	cpu0, _ := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := client.ShouldRateLimit(ctx, reqs[next.Add(1)%int64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

const allocRules = `
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: org
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: route
    rate_limit: {unit: second, requests_per_unit: 1000000}
`

// handlerService is a Service as serve builds it by default (response headers on, the collector
// as recorder and store observer) on store, for calls made directly, without gRPC; mods change
// its Config.
func handlerService(t testing.TB, store limiter.Store, mods ...func(*rls.Config)) *rls.Service {
	t.Helper()
	rules, err := rls.LoadDir(writeDir(t, map[string]string{"bench.yaml": allocRules}))
	if err != nil {
		t.Fatal(err)
	}
	col, err := collector.New(collector.Config{Endpoints: []string{"bench.user", "bench.org", "bench.route"}, Tiers: []string{"free"}, DefaultTier: "free"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rls.Config{
		Engine:   limiter.Config{Store: store, Observer: col},
		Recorder: col, Costs: col, ResponseHeaders: true, Tiers: []string{"free"}, DefaultTier: "free",
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	svc, err := rls.New(cfg, rules)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// threeDescriptorRequests are requests of three descriptors: one of users distinct users, one
// of 10 organisations, one of 3 routes.
func threeDescriptorRequests(users int) []*rlsv3.RateLimitRequest {
	reqs := allocRequests(users)
	for i, r := range reqs {
		r.Descriptors = append(r.Descriptors, desc("org", "o"+strconv.Itoa(i%10)), desc("route", "r"+strconv.Itoa(i%3)))
	}
	return reqs
}

// allocRequests are one-descriptor requests over users distinct values.
func allocRequests(users int) []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, users)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "u"+strconv.Itoa(i))}}
	}
	return reqs
}

// BenchmarkHandler measures ShouldRateLimit called directly, without gRPC, one admitted
// descriptor per call, on the memory store and on Redis, with -benchmem's allocations; and, as
// memory/all-or-nothing, calls of three descriptors decided as one (Config.AllOrNothing).
//
//	go test -run '^$' -bench Handler -benchmem ./rls/
func BenchmarkHandler(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) limiter.Store
	}{
		{"memory", func(*testing.B) limiter.Store { return limiter.NewMemoryStore(limiter.MemoryConfig{}) }},
		{"redis", func(b *testing.B) limiter.Store {
			return redisStore(b, redisstore.ClientConfig{URL: redistest.Single(b).URL()})
		}},
	}
	for _, s := range stores {
		b.Run(s.name, func(b *testing.B) {
			benchHandler(b, handlerService(b, s.open(b)), allocRequests(1000))
		})
	}
	b.Run("memory/all-or-nothing", func(b *testing.B) {
		benchHandler(b, handlerService(b, limiter.NewMemoryStore(limiter.MemoryConfig{}), allOrNothing), threeDescriptorRequests(1000))
	})
}

// benchHandler calls svc directly with reqs in turn, as BenchmarkHandler says.
func benchHandler(b *testing.B, svc *rls.Service, reqs []*rlsv3.RateLimitRequest) {
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		resp, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			b.Fatalf("ShouldRateLimit: %v, %v", resp, err)
		}
		i++
	}
}
