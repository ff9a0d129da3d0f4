package limitertest_test

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
)

func TestMemoryStoreConforms(t *testing.T) {
	limitertest.Run(t, func(t *testing.T) limiter.Store {
		return limiter.NewMemoryStore(limiter.MemoryConfig{})
	})
}

func TestMemoryStoreIsExactUnderContention(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	// Four clients of one in-process store, 64 goroutines each.
	res := limitertest.Contention(t, []limiter.Store{store, store, store, store}, 64)
	for _, r := range res {
		t.Logf("%s: %d of %d admitted", r.Algorithm, r.Allowed, r.Attempts)
	}
}

func TestMemoryStoreAllowAtMostIsExactUnderContention(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	res := limitertest.AtMostContention(t, []limiter.Store{store, store}, 32)
	t.Logf("units admitted: %v", res)
}

func TestMemoryStoreSettlesReservationsExactlyUnderContention(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	for _, r := range limitertest.ReserveContention(t, []limiter.Store{store, store}, 32) {
		t.Logf("%s: %d units settled of a quota of %d (bound %d)", r.Algorithm, r.Settled, r.Quota, r.Bound)
	}
}
