package redisstore_test

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// BenchmarkSetRedis: go test -run ^$ -bench BenchmarkSetRedis ./limiter/redisstore/
// "batched" decides one limit as the store does by default, sharing script
// calls; "unbatched" sends each decision as its own script call, as a set is.
func BenchmarkSetRedis(b *testing.B) {
	srv := redistest.Single(b)
	for _, mode := range []struct {
		name string
		cfg  redisstore.Config
	}{
		{"batched", redisstore.Config{}},
		{"unbatched", redisstore.Config{Batch: redisstore.BatchConfig{Disabled: true}}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			limitertest.BenchmarkSets(b, redisstore.NewTestStore(b, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 128}, mode.cfg))
		})
	}
}
