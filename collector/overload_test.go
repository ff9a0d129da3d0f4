package collector

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestOverloadExportsTheLimitInFlightAndShedByPriority(t *testing.T) {
	limit, inFlight := 40, 12
	o, err := NewOverload(OverloadConfig{Upstream: "api:8080", Priorities: []string{"critical", "sheddable"}, Reasons: []string{"limit", "reserved"},
		State: func() (int, int) { return limit, inFlight }})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(o)
	o.Shed("sheddable", "reserved")
	o.Shed("sheddable", "reserved")
	o.Shed("critical", "limit")
	o.Shed("urgent", "limit") // not a configured priority
	want := `
# HELP rate_limit_overload_in_flight Requests admitted by server.overload and in flight to the upstream now.
# TYPE rate_limit_overload_in_flight gauge
rate_limit_overload_in_flight{upstream="api:8080"} 12
# HELP rate_limit_overload_limit The adaptive concurrency limit on requests in flight to the upstream (server.overload): it follows the upstream's latency against its baseline and its latency objective.
# TYPE rate_limit_overload_limit gauge
rate_limit_overload_limit{upstream="api:8080"} 40
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rate_limit_overload_limit", "rate_limit_overload_in_flight"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		priority, reason string
		want             float64
	}{{"sheddable", "reserved", 2}, {"critical", "limit", 1}, {"critical", "reserved", 0}, {"sheddable", "limit", 0}} {
		mfs, _ := reg.Gather()
		got := -1.0
		for _, mf := range mfs {
			if mf.GetName() != "rate_limit_shed_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				if l["priority"] == tc.priority && l["reason"] == tc.reason && l["upstream"] == "api:8080" {
					got = m.GetCounter().GetValue()
				}
			}
		}
		if got != tc.want {
			t.Errorf("rate_limit_shed_total{priority=%q,reason=%q} = %v, want %v", tc.priority, tc.reason, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(o, "rate_limit_shed_total"); n != 4 {
		t.Errorf("%d shed series, want the 4 configured pairs at once", n)
	}
}
