package collector

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// leaseMetrics are the series of concurrency limits.
type leaseMetrics struct {
	inFlight *prometheus.GaugeVec
	expired  *prometheus.CounterVec
}

func newLeaseMetrics() leaseMetrics {
	return leaseMetrics{
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rate_limit_in_flight",
			Help: "Requests this instance holds a concurrency lease for (algorithm concurrency); the sum over instances is the fleet's."},
			[]string{"endpoint", "plan_tier"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rate_limit_leases_expired_total",
			Help: "Concurrency leases never given back and dropped at their lease_ttl, counted by the call that found them: a crashed instance, a lost release or a request longer than lease_ttl."},
			[]string{"endpoint", "plan_tier"}),
	}
}

func (m *leaseMetrics) describe(ch chan<- *prometheus.Desc) {
	m.inFlight.Describe(ch)
	m.expired.Describe(ch)
}

func (m *leaseMetrics) collect(ch chan<- prometheus.Metric) {
	m.inFlight.Collect(ch)
	m.expired.Collect(ch)
}

var _ limiter.LeaseRecorder = (*Collector)(nil)

// RecordLeases adds inFlight to rate_limit_in_flight and expired to
// rate_limit_leases_expired_total; endpoints and tiers fold as in
// RecordDecision. Part of limiter.LeaseRecorder: safe for concurrent use.
func (c *Collector) RecordLeases(_ context.Context, endpoint, tier string, inFlight, expired int64) {
	idx := c.index.Load()
	ep, ok := idx.endpoints[endpoint]
	if !ok {
		ep = idx.other
	}
	ps := ep.tier(tier)
	if ps == nil {
		ps = ep.defaultPair
	}
	if inFlight != 0 {
		c.leases.inFlight.WithLabelValues(ep.name, ps.tier).Add(float64(inFlight))
	}
	if expired > 0 {
		c.leases.expired.WithLabelValues(ep.name, ps.tier).Add(float64(expired))
	}
}

// SetLeaseLimit sets rate_limit_limit{algorithm="concurrency"} for an
// endpoint and tier to lim.Limit and starts its lease series at zero, so
// that alerts on them see a series from the start; its refusals are
// counted under the endpoint's name (SetNamedLeaseLimit names them). Safe
// for concurrent use.
func (c *Collector) SetLeaseLimit(endpoint, tier string, lim limiter.LeaseLimit) error {
	return c.SetNamedLeaseLimit(endpoint, tier, endpoint, lim)
}

// SetNamedLeaseLimit is SetLeaseLimit with the limit label of the
// limit's refusals (rate_limit_refusals_total): its class's name. Safe for
// concurrent use.
func (c *Collector) SetNamedLeaseLimit(endpoint, tier, name string, lim limiter.LeaseLimit) error {
	if name == "" {
		name = endpoint
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tier, err := c.setLimitLocked(endpoint, tier, []limitValue{{name: name, algorithm: string(limiter.Concurrency), quota: float64(lim.Limit)}})
	if err == nil && tier != "" {
		c.leases.inFlight.WithLabelValues(endpoint, tier)
		c.leases.expired.WithLabelValues(endpoint, tier)
	}
	return err
}
