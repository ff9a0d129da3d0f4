package config

import (
	"time"

	"github.com/rl-exporter/rl-exporter/rlqs"
)

// RLQS configures Envoy's Rate Limit Quota Service (envoy.service.rate_limit_quota.v3), served
// on server.grpc_listen beside the rate limit service, its buckets matched by rls.config_dir's
// domain files. Each bucket's limit is divided among the Envoys watching it in proportion to
// their demand; the demands live in the store (store.type redis: shared by every replica).
type RLQS struct {
	// Enabled serves the quota service; it needs server.grpc_listen. Default false.
	Enabled bool `koanf:"enabled"`
	// Interval is how often shares are divided again and every assignment renewed. Default 1s.
	Interval time.Duration `koanf:"interval"`
	// AssignmentTTL is each assignment's assignment_time_to_live, whole seconds (Envoy reads no
	// fraction): how long an Envoy keeps its share without a renewal. Default 5s.
	AssignmentTTL time.Duration `koanf:"assignment_ttl"`
}

func (c *Config) validateRLQS(e *errs) {
	q := c.RLQS
	if !q.Enabled {
		return
	}
	if c.Server.GRPCListen == "" {
		e.add("rlqs.enabled", "needs server.grpc_listen, the listener it is served on")
	}
	if q.Interval <= 0 {
		e.add("rlqs.interval", "must be > 0, got %s", q.Interval)
	}
	if q.AssignmentTTL < time.Second || q.AssignmentTTL%time.Second != 0 {
		e.add("rlqs.assignment_ttl", "must be whole seconds, at least 1s (Envoy reads the seconds alone), got %s", q.AssignmentTTL)
	} else if q.AssignmentTTL < 2*q.Interval {
		e.add("rlqs.assignment_ttl", "must be at least twice rlqs.interval (%s), so that one late renewal does not expire it, got %s", q.Interval, q.AssignmentTTL)
	}
}

// rlqsDefaults are the quota service's defaults, package rlqs's.
func rlqsDefaults() RLQS {
	return RLQS{Interval: rlqs.DefaultInterval, AssignmentTTL: rlqs.DefaultAssignmentTTL}
}
