//go:build unix

package server_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
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
	// Before the client (cleanups run last first): the store's senders give their connections
	// back, or closing the client under them logs inside the next benchmark's output line.
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rs.Close(ctx); err != nil {
			b.Errorf("close the store: %v", err)
		}
	})
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
	info, err := srv.Info("cpu")
	if err != nil {
		b.Fatalf("INFO: %v", err)
	}
	sys, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
	user, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
	return sys + user
}
