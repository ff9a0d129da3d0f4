package limiter_test

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
)

// BenchmarkSetMemory: go test -run ^$ -bench BenchmarkSetMemory ./limiter/
func BenchmarkSetMemory(b *testing.B) {
	limitertest.BenchmarkSets(b, limiter.NewMemoryStore(limiter.MemoryConfig{}))
}
