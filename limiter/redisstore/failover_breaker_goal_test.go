//go:build !race

package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// The Cluster failover through a Limiter with serve's breaker (a Guard,
// threshold 5, cooldown 1 s): a breaker per Cluster master opens for the
// dead master's keys alone, so the healthy masters' decisions keep
// succeeding (≤ 1 % fail) and the dead master's slots are back within 2 s
// of the promotion.
func TestGoalClusterMasterKilledBehindTheBreakerFailsOnlyItsSlots(t *testing.T) {
	guard := limiter.NewGuard(limiter.GuardConfig{Store: "redis", Breaker: limiter.BreakerConfig{Threshold: limiter.DefaultThreshold, Cooldown: limiter.DefaultCooldown}})
	r := clusterFailover(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second, PartialCoverage: true}, func(addrs []string) *redisstore.Store {
		return newStore(t, redisstore.ClientConfig{ClusterAddrs: addrs})
	}, func(st *redisstore.Store) func(context.Context, string) error {
		l, err := limiter.New(limiter.Config{Limit: limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Second}, Store: st, FailPolicy: limiter.FailOpen, Guard: guard})
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context, key string) error {
			d, err := l.Allow(ctx, key)
			if err == nil && d.Failure != limiter.FailureNone {
				return errors.New("decision failed: " + string(d.Failure))
			}
			return err
		}
	}, 100, 4*time.Second)
	if s := r.stats.healthyShare(); s > 0.01 {
		t.Errorf("%.2f%% of the decisions on healthy masters' keys failed (%d of %d), want ≤ 1%%", 100*s, r.stats.healthyFailed, r.stats.healthyTotal)
	}
	back := lostBack(r.outs, r.lost, r.promotedAfter) - r.promotedAfter
	t.Logf("the killed master's slots back %s after the promotion", back)
	if back > 2*time.Second {
		t.Errorf("the killed master's slots failed wholesale until %s after the promotion, want ≤ 2s", back)
	}
}

// The Cluster failover behind serve's breaker at its default cooldown
// (1 s), with 30 callers: the dead master's open circuit asks for the slot
// map itself, so its slots answer within 0.5 s of the replica's
// promotion, not after the cooldown's half-open probe.
func TestGoalClusterDeadSlotsAnswerWithinHalfASecondOfThePromotion(t *testing.T) {
	guard := limiter.NewGuard(limiter.GuardConfig{Store: "redis", Breaker: limiter.BreakerConfig{Threshold: limiter.DefaultThreshold, Cooldown: limiter.DefaultCooldown}})
	r := clusterFailover(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second, PartialCoverage: true}, func(addrs []string) *redisstore.Store {
		return newStore(t, redisstore.ClientConfig{ClusterAddrs: addrs})
	}, func(st *redisstore.Store) func(context.Context, string) error {
		l, err := limiter.New(limiter.Config{Limit: limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Second}, Store: st, FailPolicy: limiter.FailOpen, Guard: guard})
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context, key string) error {
			d, err := l.Allow(ctx, key)
			if err == nil && d.Failure != limiter.FailureNone {
				return errors.New("decision failed: " + string(d.Failure))
			}
			return err
		}
	}, 30, 2*time.Second)
	back := lostBack(r.outs, r.lost, r.promotedAfter) - r.promotedAfter
	t.Logf("the killed master's slots back %s after the promotion", back)
	if back > 500*time.Millisecond {
		t.Errorf("the killed master's slots failed wholesale until %s after the promotion, want ≤ 0.5s", back)
	}
}
