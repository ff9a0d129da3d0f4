//go:build unix

package server_test

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/server"
)

// BenchmarkRequestPathStores measures a decision (POST /v1/check) and a
// proxied request through serve on the memory store and on a private
// redis-server, each from 64 keep-alive connections (as make
// compare-http's wrk -c64), one client key, a limit never reached. Besides
// the time per request it reports the CPU per request of this process
// (cpu-µs/req: serve, the benchmark's clients and upstream, the same for
// both stores) and of the redis-server (redis-µs/req): what the Redis
// store costs over the memory store is the difference.
//
//	go test -run '^$' -bench RequestPathStores ./server
func BenchmarkRequestPathStores(b *testing.B) {
	up := startRawUpstream(b)
	srv := redistest.Single(b)
	client, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	rs, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	proxied := []byte("GET /api/v1/orders/42 HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")
	body := `{"key":"user:bench","endpoint":"GET /api/v1/orders/42"}`
	check := []byte("POST /v1/check HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	for _, st := range []struct {
		name  string
		store limiter.Store
	}{
		{"memory", limiter.NewMemoryStore(limiter.MemoryConfig{})},
		{"redis", rs},
	} {
		base := startBenchServeOn(b, up, st.store)
		for _, c := range []struct {
			name string
			req  []byte
		}{{"check", check}, {"proxied", proxied}} {
			b.Run(st.name+"/"+c.name, func(b *testing.B) {
				redis0 := redisServerCPU(b, srv)
				cpu0 := processCPUTime()
				b.SetParallelism(32) // × GOMAXPROCS connections: 64 on 2 CPUs
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					conn := dialRaw(b, base)
					for pb.Next() {
						conn.roundTrip(b, c.req)
					}
				})
				b.StopTimer()
				b.ReportMetric(float64((processCPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/req")
				b.ReportMetric((redisServerCPU(b, srv)-redis0)*1e6/float64(b.N), "redis-µs/req")
			})
		}
	}
}

// startBenchServeOn runs serve on store in front of upstream, with the
// limit of startBenchServe.
func startBenchServeOn(b *testing.B, upstream string, store limiter.Store) string {
	b.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		b.Fatal(err)
	}
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: store,
		Classes: []httplimit.Class{{Name: "default", Limits: map[string]limiter.Limit{
			"default": limiter.PerSecond(limiter.GCRA, 100_000_000),
		}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Upstream: u, Middleware: mw})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return srv.Addr("main")
}

// processCPUTime is the user and system CPU time this process has used.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisServerCPU is the CPU time (s) srv has used, from INFO.
func redisServerCPU(b *testing.B, srv *redistest.Server) float64 {
	b.Helper()
	reply, err := srv.Do("INFO", "cpu")
	if err != nil {
		b.Fatalf("INFO: %v", err)
	}
	info, _ := reply.(string)
	var cpu float64
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
	}
	return cpu
}
