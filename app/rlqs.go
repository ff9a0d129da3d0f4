package app

import (
	"log/slog"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/quota"
	"github.com/rl-exporter/rl-exporter/rlqs"
	"github.com/rl-exporter/rl-exporter/rls"
)

// newRLQS builds the rate limit quota service of rlqs.enabled on rules; nil when it is off. Its
// demands live in memory: one replica's Envoys share each limit.
func (b *Built) newRLQS(cfg *config.Config, rules *rls.Rules, logger *slog.Logger) (*rlqs.Service, error) {
	if !cfg.RLQS.Enabled {
		return nil, nil
	}
	return rlqs.New(rlqs.Config{
		Store: &quota.MemoryStore{}, Interval: cfg.RLQS.Interval, AssignmentTTL: cfg.RLQS.AssignmentTTL,
		MaxBucketEntries: cfg.RLS.MaxEntries, Logger: logger,
	}, rules)
}
