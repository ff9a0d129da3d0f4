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
	for _, a := range limiter.Algorithms {
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
