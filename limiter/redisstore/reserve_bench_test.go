package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// BenchmarkPairsConcurrent measures, from 64 goroutines over 1000 keys on
// one private redis-server, a plain decision, a reserve+commit pair and a
// lease acquire+release pair through the store, one after another in each
// round so that the load on the machine falls on all three alike. Besides
// the time per operation it reports the CPU of this process (cpu-µs/op),
// of the redis-server (redis-µs/op) and inside script calls
// (script-µs/op), and the operations per script call (ops/call): a pair
// costs what its two calls cost together.
func BenchmarkPairsConcurrent(b *testing.B) {
	srv := redistest.Single(b)
	store := newStore(b, redisstore.ClientConfig{URL: srv.URL()})
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 100_000_000, Period: time.Second}
	lease := limiter.LeaseLimit{Limit: 1 << 30, TTL: time.Minute}
	ctx := context.Background()
	var seq atomic.Int64
	ops := []struct {
		name string
		op   func(key string) (calls int, err error)
	}{
		{"plain", func(key string) (int, error) {
			_, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, limiter.DefaultTimeout)
			return 1, err
		}},
		{"reserve+commit", func(key string) (int, error) {
			id := strconv.FormatInt(seq.Add(1), 16) + "-bench-reservation-id"
			req := limiter.ReserveRequest{ID: id, Estimate: 1, Hold: time.Minute}
			if _, err := store.Reserve(ctx, key, lim, req, limiter.DefaultTimeout); err != nil {
				return 1, err
			}
			_, err := store.Settle(ctx, key, lim, id, seq.Load()%3, limiter.DefaultTimeout)
			return 2, err
		}},
		{"acquire+release", func(key string) (int, error) {
			id := strconv.FormatInt(seq.Add(1), 16) + "-bench-lease-id"
			if _, err := store.AcquireLease(ctx, key, lease, id, limiter.DefaultTimeout); err != nil {
				return 1, err
			}
			_, err := store.ReleaseLease(ctx, key, id, limiter.DefaultTimeout)
			return 2, err
		}},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = "user:pairs" + strconv.Itoa(i)
			}
			var n, failed, calls atomic.Int64
			redisCPU0, scripts0, usec0 := redisCPU(b, srv)
			cpu0 := redisstore.ProcessCPU()
			b.ReportAllocs()
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, err := o.op(keys[int(n.Add(1))%len(keys)])
					calls.Add(int64(c))
					if err != nil && failed.Add(1) == 1 {
						b.Logf("first failure: %v", err)
					}
				}
			})
			b.StopTimer()
			cpu := redisstore.ProcessCPU() - cpu0
			redisCPU1, scripts1, usec1 := redisCPU(b, srv)
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric((redisCPU1-redisCPU0)*1e6/float64(b.N), "redis-µs/op")
			b.ReportMetric(float64(usec1-usec0)/float64(b.N), "script-µs/op")
			if scripts1 > scripts0 {
				b.ReportMetric(float64(calls.Load())/float64(scripts1-scripts0), "ops/call")
			}
			b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
		})
	}
}
