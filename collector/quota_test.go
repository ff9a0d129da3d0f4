package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestQuotaExportsSharesStreamsAndExpiries(t *testing.T) {
	st := QuotaStats{Streams: 3, StoreErrors: 2,
		Rules:   map[string]QuotaRuleStats{"chat.name_chat": {Demand: 320, Assigned: 99.9}, "other": {Demand: 4}},
		Expired: map[string]uint64{"chat.name_chat": 0, "other": 1}}
	q, err := NewQuota(QuotaConfig{Stats: func() QuotaStats { return st }})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(q)
	want := `
# HELP rate_limit_quota_share Envoy rate limit quota service (rlqs), per rule, requests per second of the Envoys connected to this instance: kind=demand, what they reported (allowed and denied); kind=assigned, the refill rate of the token buckets assigned to them. Summed over the instances, assigned is at most the rule's limit.
# TYPE rate_limit_quota_share gauge
rate_limit_quota_share{endpoint="chat.name_chat",kind="assigned"} 99.9
rate_limit_quota_share{endpoint="chat.name_chat",kind="demand"} 320
rate_limit_quota_share{endpoint="other",kind="assigned"} 0
rate_limit_quota_share{endpoint="other",kind="demand"} 4
# HELP rate_limit_rlqs_assignments_expired_total Rate limit quota service assignments whose time to live ran out before a renewal was sent, by rule: the Envoy fell back to its expired_assignment_behavior.
# TYPE rate_limit_rlqs_assignments_expired_total counter
rate_limit_rlqs_assignments_expired_total{endpoint="chat.name_chat"} 0
rate_limit_rlqs_assignments_expired_total{endpoint="other"} 1
# HELP rate_limit_rlqs_store_errors_total Exchanges of the Envoys' demands with the store (Redis) that failed: the shares of that interval were not renewed.
# TYPE rate_limit_rlqs_store_errors_total counter
rate_limit_rlqs_store_errors_total 2
# HELP rate_limit_rlqs_streams Rate limit quota service streams open on this instance: one per Envoy (per domain) connected.
# TYPE rate_limit_rlqs_streams gauge
rate_limit_rlqs_streams 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewQuota(QuotaConfig{}); err == nil {
		t.Error("a Quota without Stats was made")
	}
}
