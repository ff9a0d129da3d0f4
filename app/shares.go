package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// shareStores are the classes' local shares on the Redis store, one Store per interval, made
// on first use and kept across reloads, so that a reload keeps the chunks in hand. Closed
// before the Redis store, so that every chunk's unused units go back. Safe for concurrent use.
type shareStores struct {
	redis limiter.Store // the opened store; its shares need it to be a Reserver
	mu    sync.Mutex
	byIv  map[time.Duration]*shares.Store
}

// sharedStore is a class's store with shares: decisions from the shares, penalties (when the
// class has a penalty box) on the Redis store beside them.
type sharedStore struct {
	*shares.Store
	limiter.PenaltyStore
}

// store returns the store of shares of interval, made once.
func (s *shareStores) store(interval time.Duration) (limiter.Store, error) {
	rs, ok := s.redis.(limiter.Reserver)
	if !ok {
		return nil, fmt.Errorf("shares need store.type redis; the %s store holds no reservations", s.redis.Name())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.byIv[interval]
	if st == nil {
		var err error
		if st, err = shares.New(shares.Config{Store: rs, Interval: interval}); err != nil {
			return nil, err
		}
		if s.byIv == nil {
			s.byIv = map[time.Duration]*shares.Store{}
		}
		s.byIv[interval] = st
	}
	ps, _ := limiter.PenaltiesOf(s.redis) // nil: the policy refuses a penalty box on it
	return sharedStore{Store: st, PenaltyStore: ps}, nil
}

// setShareStores gives each class of pc with shares enabled in cfg its store of shares (the
// config refuses shares with a region mode, which would set TierStores).
func (s *shareStores) setShareStores(cfg *config.Config, pc *httplimit.PolicyConfig) error {
	for i, c := range pc.Classes {
		sh := cfg.Classes[c.Name].Shares
		if !sh.Enabled {
			continue
		}
		st, err := s.store(sh.Interval)
		if err != nil {
			return fmt.Errorf("classes.%s.shares: %w", c.Name, err)
		}
		c.Store = st
		pc.Classes[i] = c
	}
	return nil
}

// Close gives every chunk back, for at most asyncFlushTimeout in all.
func (s *shareStores) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), asyncFlushTimeout)
	defer cancel()
	var errs []error
	for _, st := range s.byIv {
		errs = append(errs, st.Close(ctx))
	}
	return errors.Join(errs...)
}

// stats adds up the counts of every store of shares made so far, ok false while there is none.
// A store is never dropped, so that each sum only grows.
func (s *shareStores) stats() (out collector.SharesStats, ok bool) {
	s.mu.Lock()
	stores := slices.Collect(maps.Values(s.byIv))
	s.mu.Unlock()
	for _, st := range stores {
		c := st.Stats()
		out.Reservations += uint64(c.Reserves)
		out.UnitsTaken += uint64(c.Taken)
		out.UnitsReturned += uint64(c.Returned)
		out.GiveBacks += uint64(c.Settles)
		out.GiveBackErrors += uint64(c.SettleErrors)
		out.Plain += uint64(c.Plain)
	}
	return out, len(stores) > 0
}

// SharesMetrics returns rate_limit_shares_reservations_total, rate_limit_shares_units_total,
// rate_limit_shares_give_backs_total, rate_limit_shares_give_back_errors_total and
// rate_limit_shares_plain_decisions_total, summed over the classes' stores of shares, as a
// prometheus.Collector for the /metrics registry. It collects nothing until a class has
// shares.enabled, at start-up or on a reload, and counts the stores a reload makes too. Safe
// for concurrent use.
func (b *Built) SharesMetrics() prometheus.Collector {
	m, err := collector.NewShares(collector.SharesConfig{Stats: b.shares.stats})
	if err != nil { // Stats is set: NewShares cannot fail
		return noMetrics{}
	}
	return m
}
