package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/rl-exporter/rl-exporter/slo"
)

// Series of server.overload's metric contract (docs/metrics.md), read by the Overload row.
const (
	metricOverloadLimit    = "rate_limit_overload_limit"
	metricOverloadInFlight = "rate_limit_overload_in_flight"
	metricShed             = "rate_limit_shed_total"
)

// OverloadRowTitle is the title of the row of server.overload's panels.
const OverloadRowTitle = "Overload: the upstream's concurrency limit and shed requests"

// overloadPanels are the Overload row: the adaptive limit beside the requests
// in flight to the upstream, and the requests shed by priority and reason.
func overloadPanels(o *slo.OverloadObjective, q queries, next func() uint32) []*timeseries.PanelBuilder {
	var shed *runbookLink
	alert := "No alert is generated on shed critical requests (overload.critical_shed.enabled is false)."
	if a := o.CriticalShed; a != nil {
		shed = runbook(true, func() slo.Alert { return *a })
		alert = fmt.Sprintf("%s (%s) fires when critical requests are shed for %s.", a.Name, a.Severity, duration(a.For))
	}
	return []*timeseries.PanelBuilder{
		timeseriesPanel(next(), "Concurrency limit and in flight by upstream",
			fmt.Sprintf("The adaptive concurrency limit of server.overload, summed over the instances (the fleet's), beside the requests in flight to the upstream. "+
				"The limit follows the upstream's latency against its baseline and its objective (%s of responses within %s); in flight pressed against it means requests are being shed.",
				quantileName(o.LatencyQuantile), duration(o.LatencyThreshold)),
			unitCount).
			WithTarget(target("A", fmt.Sprintf("sum by (upstream) (%s%s)", metricOverloadLimit, q.sel(false, false)), "limit {{upstream}}")).
			WithTarget(target("B", fmt.Sprintf("sum by (upstream) (%s%s)", metricOverloadInFlight, q.sel(false, false)), "in flight {{upstream}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			OverrideByRegexp("^limit .*", fixedColor("orange")).
			Links(links(shed)),
		timeseriesPanel(next(), "Shed requests per second by priority",
			"Requests answered 503 by server.overload before reaching the upstream, by priority and reason: reserved (what was left of the limit is kept for higher priorities) "+
				"or limit (the whole limit was in use). Sheddable requests go first, then default ones; critical ones only when the limit is full. "+alert,
			unitReqPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (priority, reason) (rate(%s%s[$__rate_interval]))", metricShed, q.sel(false, false)), "{{priority}} {{reason}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			OverrideByRegexp("^critical .*", fixedColor("red")).
			OverrideByRegexp("^sheddable .*", fixedColor("yellow")).
			Links(links(shed)),
	}
}
