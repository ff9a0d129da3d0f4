package redisstore_test

import (
	"context"
	"strconv"
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
				if _, err := store.DecideTimeout(ctx, keys[n.Add(1)%int64(len(keys))], lim, 1, limiter.DefaultTimeout); err != nil {
					if failed.Add(1) == 1 {
						b.Logf("first failure: %v", err)
					}
				}
			}
		})
		b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
	})
}
