package app

import (
	"cmp"
	"log/slog"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
	"github.com/rl-exporter/rl-exporter/quota"
	"github.com/rl-exporter/rl-exporter/quota/redisquota"
	"github.com/rl-exporter/rl-exporter/rlqs"
	"github.com/rl-exporter/rl-exporter/rls"
)

// newRLQS builds the rate limit quota service of rlqs.enabled on rules; nil when it is off. On
// the Redis store the demands live in Redis (<prefix>:quota:*), so that every replica divides a
// limit among the Envoys of all of them; on the memory store, among its own.
func (b *Built) newRLQS(cfg *config.Config, rules *rls.Rules, logger *slog.Logger) (*rlqs.Service, error) {
	if !cfg.RLQS.Enabled {
		return nil, nil
	}
	var store quota.Store = &quota.MemoryStore{}
	if b.rdb != nil {
		store = redisquota.New(b.rdb, cmp.Or(cfg.Store.Redis.Prefix, redisstore.DefaultPrefix))
	}
	return rlqs.New(rlqs.Config{
		Store: store, Interval: cfg.RLQS.Interval, AssignmentTTL: cfg.RLQS.AssignmentTTL,
		MaxBucketEntries: cfg.RLS.MaxEntries, Logger: logger,
	}, rules)
}
