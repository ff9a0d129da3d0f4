package collector

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// RecordDecision counts one decision: rate_limit_requests_total by status,
// rate_limit_near_limit_total for allowed decisions close to the limit,
// rate_limit_refusals_total for a rejected one under each limit that refused
// (r.RefusedBy; none: the label set's one limit, see SetLimits),
// the fail-open and fail-closed counters by reason (limiter.ErrorKind of
// r.Err), rate_limit_degraded_total for a decision on the local share
// (Decision.Failure FailureLocal), the leaky-bucket delay, and the key of a
// rejected, shadow-rejected or penalized decision in the top-limited sketch. A
// cancelled request (StatusCanceled or FailureCanceled) is counted in
// rate_limit_canceled_total alone.
//
// An endpoint that is not configured (or beyond the cardinality cap) counts
// as "other", a plan tier that is not configured as the default tier, and
// rate_limit_labels_folded_total says how often. A Status outside
// limiter.AllStatuses is derived from r.Decision.
//
// Part of limiter.Recorder: safe for concurrent use; for configured label
// sets it takes no lock and allocates nothing (rejections take a short
// per-shard lock in the sketch).
func (c *Collector) RecordDecision(_ context.Context, r limiter.Record) {
	ep, ok := c.index.Load().endpoints[r.Endpoint]
	var ps *pairSeries
	if ok {
		ps = ep.tier(r.PlanTier)
	}
	if ps == nil {
		ep, ps = c.fold(r.Endpoint, r.PlanTier)
	}
	if r.Status == limiter.StatusCanceled || r.Decision.Failure == limiter.FailureCanceled {
		// The caller went away: neither a decision it waited for nor a
		// store failure.
		ep.fails.canceled.Add(1)
		return
	}
	s, i := statusOf(r.Status, r.Decision)
	ps.requests[i].Add(1)
	if r.Decision.Failure == limiter.FailureLocal {
		ep.fails.degraded.Add(1)
	}
	switch s {
	case limiter.StatusAllowed:
		d := r.Decision
		if d.Limit > 0 && float64(d.Remaining) < c.nearShare*float64(d.Limit) {
			ps.nearLimit.Add(1)
		}
		if d.Delay > 0 {
			ep.delay.Observe(d.Delay.Seconds())
		}
	case limiter.StatusRejected, limiter.StatusShadowRejected, limiter.StatusPenalized:
		if s == limiter.StatusRejected {
			ps.countRefusals(r.RefusedBy)
		}
		if r.Key != "" {
			c.top.add(r.Key, ep.name, ps.tier)
		}
	case limiter.StatusFailOpen:
		ep.fails.open[reasonIndex(r.Err)].Add(1)
	case limiter.StatusFailClosed:
		ep.fails.closed[reasonIndex(r.Err)].Add(1)
	}
}

// fold resolves a label set that is not configured as such: an unknown
// endpoint becomes "other", an unknown or empty tier the default tier.
func (c *Collector) fold(endpoint, tier string) (*endpointSeries, *pairSeries) {
	idx := c.index.Load()
	ep, ok := idx.endpoints[endpoint]
	if !ok {
		ep = idx.other
		if _, capped := idx.capped[endpoint]; capped {
			c.folded[foldEndpointCap].Add(1)
		} else {
			c.folded[foldEndpointUnconfigured].Add(1)
		}
	}
	ps := ep.tier(tier)
	if ps == nil {
		ps = ep.defaultPair
		if tier != "" {
			c.folded[foldTierUnconfigured].Add(1)
		}
	}
	return ep, ps
}

// statusOf is the status r is counted under and its counter's index: s when it has one, else
// derived from d.
func statusOf(s limiter.Status, d limiter.Decision) (limiter.Status, int) {
	if i, ok := s.Index(); ok {
		return s, i
	}
	switch {
	case d.Failure == limiter.FailureOpen:
		s = limiter.StatusFailOpen
	case d.Failure == limiter.FailureClosed:
		s = limiter.StatusFailClosed
	case d.Allowed:
		s = limiter.StatusAllowed
	default:
		s = limiter.StatusRejected
	}
	i, _ := s.Index()
	return s, i
}

func reasonIndex(err error) int {
	switch limiter.ErrorKind(err) {
	case "timeout":
		return reasonTimeout
	case "circuit_open":
		return reasonCircuitOpen
	}
	return reasonError
}

// ObserveStore observes one store call in rate_limit_redis_duration_seconds
// (operation: the algorithm; an unknown one counts as "other"), timed-out
// and failed calls included, and counts a failed call in
// rate_limit_store_errors_total by kind. With Config.Exemplars, a sampled
// span in ctx makes its trace id the observation's exemplar.
//
// Part of limiter.Observer: safe for concurrent use, lock-free.
func (c *Collector) ObserveStore(ctx context.Context, operation string, elapsed time.Duration, err error) {
	obs, ok := c.storeObs[operation]
	if !ok {
		obs = c.storeDuration.WithLabelValues(OtherEndpoint)
	}
	v := elapsed.Seconds()
	if c.exemplars {
		if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
			obs.(prometheus.ExemplarObserver).ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			c.countStoreError(err)
			return
		}
	}
	obs.Observe(v)
	c.countStoreError(err)
}

// ObserveUnreplicated counts n decisions whose Redis write no replica
// acknowledged in time in rate_limit_redis_unreplicated_writes_total,
// whatever the WAIT's own error. Part of redisstore.ReplicationObserver:
// safe for concurrent use, lock-free.
func (c *Collector) ObserveUnreplicated(n int, _ error) {
	if n > 0 {
		c.unreplicated.Add(uint64(n))
	}
}

// ObserveFailoverUnconfirmed counts n decisions a Sentinel failover may
// have left on the demoted primary in rate_limit_failover_unconfirmed_total.
// Part of redisstore.FailoverObserver: safe for concurrent use, lock-free.
func (c *Collector) ObserveFailoverUnconfirmed(n int) {
	if n > 0 {
		c.unconfirmed.Add(uint64(n))
	}
}

func (c *Collector) countStoreError(err error) {
	if err == nil {
		return
	}
	if limiter.ErrorKind(err) == "timeout" {
		c.storeErrors[0].Add(1)
	} else {
		c.storeErrors[1].Add(1)
	}
}
