package app

import (
	"cmp"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/collector"
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

// QuotaMetrics returns rate_limit_quota_share, rate_limit_rlqs_streams,
// rate_limit_rlqs_assignments_expired_total and rate_limit_rlqs_store_errors_total as a
// prometheus.Collector for the /metrics registry; it collects nothing without rlqs.enabled.
// Safe for concurrent use.
func (b *Built) QuotaMetrics() prometheus.Collector {
	b.mu.Lock()
	g := b.grpc
	b.mu.Unlock()
	if g == nil || g.quota == nil {
		return noMetrics{}
	}
	m, err := collector.NewQuota(collector.QuotaConfig{Stats: func() collector.QuotaStats { return quotaStats(g.quota.Stats()) }})
	if err != nil { // Stats is set: NewQuota cannot fail
		return noMetrics{}
	}
	return m
}

// quotaStats is the service's snapshot as the collector labels it: the buckets of no limited
// rule under endpoint "other", as a decision of no configured endpoint.
func quotaStats(s rlqs.Stats) collector.QuotaStats {
	endpoint := func(path string) string { return cmp.Or(path, "other") }
	out := collector.QuotaStats{Streams: s.Streams, StoreErrors: s.StoreErrors,
		Rules: make(map[string]collector.QuotaRuleStats, len(s.Rules)), Expired: make(map[string]uint64, len(s.Expired))}
	for p, r := range s.Rules {
		out.Rules[endpoint(p)] = collector.QuotaRuleStats{Demand: r.Demand, Assigned: r.Assigned}
	}
	for p, n := range s.Expired {
		out.Expired[endpoint(p)] = n
	}
	return out
}

type noMetrics struct{}

func (noMetrics) Describe(chan<- *prometheus.Desc) {}
func (noMetrics) Collect(chan<- prometheus.Metric) {}
