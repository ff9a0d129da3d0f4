package redisstore_test

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// Four application servers (four clients, four connection pools) with 64
// goroutines each hit one key: the scripts are atomic, so the algorithms
// that are exact admit exactly the limit.
func TestExactUnderContentionFromFourClients(t *testing.T) {
	srv := redistest.Single(t)
	var stores []limiter.Store
	for i := 0; i < 4; i++ {
		stores = append(stores, newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 16}))
	}
	for _, r := range limitertest.Contention(t, stores, 64) {
		t.Logf("%s: %d of %d admitted", r.Algorithm, r.Allowed, r.Attempts)
	}
}
