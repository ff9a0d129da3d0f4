package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/rl-exporter/rl-exporter/slo"
)

// Series of the cost of requests (docs/metrics.md), read by the Cost and
// quotas row.
const (
	metricQuota            = "rate_limit_quota"
	metricCost             = "rate_limit_cost_total"
	metricReservationsOpen = "rate_limit_reservations_open"
	metricEstimateRatio    = "rate_limit_cost_estimate_ratio"
)

// CostRowTitle is the title of the row of what requests cost against quotas.
const CostRowTitle = "Cost and quotas"

// costPanels are the Cost and quotas row: units spent against the quota,
// cost by phase of its reservation, reservations open, and how far the
// estimates reserved are from the costs settled.
func costPanels(m *slo.Model, q queries, next func() uint32) []*timeseries.PanelBuilder {
	expired := runbook(m.CostExpired != nil, func() slo.Alert { return m.CostExpired.Alert })
	estimate := runbook(m.CostEstimate != nil, func() slo.Alert { return m.CostEstimate.Alert })
	byKey := "sum by (endpoint, plan_tier)"
	spent := fmt.Sprintf(`%s (rate(%s%s[$__rate_interval]))`, byKey, metricCost, q.sel(true, true, `phase=~"committed|expired"`))
	estimateDesc := "The median and p90 of actual ÷ estimated cost of the reservations settled: 1 is an exact estimate."
	if o := m.CostEstimate; o != nil {
		estimateDesc += fmt.Sprintf(" %s (%s) fires when the %s stays outside %s to %s for %s.",
			o.Name, o.Severity, quantileName(o.Quantile), formatFloat(o.Low), formatFloat(o.High), duration(o.For))
	}
	return []*timeseries.PanelBuilder{
		timeseriesPanel(next(), "Cost per minute as a share of quota",
			"Units settled per minute (committed, and expired reservations charged), over all clients, divided by one client's "+
				"quota per window (rate_limit_quota): for a per-minute limit, 100 % is one client's whole budget spent every minute.",
			unitRatio).
			WithTarget(target("A", fmt.Sprintf("%s * 60\n/ on (endpoint, plan_tier)\n(max by (endpoint, plan_tier) (%s%s) > 0)", spent, metricQuota, q.sel(true, true)),
				"{{endpoint}} {{plan_tier}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(expired, estimate)),
		timeseriesPanel(next(), "Cost per second by phase",
			"Units reserved at admission, committed at their real cost, refunded (reserved beyond it) and expired (never settled, "+
				"charged or refunded by the class's policy). Expired units growing are commits being lost.",
			unitOpsPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (phase) (rate(%s%s[$__rate_interval]))", metricCost, q.sel(true, true)), "{{phase}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			OverrideByRegexp("^expired$", fixedColor("red")).
			Links(links(expired)),
		timeseriesPanel(next(), "Open reservations",
			"Reservations taken and not yet settled, summed over the instances: the requests in flight whose cost is still an estimate.",
			unitCount).
			WithTarget(target("A", fmt.Sprintf("%s (%s%s)", byKey, metricReservationsOpen, q.sel(true, true)), "{{endpoint}} {{plan_tier}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(expired)),
		timeseriesPanel(next(), "Actual ÷ estimated cost p50 / p90", estimateDesc, unitTimes).
			WithTarget(target("A", fmt.Sprintf("histogram_quantile(0.5, sum by (endpoint, plan_tier, le) (rate(%s_bucket%s[$__rate_interval])))",
				metricEstimateRatio, q.sel(true, true)), quantileName(0.5)+" {{endpoint}} {{plan_tier}}")).
			WithTarget(target("B", fmt.Sprintf("histogram_quantile(0.9, sum by (endpoint, plan_tier, le) (rate(%s_bucket%s[$__rate_interval])))",
				metricEstimateRatio, q.sel(true, true)), quantileName(0.9)+" {{endpoint}} {{plan_tier}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(estimate)),
	}
}
