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
// that are exact admit exactly the limit. With batching (the default) most
// decisions travel in shared script calls; without, each is its own call.
func TestExactUnderContentionFromFourClients(t *testing.T) {
	srv := redistest.Single(t)
	for _, tc := range []struct {
		name  string
		batch redisstore.BatchConfig
	}{
		{"with batching, decisions sharing script calls", redisstore.BatchConfig{}},
		{"without batching, one script call per decision", redisstore.BatchConfig{Disabled: true}},
		{"with batches of at most 3 decisions and one sender", redisstore.BatchConfig{MaxSize: 3, Senders: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stores []limiter.Store
			var shared int64
			var counters []*redisstore.BatchCounter
			for i := 0; i < 4; i++ {
				s, c := newCountingStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 16}, redisstore.Config{Batch: tc.batch})
				stores = append(stores, s)
				counters = append(counters, c)
			}
			for _, r := range limitertest.Contention(t, stores, 64) {
				t.Logf("%s: %d of %d admitted", r.Algorithm, r.Allowed, r.Attempts)
			}
			for _, c := range counters {
				shared += c.Batched()
			}
			t.Logf("%d decisions sent in batches", shared)
			if tc.batch.Disabled && shared != 0 {
				t.Fatalf("%d decisions shared a call with batching disabled", shared)
			}
			if !tc.batch.Disabled && shared == 0 {
				t.Fatalf("no decision shared a batch: the batch path was not exercised")
			}
		})
	}
}

// Four clients with 16 goroutines each reserve and commit on one key: each
// reservation is settled once, and what was settled stays within the bound.
func TestReservationsSettleExactlyUnderContentionFromFourClients(t *testing.T) {
	srv := redistest.Single(t)
	var stores []limiter.Store
	for i := 0; i < 4; i++ {
		stores = append(stores, newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 16}))
	}
	for _, r := range limitertest.ReserveContention(t, stores, 16) {
		t.Logf("%s: %d units settled of a quota of %d (bound %d)", r.Algorithm, r.Settled, r.Quota, r.Bound)
	}
}
