package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/rl-exporter/rl-exporter/slo"
)

// Series of concurrency limits (docs/metrics.md), read by the Concurrency row.
const (
	metricInFlight      = "rate_limit_in_flight"
	metricLeasesExpired = "rate_limit_leases_expired_total"
)

// ConcurrencyRowTitle is the title of the row the Overview gains while the
// spec's leases_expired alert is on.
const ConcurrencyRowTitle = "Concurrency limits"

// leasePanels are the Concurrency row: requests in flight against their
// limit, and the leases that expired instead of being given back.
func leasePanels(o *slo.LeasesExpiredObjective, q queries, next func() uint32) []*timeseries.PanelBuilder {
	rb := runbook(true, func() slo.Alert { return o.Alert })
	return []*timeseries.PanelBuilder{
		timeseriesPanel(next(), "Requests in flight against the concurrency limit",
			"Requests holding a concurrency lease (algorithm concurrency), summed over the instances, per endpoint and plan tier, "+
				"beside the limit (rate_limit_limit{algorithm=\"concurrency\"}), which caps each key, not the endpoint: "+
				"the sum may pass it when several keys are busy.",
			unitCount).
			WithTarget(target("A", fmt.Sprintf("sum by (endpoint, plan_tier) (%s%s)", metricInFlight, q.sel(true, true)), "in flight {{endpoint}} {{plan_tier}}")).
			WithTarget(target("B", fmt.Sprintf("max by (endpoint, plan_tier) (%s%s)", metricLimit, q.sel(true, true, `algorithm="concurrency"`)), "limit per key {{endpoint}} {{plan_tier}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(rb)),
		timeseriesPanel(next(), "Concurrency leases expired per second",
			fmt.Sprintf("Leases that reached their lease_ttl unreleased and were dropped: a crashed instance's, once, or lost releases and requests "+
				"longer than lease_ttl, all the time. %s (%s) fires when more than %s expire within %s for %s.",
				o.Name, o.Severity, formatFloat(o.Threshold), duration(o.Window), duration(o.For)),
			unitOpsPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[$__rate_interval]))", metricLeasesExpired, q.sel(true, true)), "{{endpoint}} {{plan_tier}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(rb)),
	}
}
