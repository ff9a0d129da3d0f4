package slo

import (
	"slices"
	"testing"

	"github.com/rl-exporter/rl-exporter/collector"
)

// The spec refuses a latency threshold that is not a bucket bound; the
// bounds it checks against must be the ones the exporter really exports, or
// an accepted threshold would be interpolated after all.
func TestLatencyBucketsAreTheCollectorsBuckets(t *testing.T) {
	if !slices.Equal(LatencyBuckets, collector.StoreDurationBuckets) {
		t.Errorf("slo.LatencyBuckets = %v, but the collector exports rate_limit_redis_duration_seconds with buckets %v",
			LatencyBuckets, collector.StoreDurationBuckets)
	}
}
