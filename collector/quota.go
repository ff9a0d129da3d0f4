package collector

import (
	"errors"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind label values of rate_limit_quota_share.
const (
	ShareAssigned = "assigned"
	ShareDemand   = "demand"
)

// QuotaRuleStats is what one rule's quota shares are on this instance: the requests per second
// its Envoys' streams here reported (allowed and denied) and the refill rates assigned to them.
type QuotaRuleStats struct {
	Demand, Assigned float64
}

// QuotaStats is a snapshot of the rate limit quota service for a scrape.
type QuotaStats struct {
	Streams int                       // streams open on this instance
	Rules   map[string]QuotaRuleStats // by endpoint label: the rule's path, "other" for no rule
	// Expired counts, by endpoint label, the assignments that ran out before a renewal was sent;
	// each rule of Rules is listed, at zero until its first.
	Expired     map[string]uint64
	StoreErrors uint64 // exchanges of demands with the store that failed
}

// QuotaConfig configures a Quota collector.
type QuotaConfig struct {
	// Stats returns the quota service's snapshot; called at each scrape. Required.
	Stats func() QuotaStats
}

// Quota exports Envoy's rate limit quota service (rlqs): each rule's demand and assigned share,
// the streams open, the assignments that expired unrenewed and the failed store exchanges. It
// reads a snapshot at each scrape (the caller adapts the service's, so this package does not
// link the service and its gRPC types) and is safe for concurrent use.
type Quota struct {
	cfg                                          QuotaConfig
	shareDesc, streamsDesc, expiredDesc, errDesc *prometheus.Desc
}

var _ prometheus.Collector = (*Quota)(nil)

// NewQuota returns a Quota collector; register it on the registry /metrics serves.
func NewQuota(cfg QuotaConfig) (*Quota, error) {
	if cfg.Stats == nil {
		return nil, errors.New("collector: quota: Stats is required")
	}
	return &Quota{cfg: cfg,
		shareDesc: prometheus.NewDesc("rate_limit_quota_share",
			"Envoy rate limit quota service (rlqs), per rule, requests per second of the Envoys connected to this instance: kind=demand, what they reported (allowed and denied); kind=assigned, the refill rate of the token buckets assigned to them. Summed over the instances, assigned is at most the rule's limit.",
			[]string{"endpoint", "kind"}, nil),
		streamsDesc: prometheus.NewDesc("rate_limit_rlqs_streams",
			"Rate limit quota service streams open on this instance: one per Envoy (per domain) connected.",
			nil, nil),
		expiredDesc: prometheus.NewDesc("rate_limit_rlqs_assignments_expired_total",
			"Rate limit quota service assignments whose time to live ran out before a renewal was sent, by rule: the Envoy fell back to its expired_assignment_behavior.",
			[]string{"endpoint"}, nil),
		errDesc: prometheus.NewDesc("rate_limit_rlqs_store_errors_total",
			"Exchanges of the Envoys' demands with the store (Redis) that failed: the shares of that interval were not renewed.",
			nil, nil),
	}, nil
}

// Describe implements prometheus.Collector.
func (q *Quota) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.shareDesc
	ch <- q.streamsDesc
	ch <- q.expiredDesc
	ch <- q.errDesc
}

// Collect implements prometheus.Collector.
func (q *Quota) Collect(ch chan<- prometheus.Metric) {
	st := q.cfg.Stats()
	ch <- prometheus.MustNewConstMetric(q.streamsDesc, prometheus.GaugeValue, float64(st.Streams))
	ch <- prometheus.MustNewConstMetric(q.errDesc, prometheus.CounterValue, float64(st.StoreErrors))
	for _, e := range sortedKeys(st.Rules) {
		r := st.Rules[e]
		ch <- prometheus.MustNewConstMetric(q.shareDesc, prometheus.GaugeValue, r.Demand, e, ShareDemand)
		ch <- prometheus.MustNewConstMetric(q.shareDesc, prometheus.GaugeValue, r.Assigned, e, ShareAssigned)
	}
	for _, e := range sortedKeys(st.Expired) {
		ch <- prometheus.MustNewConstMetric(q.expiredDesc, prometheus.CounterValue, float64(st.Expired[e]), e)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
