package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// BenchmarkDecide measures one decision (one EVALSHA round trip) per
// algorithm on a private redis-server, from parallel goroutines over 1000
// keys.
func BenchmarkDecide(b *testing.B) {
	srv := redistest.Single(b)
	store := newStore(b, redisstore.ClientConfig{URL: srv.URL()})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "bench:" + strconv.Itoa(i)
	}
	for _, a := range limiter.AllAlgorithms() {
		b.Run(string(a), func(b *testing.B) {
			lim := limiter.Limit{Algorithm: a, Rate: 1000, Period: time.Second}
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if _, err := store.Decide(ctx, keys[n.Add(1)%int64(len(keys))], lim, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkDecideCluster measures decisions on a private 3-master Redis
// Cluster from 256 goroutines over 10,000 keys: batches go through one
// queue per master, each pipelining its slots' script calls.
func BenchmarkDecideCluster(b *testing.B) {
	cl := redistest.Cluster(b, 3)
	store := newStore(b, redisstore.ClientConfig{ClusterAddrs: cl.Addrs})
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = "bench:" + strconv.Itoa(i)
	}
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Second}
	b.Run("gcra", func(b *testing.B) {
		var n, failed atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(128) // × GOMAXPROCS goroutines
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				// A decision past its deadline on a loaded machine is
				// counted, not fatal: the figure is throughput.
				if _, err := store.DecideMode(ctx, keys[n.Add(1)%int64(len(keys))], lim, 1, limiter.ModeConsume, limiter.DefaultTimeout); err != nil {
					if failed.Add(1) == 1 {
						b.Logf("first failure: %v", err)
					}
				}
			}
		})
		b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
	})
}

// BenchmarkDecideConcurrent measures what a busy server's decisions cost:
// 64 goroutines deciding on one key (as serve's /v1/check under wrk -c64
// does) or on 1000 keys, each call bounded by the Limiter's default
// timeout. Besides the time per decision it reports the CPU per decision
// of this process (cpu-µs/op: the store, go-redis and the scheduling
// between them), of the redis-server (redis-µs/op) and inside its script
// calls (script-µs/op), and the decisions per script call
// (decisions/call: how well batching gathers them).
func BenchmarkDecideConcurrent(b *testing.B) {
	srv := redistest.Single(b)
	store := newStore(b, redisstore.ClientConfig{URL: srv.URL()})
	for _, a := range []limiter.Algorithm{limiter.GCRA, limiter.TokenBucket, limiter.FixedWindow} {
		for _, nkeys := range []int{1, 1000} {
			b.Run(fmt.Sprintf("%s/keys=%d", a, nkeys), func(b *testing.B) {
				benchConcurrent(b, srv, store, a, nkeys, 64)
			})
		}
	}
}

// BenchmarkDecideCallers is BenchmarkDecideConcurrent's GCRA on 1000 keys
// from fewer callers than 64 too: the fewer they are, the smaller the
// batches, and the more of our CPU per decision (cpu-µs/op) goes to what
// each batch costs (the hand-offs between callers and senders, the
// system calls) rather than to what each decision costs.
func BenchmarkDecideCallers(b *testing.B) {
	srv := redistest.Single(b)
	store := newStore(b, redisstore.ClientConfig{URL: srv.URL()})
	for _, callers := range []int{2, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			benchConcurrent(b, srv, store, limiter.GCRA, 1000, callers)
		})
	}
}

// benchConcurrent runs b.N decisions of a on nkeys keys from callers
// goroutines (a multiple of GOMAXPROCS, at least callers) and reports the
// costs BenchmarkDecideConcurrent describes.
func benchConcurrent(b *testing.B, srv *redistest.Server, store *redisstore.Store, a limiter.Algorithm, nkeys, callers int) {
	lim := limiter.Limit{Algorithm: a, Rate: 100_000_000, Period: time.Second}
	ctx := context.Background()
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "user:bench" + strconv.Itoa(i)
		if _, err := store.DecideMode(ctx, keys[i], lim, 1, limiter.ModeConsume, time.Second); err != nil {
			b.Fatal(err)
		}
	}
	var n, failed atomic.Int64
	redisCPU0, calls0, usec0 := redisCPU(b, srv)
	cpu0 := redisstore.ProcessCPU()
	b.ReportAllocs()
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := keys[int(n.Add(1))%len(keys)]
			// A decision past its deadline on a loaded machine is
			// counted, not fatal: the figures are costs.
			if _, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, limiter.DefaultTimeout); err != nil {
				if failed.Add(1) == 1 {
					b.Logf("first failure: %v", err)
				}
			}
		}
	})
	b.StopTimer()
	cpu := redisstore.ProcessCPU() - cpu0
	redisCPU1, calls1, usec1 := redisCPU(b, srv)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric((redisCPU1-redisCPU0)*1e6/float64(b.N), "redis-µs/op")
	b.ReportMetric(float64(usec1-usec0)/float64(b.N), "script-µs/op")
	if calls1 > calls0 {
		b.ReportMetric(float64(b.N)/float64(calls1-calls0), "decisions/call")
	}
	b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
}

// redisCPU is the CPU time (s) srv has used and the script calls it has
// run and the time spent running them (µs), from INFO.
func redisCPU(b *testing.B, srv *redistest.Server) (cpu float64, calls, usec int64) {
	b.Helper()
	info, err := srv.Info("all")
	if err != nil {
		b.Fatalf("INFO: %v", err)
	}
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		f, _ := strconv.ParseFloat(info[k], 64)
		cpu += f
	}
	for _, k := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
		for _, field := range strings.Split(info[k], ",") {
			if n, ok := strings.CutPrefix(field, "calls="); ok {
				c, _ := strconv.ParseInt(n, 10, 64)
				calls += c
			}
			if n, ok := strings.CutPrefix(field, "usec="); ok {
				c, _ := strconv.ParseInt(n, 10, 64)
				usec += c
			}
		}
	}
	return cpu, calls, usec
}

// BenchmarkDecideDurability measures a decision's latency (p50, p99) on a
// private primary with one replica, from 16 goroutines over 1000 keys,
// with durability none and wait (WAIT 1 50 after each script call, in
// the same pipeline).
func BenchmarkDecideDurability(b *testing.B) {
	sn := redistest.SentinelWith(b, redistest.SentinelConfig{Replicas: 1})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "bench:" + strconv.Itoa(i)
	}
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Second}
	for _, c := range []struct {
		name string
		d    redisstore.Durability
	}{{"none", redisstore.DurabilityNone}, {"wait", redisstore.DurabilityWait}} {
		b.Run(c.name, func(b *testing.B) {
			store := redisstore.NewTestStore(b, redisstore.ClientConfig{URL: sn.Primary.URL()}, redisstore.Config{Durability: c.d})
			var n atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(8) // × GOMAXPROCS goroutines
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				var mine []time.Duration
				for pb.Next() {
					start := time.Now()
					if _, err := store.Decide(ctx, keys[n.Add(1)%int64(len(keys))], lim, 1); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			if len(lat) == 0 {
				return
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			if u := store.Unreplicated(); u > 0 {
				b.Logf("%d writes unreplicated", u)
			}
		})
	}
}
