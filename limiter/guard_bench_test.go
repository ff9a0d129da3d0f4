package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// instantStore answers at once, so that a benchmark measures what the
// Limiter adds around a store call.
type instantStore struct{}

func (instantStore) Decide(context.Context, string, limiter.Limit, int64) (limiter.Decision, error) {
	return limiter.Decision{Allowed: true, Limit: 100, Remaining: 99}, nil
}

func (instantStore) Name() string { return "instant" }

// BenchmarkGuard measures a decision behind an open circuit (the store not
// called) and what a closed breaker and FailLocal's bookkeeping add to a
// store decision.
func BenchmarkGuard(b *testing.B) {
	lim := limiter.PerMinute(limiter.GCRA, 100)
	run := func(b *testing.B, cfg limiter.Config) {
		l, err := limiter.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			_, _ = l.Allow(ctx, "key")
		}
	}
	b.Run("store call, no breaker", func(b *testing.B) {
		run(b, limiter.Config{Limit: lim, Store: instantStore{}, Timeout: -1})
	})
	b.Run("store call, closed breaker", func(b *testing.B) {
		g := limiter.NewGuard(limiter.GuardConfig{Store: "instant", Breaker: limiter.BreakerConfig{Threshold: 5}})
		run(b, limiter.Config{Limit: lim, Store: instantStore{}, Timeout: -1, Guard: g})
	})
	b.Run("store call, closed breaker, fail_policy local", func(b *testing.B) {
		g := limiter.NewGuard(limiter.GuardConfig{Store: "instant", Breaker: limiter.BreakerConfig{Threshold: 5}})
		run(b, limiter.Config{Limit: lim, Store: instantStore{}, Timeout: -1, Guard: g, FailPolicy: limiter.FailLocal})
	})
	b.Run("open circuit, fail open", func(b *testing.B) {
		store := &failingStore{err: errStoreDown}
		g := limiter.NewGuard(limiter.GuardConfig{Store: "down", Breaker: limiter.BreakerConfig{Threshold: 1, Cooldown: time.Hour}})
		run(b, limiter.Config{Limit: lim, Store: store, Timeout: -1, Guard: g})
	})
	b.Run("open circuit, fail_policy local", func(b *testing.B) {
		store := &failingStore{err: errStoreDown}
		g := limiter.NewGuard(limiter.GuardConfig{Store: "down", Breaker: limiter.BreakerConfig{Threshold: 1, Cooldown: time.Hour}})
		run(b, limiter.Config{Limit: lim, Store: store, Timeout: -1, Guard: g, FailPolicy: limiter.FailLocal})
	})
}
