package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/rl-exporter/rl-exporter/slo"
)

// Series of the cost metric contract (docs/metrics.md), read by the Costs row.
const (
	metricCost         = "rate_limit_cost_total"
	metricReservations = "rate_limit_reservations_open"
	metricEstimateErr  = "rate_limit_cost_estimate_error"
	metricCostUnknown  = "rate_limit_cost_unknown_total"
)

// CostsRowTitle is the title of the row of the classes whose cost is read from the response.
const CostsRowTitle = "Costs (cost_from)"

// costPanels are the Costs row: units reserved, committed, refunded and expired, the
// reservations open, how far the real costs are from their estimates, and the responses that
// gave no usable cost.
func costPanels(m *slo.Model, q queries, next func() uint32) []*timeseries.PanelBuilder {
	expiring := runbook(m.Expiring != nil, func() slo.Alert { return m.Expiring.Alert })
	off := runbook(m.EstimateOff != nil, func() slo.Alert { return m.EstimateOff.Alert })
	return []*timeseries.PanelBuilder{
		timeseriesPanel(next(), "Cost units per second by phase",
			"Units of cost_from classes: reserved at admission (the estimate), committed at the real cost, refunded "+
				"(reserved beyond it, or cancelled) and expired (reservations that reached their hold unsettled).",
			unitOpsPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (phase) (rate(%s%s[$__rate_interval]))", metricCost, q.sel(true, true)), "{{phase}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			OverrideByRegexp("^expired$", fixedColor("red")).
			Links(links(expiring)),
		timeseriesPanel(next(), "Reservations open by endpoint and plan tier",
			"Reservations taken and not yet settled, summed over the instances: about the requests in flight of cost_from classes. "+
				"A line that only grows is commits being lost.",
			unitCount).
			WithTarget(target("A", fmt.Sprintf("sum by (endpoint, plan_tier) (%s%s)", metricReservations, q.sel(true, true)), "{{endpoint}} {{plan_tier}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(expiring)),
		timeseriesPanel(next(), "Real cost over estimate "+quantileName(0.5)+" / "+quantileName(0.9),
			"The real cost of a request over the estimate it reserved, by endpoint: 1 is exact, below 1 the estimate held back "+
				"budget that was given back, above 1 the budget was overspent by the excess while the request ran.",
			unitTimes).
			WithTarget(target("A", fmt.Sprintf("histogram_quantile(0.5, sum by (endpoint, le) (rate(%s_bucket%s[$__rate_interval])))", metricEstimateErr, q.sel(true, true)), "{{endpoint}} "+quantileName(0.5))).
			WithTarget(target("B", fmt.Sprintf("histogram_quantile(0.9, sum by (endpoint, le) (rate(%s_bucket%s[$__rate_interval])))", metricEstimateErr, q.sel(true, true)), "{{endpoint}} "+quantileName(0.9))).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(off)),
		timeseriesPanel(next(), "Responses without a usable cost by reason",
			"Responses of cost_from classes committed at the estimate because no cost could be read: missing, invalid, "+
				"too_large (beyond the 64 KiB scanned) or client_gone (cut short).",
			unitReqPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (reason) (rate(%s%s[$__rate_interval]))", metricCostUnknown, q.sel(true, true)), "{{reason}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(off)),
	}
}
