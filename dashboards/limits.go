package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// metricRefusals counts each limit that refused a request (docs/metrics.md).
const metricRefusals = "rate_limit_refusals_total"

// limitsPanel draws, per named limit (a tier of several limits has one each), the share of its
// endpoint and tier's decisions it refused, against its quota per window: which limit of a
// tier is the one clients run into.
func limitsPanel(q queries, id uint32, rb *runbookLink) *timeseries.PanelBuilder {
	all := fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[$__rate_interval]))", metricRequests, q.sel(true, true))
	return timeseriesPanel(id, "Refusals and quota by limit",
		"Left axis: the share of decisions each limit refused (rate_limit_refusals_total, per endpoint, plan tier and limit: "+
			"a request refused by several limits of its tier counts under each, so the shares of a tier may add up to more than its 429 ratio). "+
			"Right axis: each limit's quota per window (rate_limit_quota). A tier of one limit shows it under its class's name.",
		unitRatio).
		WithTarget(target("A", fmt.Sprintf("sum by (endpoint, plan_tier, limit) (rate(%s%s[$__rate_interval]))\n/ on (endpoint, plan_tier) group_left ()\n(%s > 0)",
			metricRefusals, q.sel(true, true), all),
			"refused by {{limit}} {{endpoint}} {{plan_tier}}")).
		WithTarget(target("B", fmt.Sprintf("max by (endpoint, plan_tier, limit) (%s%s)", metricQuota, q.sel(true, true)),
			"quota {{limit}} {{endpoint}} {{plan_tier}}")).
		Thresholds(thresholds()).
		ThresholdsStyle(noThresholdLine()).
		AxisLabel("share of decisions").
		OverrideByQuery("B", []dashboard.DynamicConfigValue{
			{Id: "unit", Value: unitCount},
			{Id: "custom.axisPlacement", Value: string(common.AxisPlacementRight)},
			{Id: "custom.axisLabel", Value: "quota per window"},
			{Id: "custom.lineInterpolation", Value: string(common.LineInterpolationStepAfter)},
			{Id: "custom.fillOpacity", Value: 0},
			{Id: "custom.lineWidth", Value: 2},
		}).
		Links(links(rb))
}
