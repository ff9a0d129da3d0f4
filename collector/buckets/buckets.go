// Package buckets holds the classic histogram bucket bounds of
// rl-exporter's metrics: the collector exports its histograms with them,
// and the SLO model writes its latency queries against the same bounds, so
// a threshold the spec accepts is always a bound the exporter really has.
// It imports nothing, so the rule generator reads it without linking the
// Prometheus client.
package buckets

// StoreDuration returns the bucket bounds, in seconds, of
// rate_limit_redis_duration_seconds (store call latency), in increasing
// order. Each call returns a new slice, which the caller may keep or change.
func StoreDuration() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1}
}

// Delay returns the bucket bounds, in seconds, of rate_limit_delay_seconds
// (how long a leaky_bucket admission was held), in increasing order. Each
// call returns a new slice.
func Delay() []float64 {
	return []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// RegionRTT returns the bucket bounds, in seconds, of
// rate_limit_region_rtt_seconds (a decision made on a peer region's
// Redis: one cross-region round trip, from a few milliseconds between
// nearby regions to hundreds across the globe), in increasing order. Each
// call returns a new slice.
func RegionRTT() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1}
}
