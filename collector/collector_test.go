package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func newTestCollector(t testing.TB, cfg Config) *Collector {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// gather returns the metric families of the collector's registry by name.
func gather(t testing.TB, c *Collector) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// find returns the metric of family name whose labels include want, and
// fails unless exactly one matches.
func find(t testing.TB, mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	var found []*dto.Metric
	for _, m := range mfs[name].GetMetric() {
		ls := labelsOf(m)
		ok := true
		for k, v := range want {
			if ls[k] != v {
				ok = false
				break
			}
		}
		if ok {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series match, want 1", name, want, len(found))
	}
	return found[0]
}

func counter(t testing.TB, c *Collector, name string, labels map[string]string) float64 {
	t.Helper()
	return find(t, gather(t, c), name, labels).GetCounter().GetValue()
}

func rec(endpoint, tier string, status limiter.Status) limiter.Record {
	d := limiter.Decision{Limit: 100, Remaining: 50}
	switch status {
	case limiter.StatusAllowed, limiter.StatusShadowRejected:
		d.Allowed = true
	case limiter.StatusFailOpen:
		d.Allowed, d.Failure = true, limiter.FailureOpen
	case limiter.StatusFailClosed:
		d.Failure = limiter.FailureClosed
	}
	if status == limiter.StatusRejected {
		d.Remaining = 0
	}
	return limiter.Record{Endpoint: endpoint, PlanTier: tier, Key: "client-1", Limit: limiter.PerSecond(limiter.GCRA, 100), Status: status, Decision: d}
}

func TestFirstScrapeHasEverySeriesAtZero(t *testing.T) {
	c := newTestCollector(t, Config{
		Endpoints: []string{"/v1/search"}, Tiers: []string{"free"}, DefaultTier: "free",
		Store: "redis", Version: "1.2.3", Revision: "abcdef", GoVersion: "go1.26.8",
	})
	expected := `
# HELP rate_limit_requests_total Rate-limit decisions, exactly one per request, by outcome (allowed, rejected, shadow_rejected, fail_open, fail_closed, penalized).
# TYPE rate_limit_requests_total counter
rate_limit_requests_total{endpoint="/v1/search",plan_tier="free",status="allowed"} 0
rate_limit_requests_total{endpoint="/v1/search",plan_tier="free",status="fail_closed"} 0
rate_limit_requests_total{endpoint="/v1/search",plan_tier="free",status="fail_open"} 0
rate_limit_requests_total{endpoint="/v1/search",plan_tier="free",status="penalized"} 0
rate_limit_requests_total{endpoint="/v1/search",plan_tier="free",status="rejected"} 0
rate_limit_requests_total{endpoint="/v1/search",plan_tier="free",status="shadow_rejected"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="allowed"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="fail_closed"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="fail_open"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="penalized"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="rejected"} 0
rate_limit_requests_total{endpoint="other",plan_tier="free",status="shadow_rejected"} 0
# HELP rate_limit_fail_open_total Requests let through because the store failed, by reason.
# TYPE rate_limit_fail_open_total counter
rate_limit_fail_open_total{endpoint="/v1/search",reason="circuit_open"} 0
rate_limit_fail_open_total{endpoint="/v1/search",reason="error"} 0
rate_limit_fail_open_total{endpoint="/v1/search",reason="timeout"} 0
rate_limit_fail_open_total{endpoint="other",reason="circuit_open"} 0
rate_limit_fail_open_total{endpoint="other",reason="error"} 0
rate_limit_fail_open_total{endpoint="other",reason="timeout"} 0
# HELP rate_limit_fail_closed_total Requests refused with 503 because the store failed, by reason.
# TYPE rate_limit_fail_closed_total counter
rate_limit_fail_closed_total{endpoint="/v1/search",reason="circuit_open"} 0
rate_limit_fail_closed_total{endpoint="/v1/search",reason="error"} 0
rate_limit_fail_closed_total{endpoint="/v1/search",reason="timeout"} 0
rate_limit_fail_closed_total{endpoint="other",reason="circuit_open"} 0
rate_limit_fail_closed_total{endpoint="other",reason="error"} 0
rate_limit_fail_closed_total{endpoint="other",reason="timeout"} 0
# HELP rate_limit_store_errors_total Store calls that failed, by kind.
# TYPE rate_limit_store_errors_total counter
rate_limit_store_errors_total{kind="error",store="redis"} 0
rate_limit_store_errors_total{kind="timeout",store="redis"} 0
# HELP rate_limit_near_limit_total Allowed decisions that left less than the configured share of the limit.
# TYPE rate_limit_near_limit_total counter
rate_limit_near_limit_total{endpoint="/v1/search",plan_tier="free"} 0
rate_limit_near_limit_total{endpoint="other",plan_tier="free"} 0
# HELP rl_exporter_build_info A constant 1 labelled with the version, revision and Go version of rl-exporter.
# TYPE rl_exporter_build_info gauge
rl_exporter_build_info{goversion="go1.26.8",revision="abcdef",version="1.2.3"} 1
# HELP rate_limit_redis_duration_seconds Time each decision waited on the store (Redis or memory), timeouts included, by operation (the algorithm).
# TYPE rate_limit_redis_duration_seconds histogram
rate_limit_redis_duration_seconds_bucket{operation="gcra",le="0.001"} 0
rate_limit_redis_duration_seconds_bucket{operation="gcra",le="0.005"} 0
rate_limit_redis_duration_seconds_bucket{operation="gcra",le="0.01"} 0
rate_limit_redis_duration_seconds_bucket{operation="gcra",le="0.025"} 0
rate_limit_redis_duration_seconds_bucket{operation="gcra",le="0.05"} 0
rate_limit_redis_duration_seconds_bucket{operation="gcra",le="0.1"} 0
rate_limit_redis_duration_seconds_bucket{operation="gcra",le="+Inf"} 0
rate_limit_redis_duration_seconds_sum{operation="gcra"} 0
rate_limit_redis_duration_seconds_count{operation="gcra"} 0
`
	// The histogram exists for every algorithm; compare one in full and
	// count the others.
	names := []string{"rate_limit_requests_total", "rate_limit_fail_open_total", "rate_limit_fail_closed_total",
		"rate_limit_store_errors_total", "rate_limit_near_limit_total", "rl_exporter_build_info"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected), names...); err != nil {
		t.Error(err)
	}
	mfs := gather(t, c)
	hist := mfs["rate_limit_redis_duration_seconds"]
	if got := len(hist.GetMetric()); got != limiter.NumAlgorithms+1 {
		t.Errorf("rate_limit_redis_duration_seconds has %d series, want one per algorithm and one for concurrency leases (%d)", got, limiter.NumAlgorithms+1)
	}
	h := find(t, mfs, "rate_limit_redis_duration_seconds", map[string]string{"operation": "gcra"}).GetHistogram()
	var bounds []float64
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if !slices.Equal(bounds, []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1}) {
		t.Errorf("classic buckets = %v, want exactly 0.001 0.005 0.01 0.025 0.05 0.1", bounds)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "rate_limit_delay_seconds"} {
		if mfs[name] == nil {
			t.Errorf("%s is missing from the first scrape", name)
		}
	}
	if mfs["rate_limit_limit"] != nil {
		t.Errorf("rate_limit_limit has series before any limit was set")
	}
}

func TestExpositionPassesLint(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/a", "/b"}, Tiers: []string{"free", "pro"}, NativeHistograms: true})
	ctx := context.Background()
	c.RecordDecision(ctx, rec("/a", "free", limiter.StatusAllowed))
	c.ObserveStore(ctx, "gcra", 3*time.Millisecond, nil)
	if err := c.SetLimit("/a", "pro", limiter.PerMinute(limiter.SlidingWindow, 600)); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCountsSplitByEndpointAndTier(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/v1/search", "/v1/users/{id}"}, Tiers: []string{"free", "pro"}})
	ctx := context.Background()
	type cell struct {
		endpoint, tier string
		n, k           int // decisions, of which rejected
	}
	cells := []cell{
		{"/v1/search", "free", 100, 37},
		{"/v1/search", "pro", 50, 0},
		{"/v1/users/{id}", "free", 10, 10},
		{"/v1/users/{id}", "pro", 1000, 1},
	}
	for _, cl := range cells {
		for i := range cl.n {
			s := limiter.StatusAllowed
			if i < cl.k {
				s = limiter.StatusRejected
			}
			c.RecordDecision(ctx, rec(cl.endpoint, cl.tier, s))
		}
	}
	for _, cl := range cells {
		l := map[string]string{"endpoint": cl.endpoint, "plan_tier": cl.tier}
		l["status"] = "allowed"
		if got := counter(t, c, "rate_limit_requests_total", l); got != float64(cl.n-cl.k) {
			t.Errorf("%s %s allowed = %v, want %d", cl.endpoint, cl.tier, got, cl.n-cl.k)
		}
		l["status"] = "rejected"
		if got := counter(t, c, "rate_limit_requests_total", l); got != float64(cl.k) {
			t.Errorf("%s %s rejected = %v, want %d", cl.endpoint, cl.tier, got, cl.k)
		}
	}
	var total float64
	for _, m := range gather(t, c)["rate_limit_requests_total"].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	if total != 1160 {
		t.Errorf("sum of rate_limit_requests_total = %v, want 1160 (one per decision)", total)
	}
}

func TestFailuresAreCountedByReason(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/x"}})
	ctx := context.Background()
	errs := map[string]error{
		"timeout":      fmt.Errorf("redis store: %w", context.DeadlineExceeded),
		"error":        errors.New("redis store: connection refused"),
		"circuit_open": fmt.Errorf("redis store: %w", limiter.ErrCircuitOpen),
	}
	counts := map[string]int{"timeout": 7, "error": 3, "circuit_open": 2}
	for reason, n := range counts {
		for range n {
			r := rec("/x", "", limiter.StatusFailOpen)
			r.Err = errs[reason]
			c.RecordDecision(ctx, r)
		}
		r := rec("/x", "", limiter.StatusFailClosed)
		r.Err = errs[reason]
		c.RecordDecision(ctx, r)
	}
	for reason, n := range counts {
		if got := counter(t, c, "rate_limit_fail_open_total", map[string]string{"endpoint": "/x", "reason": reason}); got != float64(n) {
			t.Errorf("fail_open reason=%s = %v, want %d", reason, got, n)
		}
		if got := counter(t, c, "rate_limit_fail_closed_total", map[string]string{"endpoint": "/x", "reason": reason}); got != 1 {
			t.Errorf("fail_closed reason=%s = %v, want 1", reason, got)
		}
	}
	if got := counter(t, c, "rate_limit_requests_total", map[string]string{"endpoint": "/x", "plan_tier": "default", "status": "fail_open"}); got != 12 {
		t.Errorf("requests status=fail_open = %v, want 12 (the same events as rate_limit_fail_open_total)", got)
	}
	if got := counter(t, c, "rate_limit_requests_total", map[string]string{"endpoint": "/x", "plan_tier": "default", "status": "fail_closed"}); got != 3 {
		t.Errorf("requests status=fail_closed = %v, want 3", got)
	}
}

func TestOneHistogramObservationPerStoreCall(t *testing.T) {
	c := newTestCollector(t, Config{Store: "redis"})
	ctx := context.Background()
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	calls := []struct {
		op      string
		elapsed time.Duration
		err     error
	}{
		{"token_bucket", 500 * time.Microsecond, nil},
		{"token_bucket", 3 * time.Millisecond, nil},
		{"token_bucket", 150 * time.Millisecond, timeout}, // a timed-out call shows in the tail
		{"gcra", 20 * time.Millisecond, errors.New("READONLY You can't write against a read only replica")},
		{"no_such_op", time.Millisecond, nil},
	}
	for _, cl := range calls {
		c.ObserveStore(ctx, cl.op, cl.elapsed, cl.err)
	}
	mfs := gather(t, c)
	tb := find(t, mfs, "rate_limit_redis_duration_seconds", map[string]string{"operation": "token_bucket"}).GetHistogram()
	if tb.GetSampleCount() != 3 {
		t.Errorf("token_bucket sample count = %d, want 3", tb.GetSampleCount())
	}
	wantCum := []uint64{1, 2, 2, 2, 2, 2} // le 0.001 … 0.1; the 150ms call is only in +Inf
	for i, b := range tb.GetBucket() {
		if b.GetCumulativeCount() != wantCum[i] {
			t.Errorf("token_bucket bucket le=%v = %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), wantCum[i])
		}
	}
	if got := find(t, mfs, "rate_limit_redis_duration_seconds", map[string]string{"operation": "gcra"}).GetHistogram().GetSampleCount(); got != 1 {
		t.Errorf("gcra sample count = %d, want 1", got)
	}
	if got := find(t, mfs, "rate_limit_redis_duration_seconds", map[string]string{"operation": "other"}).GetHistogram().GetSampleCount(); got != 1 {
		t.Errorf("unknown operation counted under other: %d, want 1", got)
	}
	if got := find(t, mfs, "rate_limit_store_errors_total", map[string]string{"store": "redis", "kind": "timeout"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("store errors kind=timeout = %v, want 1", got)
	}
	if got := find(t, mfs, "rate_limit_store_errors_total", map[string]string{"store": "redis", "kind": "error"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("store errors kind=error = %v, want 1", got)
	}
}

func TestNearLimitCountsAllowedDecisionsBelowTheShare(t *testing.T) {
	cases := []struct {
		name      string
		share     float64
		limit     int64
		remaining int64
		status    limiter.Status
		near      bool
	}{
		{"one left of ten is near the limit at the default 20%", 0, 10, 1, limiter.StatusAllowed, true},
		{"two left of ten is not below 20%", 0, 10, 2, limiter.StatusAllowed, false},
		{"none left is near the limit", 0, 10, 0, limiter.StatusAllowed, true},
		{"half left is near at a 60% share", 0.6, 10, 5, limiter.StatusAllowed, true},
		{"a rejection is not counted as near the limit", 0, 10, 0, limiter.StatusRejected, false},
		{"a fail-open decision is not counted", 0, 10, 0, limiter.StatusFailOpen, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCollector(t, Config{Endpoints: []string{"/x"}, NearLimitShare: tc.share})
			r := rec("/x", "", tc.status)
			r.Decision.Limit, r.Decision.Remaining = tc.limit, tc.remaining
			c.RecordDecision(context.Background(), r)
			want := 0.0
			if tc.near {
				want = 1
			}
			if got := counter(t, c, "rate_limit_near_limit_total", map[string]string{"endpoint": "/x", "plan_tier": "default"}); got != want {
				t.Errorf("near limit = %v, want %v", got, want)
			}
		})
	}
}

func TestLeakyBucketDelayIsObserved(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/x"}})
	r := rec("/x", "", limiter.StatusAllowed)
	c.RecordDecision(context.Background(), r) // no delay: not observed
	r.Decision.Delay = 300 * time.Millisecond
	c.RecordDecision(context.Background(), r)
	h := find(t, gather(t, c), "rate_limit_delay_seconds", map[string]string{"endpoint": "/x"}).GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.3 {
		t.Errorf("delay histogram count=%d sum=%v, want 1 and 0.3", h.GetSampleCount(), h.GetSampleSum())
	}
}

func TestUnconfiguredLabelsFold(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/known"}, Tiers: []string{"free", "pro"}, DefaultTier: "free"})
	ctx := context.Background()
	c.RecordDecision(ctx, rec("/users/12345", "pro", limiter.StatusAllowed))  // raw path → other
	c.RecordDecision(ctx, rec("/known", "enterprise", limiter.StatusAllowed)) // unknown tier → free
	c.RecordDecision(ctx, rec("/known", "", limiter.StatusAllowed))           // no tier → free, not a fold
	c.RecordDecision(ctx, rec("other", "pro", limiter.StatusAllowed))         // "other" itself is not a fold
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"rate_limit_requests_total", map[string]string{"endpoint": "other", "plan_tier": "pro", "status": "allowed"}, 2},
		{"rate_limit_requests_total", map[string]string{"endpoint": "/known", "plan_tier": "free", "status": "allowed"}, 2},
		{"rate_limit_labels_folded_total", map[string]string{"label": "endpoint", "reason": "unconfigured"}, 1},
		{"rate_limit_labels_folded_total", map[string]string{"label": "plan_tier", "reason": "unconfigured"}, 1},
		{"rate_limit_labels_folded_total", map[string]string{"label": "endpoint", "reason": "cardinality_cap"}, 0},
	}
	for _, ch := range checks {
		if got := counter(t, c, ch.name, ch.labels); got != ch.want {
			t.Errorf("%s%v = %v, want %v", ch.name, ch.labels, got, ch.want)
		}
	}
}

func TestCardinalityStaysWithinTheCap(t *testing.T) {
	const maxSets = 30
	var endpoints []string
	for i := range 50 {
		endpoints = append(endpoints, fmt.Sprintf("/api/%d", i))
	}
	c := newTestCollector(t, Config{Endpoints: endpoints, Tiers: []string{"free", "pro", "enterprise"}, DefaultTier: "free", MaxLabelSets: maxSets})
	ctx := context.Background()
	const raw = 100_000
	for i := range raw {
		c.RecordDecision(ctx, rec(fmt.Sprintf("/users/%d/orders", i), fmt.Sprintf("tier-%d", i), limiter.StatusRejected))
	}
	c.RecordDecision(ctx, rec("/api/49", "pro", limiter.StatusAllowed)) // configured, beyond the cap
	c.RecordDecision(ctx, rec("/api/0", "pro", limiter.StatusAllowed))  // configured, within the cap

	mfs := gather(t, c)
	sets := map[string]bool{}
	for _, m := range mfs["rate_limit_requests_total"].GetMetric() {
		ls := labelsOf(m)
		sets[ls["endpoint"]+"\x00"+ls["plan_tier"]] = true
	}
	if len(sets) > maxSets {
		t.Errorf("%d (endpoint, plan_tier) label sets, want at most the cap %d", len(sets), maxSets)
	}
	if n := len(mfs["rate_limit_requests_total"].GetMetric()); n > maxSets*limiter.NumStatuses {
		t.Errorf("%d rate_limit_requests_total series, want at most %d", n, maxSets*limiter.NumStatuses)
	}
	if got := find(t, mfs, "rate_limit_requests_total", map[string]string{"endpoint": "other", "plan_tier": "free", "status": "rejected"}).GetCounter().GetValue(); got != raw {
		t.Errorf("other/free rejected = %v, want %d", got, raw)
	}
	if got := find(t, mfs, "rate_limit_requests_total", map[string]string{"endpoint": "other", "plan_tier": "pro", "status": "allowed"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("an endpoint beyond the cap counts as other: got %v, want 1", got)
	}
	if got := find(t, mfs, "rate_limit_requests_total", map[string]string{"endpoint": "/api/0", "plan_tier": "pro", "status": "allowed"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("/api/0 pro allowed = %v, want 1", got)
	}
	for _, l := range []struct {
		label, reason string
		want          float64
	}{{"endpoint", "unconfigured", raw}, {"endpoint", "cardinality_cap", 1}, {"plan_tier", "unconfigured", raw}} {
		if got := find(t, mfs, "rate_limit_labels_folded_total", map[string]string{"label": l.label, "reason": l.reason}).GetCounter().GetValue(); got != l.want {
			t.Errorf("folded %s/%s = %v, want %v", l.label, l.reason, got, l.want)
		}
	}
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "rate_limit_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.HasPrefix(lp.GetValue(), "/users/") || strings.HasPrefix(lp.GetValue(), "tier-") || lp.GetValue() == "client-1" {
					t.Fatalf("%s carries a raw value %s=%q", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

func TestBadConfigIsRefusedWithTheField(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a cap below the number of tiers", Config{Tiers: []string{"a", "b", "c"}, MaxLabelSets: 2}, "max label sets"},
		{"the reserved endpoint other", Config{Endpoints: []string{"/a", "other"}}, `endpoints[1]: endpoint "other" is reserved`},
		{"an empty endpoint", Config{Endpoints: []string{""}}, "endpoints[0]: empty endpoint"},
		{"an empty tier", Config{Tiers: []string{"free", ""}}, "tiers[1]: empty plan tier"},
		{"a near-limit share above one", Config{NearLimitShare: 1.5}, "near limit share"},
		{"a negative top window", Config{TopWindow: -time.Second}, "top window"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSetLimit(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/x", "/y"}, Tiers: []string{"free", "pro"}, DefaultTier: "free"})
	if err := c.SetLimit("/x", "pro", limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 10, Period: time.Second, Burst: 40}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLimit("/y", "", limiter.PerMinute(limiter.FixedWindow, 60)); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP rate_limit_limit The limit in force: requests per window, or the bucket size for bucket algorithms.
# TYPE rate_limit_limit gauge
rate_limit_limit{algorithm="fixed_window",endpoint="/y",plan_tier="free"} 60
rate_limit_limit{algorithm="token_bucket",endpoint="/x",plan_tier="pro"} 40
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected), "rate_limit_limit"); err != nil {
		t.Error(err)
	}
	quota := `
# HELP rate_limit_quota The quota in force per window (the bucket size for bucket algorithms), without the algorithm label, to divide usage by; one per limit of a tier of several.
# TYPE rate_limit_quota gauge
rate_limit_quota{endpoint="/x",limit="/x",plan_tier="pro"} %d
rate_limit_quota{endpoint="/y",limit="/y",plan_tier="free"} 60
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(fmt.Sprintf(quota, 40)), "rate_limit_quota"); err != nil {
		t.Error(err)
	}
	// A live change of algorithm replaces the series instead of adding one.
	if err := c.SetLimit("/x", "pro", limiter.PerSecond(limiter.GCRA, 25)); err != nil {
		t.Fatal(err)
	}
	expected = `
# HELP rate_limit_limit The limit in force: requests per window, or the bucket size for bucket algorithms.
# TYPE rate_limit_limit gauge
rate_limit_limit{algorithm="fixed_window",endpoint="/y",plan_tier="free"} 60
rate_limit_limit{algorithm="gcra",endpoint="/x",plan_tier="pro"} 25
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected), "rate_limit_limit"); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(fmt.Sprintf(quota, 25)), "rate_limit_quota"); err != nil {
		t.Error(err)
	}
	for _, bad := range []struct {
		endpoint, tier string
		lim            limiter.Limit
		want           string
	}{
		{"/nope", "free", limiter.PerSecond(limiter.GCRA, 1), `endpoint "/nope": not configured`},
		{"other", "free", limiter.PerSecond(limiter.GCRA, 1), `endpoint "other": not configured`},
		{"/x", "gold", limiter.PerSecond(limiter.GCRA, 1), `plan tier "gold": not configured`},
		{"/x", "free", limiter.PerSecond("fast", 1), `unknown algorithm "fast"`},
	} {
		err := c.SetLimit(bad.endpoint, bad.tier, bad.lim)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("SetLimit(%s, %s) error = %v, want %q", bad.endpoint, bad.tier, err, bad.want)
		}
	}
}

func TestReconfigureKeepsCountsOfLabelSetsThatStay(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/a", "/b"}, Tiers: []string{"free"}, DefaultTier: "free"})
	ctx := context.Background()
	for range 5 {
		c.RecordDecision(ctx, rec("/a", "free", limiter.StatusAllowed))
		c.RecordDecision(ctx, rec("/b", "free", limiter.StatusAllowed))
	}
	r := rec("/a", "free", limiter.StatusFailOpen)
	r.Err = context.DeadlineExceeded
	c.RecordDecision(ctx, r)
	if err := c.SetLimit("/b", "free", limiter.PerSecond(limiter.GCRA, 5)); err != nil {
		t.Fatal(err)
	}
	if err := c.Reconfigure([]string{"/a", "/c"}, []string{"free", "pro"}, "free"); err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, c)
	if got := find(t, mfs, "rate_limit_requests_total", map[string]string{"endpoint": "/a", "plan_tier": "free", "status": "allowed"}).GetCounter().GetValue(); got != 5 {
		t.Errorf("/a free allowed after reload = %v, want 5 (kept)", got)
	}
	if got := find(t, mfs, "rate_limit_fail_open_total", map[string]string{"endpoint": "/a", "reason": "timeout"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("/a fail open after reload = %v, want 1 (kept)", got)
	}
	if got := find(t, mfs, "rate_limit_requests_total", map[string]string{"endpoint": "/c", "plan_tier": "pro", "status": "rejected"}).GetCounter().GetValue(); got != 0 {
		t.Errorf("/c pro rejected = %v, want a new series at 0", got)
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if labelsOf(m)["endpoint"] == "/b" {
				t.Errorf("%s still has endpoint /b after it was removed", name)
			}
		}
	}
	if err := c.Reconfigure([]string{"other"}, nil, ""); err == nil {
		t.Error("Reconfigure accepted the reserved endpoint other")
	}
	c.RecordDecision(ctx, rec("/c", "pro", limiter.StatusRejected))
	if got := counter(t, c, "rate_limit_requests_total", map[string]string{"endpoint": "/c", "plan_tier": "pro", "status": "rejected"}); got != 1 {
		t.Errorf("/c pro rejected = %v, want 1 (a failed reload changes nothing)", got)
	}
}

// Recording, reconfiguring and scraping at once: no decision is lost and
// the race detector (make test) sees no race.
func TestConcurrentRecordingReloadAndScrapes(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/a", "/b"}, Tiers: []string{"free", "pro"}, DefaultTier: "free"})
	ctx := context.Background()
	const workers, per = 4, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				s := limiter.StatusAllowed
				if i%4 == 0 {
					s = limiter.StatusRejected
				}
				r := rec("/a", "pro", s)
				r.Key = fmt.Sprintf("k%d", (w*per+i)%50)
				c.RecordDecision(ctx, r)
				c.ObserveStore(ctx, "gcra", time.Millisecond, nil)
			}
		}()
	}
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			eps := []string{"/a", "/b"}
			if i%2 == 1 {
				eps = []string{"/a", fmt.Sprintf("/z%d", i%3)}
			}
			if err := c.Reconfigure(eps, []string{"free", "pro"}, "free"); err != nil {
				t.Error(err)
				return
			}
			if _, err := c.Registry().Gather(); err != nil {
				t.Error(err)
				return
			}
			_ = c.TopLimited(10)
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	mfs := gather(t, c)
	allowed := find(t, mfs, "rate_limit_requests_total", map[string]string{"endpoint": "/a", "plan_tier": "pro", "status": "allowed"}).GetCounter().GetValue()
	rejected := find(t, mfs, "rate_limit_requests_total", map[string]string{"endpoint": "/a", "plan_tier": "pro", "status": "rejected"}).GetCounter().GetValue()
	if allowed != workers*per*3/4 || rejected != workers*per/4 {
		t.Errorf("allowed=%v rejected=%v, want %d and %d", allowed, rejected, workers*per*3/4, workers*per/4)
	}
	if got := find(t, mfs, "rate_limit_redis_duration_seconds", map[string]string{"operation": "gcra"}).GetHistogram().GetSampleCount(); got != workers*per {
		t.Errorf("store observations = %d, want %d", got, workers*per)
	}
}

func TestRecordingAllocatesNothing(t *testing.T) {
	c := newTestCollector(t, Config{Endpoints: []string{"/v1/search"}, Tiers: []string{"free", "pro"}})
	ctx := context.Background()
	rejected := rec("/v1/search", "pro", limiter.StatusRejected)
	c.RecordDecision(ctx, rejected) // the key enters the sketch once
	failOpen := rec("/v1/search", "pro", limiter.StatusFailOpen)
	failOpen.Err = fmt.Errorf("redis store: %w", context.DeadlineExceeded)
	cases := map[string]limiter.Record{
		"an allowed decision":                         rec("/v1/search", "pro", limiter.StatusAllowed),
		"a rejection of a key already in the sketch":  rejected,
		"a decision on an unconfigured endpoint/tier": rec("/raw/path/123", "gold", limiter.StatusAllowed),
		"a fail-open decision on a timeout":           failOpen,
	}
	for name, r := range cases {
		if n := testing.AllocsPerRun(1000, func() { c.RecordDecision(ctx, r) }); n != 0 {
			t.Errorf("%s: %v allocations per decision, want 0", name, n)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { c.ObserveStore(ctx, "gcra", time.Millisecond, nil) }); n != 0 {
		t.Errorf("ObserveStore: %v allocations, want 0", n)
	}
}

func TestRegisterOnAnotherRegistry(t *testing.T) {
	c := newTestCollector(t, Config{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector()) //nolint:staticcheck // a registry that already has a Go collector
	if err := c.Register(reg); err != nil {
		t.Fatalf("Register on a registry with a Go collector: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	for _, want := range []string{"rate_limit_requests_total", "rl_exporter_build_info", "process_cpu_seconds_total"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from the other registry", want)
		}
	}
	if err := c.Register(reg); err == nil {
		t.Error("registering the same collector twice succeeded")
	}
}

func TestManyTiersAreFoundToo(t *testing.T) {
	var tiers []string
	for i := range 12 {
		tiers = append(tiers, fmt.Sprintf("t%d", i))
	}
	c := newTestCollector(t, Config{Endpoints: []string{"/x"}, Tiers: tiers, DefaultTier: "t0"})
	c.RecordDecision(context.Background(), rec("/x", "t11", limiter.StatusRejected))
	c.RecordDecision(context.Background(), rec("/x", "t12", limiter.StatusRejected))
	if got := counter(t, c, "rate_limit_requests_total", map[string]string{"endpoint": "/x", "plan_tier": "t11", "status": "rejected"}); got != 1 {
		t.Errorf("t11 rejected = %v, want 1", got)
	}
	if got := counter(t, c, "rate_limit_requests_total", map[string]string{"endpoint": "/x", "plan_tier": "t0", "status": "rejected"}); got != 1 {
		t.Errorf("unknown tier t12 under the default t0 = %v, want 1", got)
	}
}
