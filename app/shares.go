package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// shareStores are the classes' local shares on the Redis store, one Store per class and
// interval, made on first use and kept across reloads, so that a reload keeps the chunks in
// hand; a class's keys never meet another's (they start with its name), so nothing is lost by
// not sharing a Store between classes, and each counts and logs under its class. A Store is
// never dropped: one a reload no longer uses gives its idle chunks back at its sweeps, and it
// cannot be closed while a decision of the policy before the reload may still reach it. All
// are closed before the Redis store, so that every chunk's unused units go back. Safe for
// concurrent use.
type shareStores struct {
	redis  limiter.Store // the opened store; its shares need it to be a Reserver
	logger *slog.Logger  // serve's; each Store's names its class
	mu     sync.Mutex
	byCl   map[string]map[time.Duration]*shares.Store // by class, then interval
	// inForce are the classes with shares in the config in force, whose counts are exported.
	inForce []string
}

// sharedStore is a class's store with shares: decisions from the shares, penalties (when the
// class has a penalty box) on the Redis store beside them.
type sharedStore struct {
	*shares.Store
	limiter.PenaltyStore
}

// store returns class's store of shares of interval, made once.
func (s *shareStores) store(class string, interval time.Duration) (limiter.Store, error) {
	rs, ok := s.redis.(limiter.Reserver)
	if !ok {
		return nil, fmt.Errorf("shares need store.type redis; the %s store holds no reservations", s.redis.Name())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.byCl[class][interval]
	if st == nil {
		var err error
		if st, err = shares.New(shares.Config{Store: rs, Interval: interval, Logger: s.logger.With(slog.String("class", class))}); err != nil {
			return nil, err
		}
		if s.byCl == nil {
			s.byCl = map[string]map[time.Duration]*shares.Store{}
		}
		if s.byCl[class] == nil {
			s.byCl[class] = map[time.Duration]*shares.Store{}
		}
		s.byCl[class][interval] = st
	}
	ps, _ := limiter.PenaltiesOf(s.redis) // nil: the policy refuses a penalty box on it
	return sharedStore{Store: st, PenaltyStore: ps}, nil
}

// setShareStores gives each class of pc with shares enabled in cfg its store of shares (the
// config refuses shares with a region mode, which would set TierStores). The counts exported
// stay those of the config in force until use.
func (s *shareStores) setShareStores(cfg *config.Config, pc *httplimit.PolicyConfig) error {
	for i, c := range pc.Classes {
		sh := cfg.Classes[c.Name].Shares
		if !sh.Enabled {
			continue
		}
		st, err := s.store(c.Name, sh.Interval)
		if err != nil {
			return fmt.Errorf("classes.%s.shares: %w", c.Name, err)
		}
		c.Store = st
		pc.Classes[i] = c
	}
	return nil
}

// use records pc, prepared by setShareStores, as the policy in force: its classes with shares
// are those whose counts stats returns.
func (s *shareStores) use(pc httplimit.PolicyConfig) {
	var in []string
	for _, c := range pc.Classes {
		if _, ok := c.Store.(sharedStore); ok {
			in = append(in, c.Name)
		}
	}
	s.mu.Lock()
	s.inForce = in
	s.mu.Unlock()
}

// Close gives every chunk back, for at most asyncFlushTimeout in all.
func (s *shareStores) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), asyncFlushTimeout)
	defer cancel()
	var errs []error
	for class, byIv := range s.byCl {
		for _, st := range byIv {
			if err := st.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("classes.%s.shares: %w", class, err))
			}
		}
	}
	return errors.Join(errs...)
}

// stats returns the counts of each class with shares in the config in force, added up over
// the stores made for it so far (one per interval it had), so that each sum only grows, also
// across a reload that takes its shares away and one that gives them back.
func (s *shareStores) stats() map[string]collector.SharesStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]collector.SharesStats, len(s.inForce))
	for _, class := range s.inForce {
		var sum collector.SharesStats
		for _, st := range s.byCl[class] {
			c := st.Stats()
			sum.Reservations += uint64(c.Reserves)
			sum.UnitsTaken += uint64(c.Taken)
			sum.UnitsReturned += uint64(c.Returned)
			sum.GiveBacks += uint64(c.Settles)
			sum.GiveBackErrors += uint64(c.SettleErrors)
			sum.Plain += uint64(c.Plain)
		}
		out[class] = sum
	}
	return out
}

// SharesMetrics returns rate_limit_shares_reservations_total, rate_limit_shares_units_total,
// rate_limit_shares_give_backs_total, rate_limit_shares_give_back_errors_total and
// rate_limit_shares_plain_decisions_total, by class, as a prometheus.Collector for the
// /metrics registry. It collects the classes with shares.enabled in the config in force: a
// class given shares, at start-up or on a reload, shows its series at zero, and one a reload
// takes them from leaves. Safe for concurrent use.
func (b *Built) SharesMetrics() prometheus.Collector {
	m, err := collector.NewShares(collector.SharesConfig{Stats: b.shares.stats})
	if err != nil { // Stats is set: NewShares cannot fail
		return noMetrics{}
	}
	return m
}
