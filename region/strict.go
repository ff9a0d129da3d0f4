package region

import (
	"context"
	"fmt"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// strictStore decides every key on its home region's store: one limit
// wherever requests arrive. A limiter.Inspector and ShardedStore, safe for
// concurrent use.
type strictStore struct {
	set  *Set
	home string // pinned home, "" = hashed
}

var (
	_ limiter.Inspector    = (*strictStore)(nil)
	_ limiter.ShardedStore = (*strictStore)(nil)
)

func (s *strictStore) homeOf(key string) string {
	if s.home != "" {
		return s.home
	}
	return s.set.Home(key)
}

// Name returns "redis": the decisions are the Redis store's.
func (s *strictStore) Name() string { return "redis" }

// Shard returns "region/<home>": a Guard keeps a breaker per home.
func (s *strictStore) Shard(key string) string { return "region/" + s.homeOf(key) }

// Decide implements limiter.Store on key's home region.
func (s *strictStore) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	return s.DecideMode(ctx, key, lim, cost, limiter.ModeConsume, 0)
}

// DecideMode implements limiter.Inspector on key's home region.
func (s *strictStore) DecideMode(ctx context.Context, key string, lim limiter.Limit, cost int64, mode limiter.Mode, timeout time.Duration) (limiter.Decision, error) {
	home := s.homeOf(key)
	d, err := s.call(home, func(st *redisstore.Store) (limiter.Decision, error) {
		return st.DecideMode(ctx, key, lim, cost, mode, timeout)
	})
	if err != nil {
		return d, fmt.Errorf("region %s: %w", home, err)
	}
	return d, nil
}

// Reset implements limiter.Inspector: the key's state on its home region.
func (s *strictStore) Reset(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) error {
	home := s.homeOf(key)
	_, err := s.call(home, func(st *redisstore.Store) (limiter.Decision, error) {
		return limiter.Decision{}, st.Reset(ctx, key, lim, timeout)
	})
	if err != nil {
		return fmt.Errorf("region %s: %w", home, err)
	}
	return nil
}

// call runs f on home's store and tells the Observer where it ran (and how
// long a cross-region call took).
func (s *strictStore) call(home string, f func(*redisstore.Store) (limiter.Decision, error)) (limiter.Decision, error) {
	st := s.set.stores[home]
	if home == s.set.cfg.Local {
		s.set.obs.ObserveDecision(ModeStrict, HomeLocal)
		return f(st)
	}
	start := time.Now()
	d, err := f(st)
	s.set.obs.ObserveRTT(home, time.Since(start))
	s.set.obs.ObserveDecision(ModeStrict, HomeRemote)
	return d, err
}
