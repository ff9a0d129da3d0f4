package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/rl-exporter/rl-exporter/slo"
)

// Series of the rate limit quota service (docs/metrics.md), read by the Quota shares row.
const (
	metricQuotaShare       = "rate_limit_quota_share"
	metricRLQSStreams      = "rate_limit_rlqs_streams"
	metricQuotaExpired     = "rate_limit_rlqs_assignments_expired_total"
	metricQuotaStoreErrors = "rate_limit_rlqs_store_errors_total"
)

// QuotaRowTitle is the title of the row the Overview gains while the spec's
// quota_assignments_expired alert is on.
const QuotaRowTitle = "Quota shares (Envoy rate limit quota service)"

// quotaPanels are the Quota shares row: each rule's shares assigned against the demand
// reported, the Envoys' streams per instance, and the assignments that ran out unrenewed.
func quotaPanels(o *slo.QuotaExpiredObjective, q queries, next func() uint32) []*timeseries.PanelBuilder {
	rb := runbook(true, func() slo.Alert { return o.Alert })
	return []*timeseries.PanelBuilder{
		timeseriesPanel(next(), "Quota shares assigned and demand reported by rule",
			"Requests per second of the token buckets assigned to the Envoys (assigned), summed over the instances: at most the rule's limit; "+
				"beside what the Envoys reported they were asked (demand, allowed and denied). Demand above assigned: the Envoys deny the difference.",
			unitReqPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (endpoint) (%s%s)", metricQuotaShare, q.sel(true, false, `kind="assigned"`)), "assigned {{endpoint}}")).
			WithTarget(target("B", fmt.Sprintf("sum by (endpoint) (%s%s)", metricQuotaShare, q.sel(true, false, `kind="demand"`)), "demand {{endpoint}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(rb)),
		timeseriesPanel(next(), "Quota service streams by instance",
			"Envoys connected to each instance's rate limit quota service (one stream per Envoy and domain). "+
				"A stopped instance's Envoys move to the others at their next report.",
			unitCount).
			WithTarget(target("A", fmt.Sprintf("sum by (instance) (%s%s)", metricRLQSStreams, q.sel(false, false)), "{{instance}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(rb)),
		timeseriesPanel(next(), "Quota assignments expired unrenewed per second",
			fmt.Sprintf("Assignments that ran out before the server renewed them, by rule: their Envoys fell back to their expired_assignment_behavior; "+
				"beside the failed exchanges with the store. %s (%s) fires when more than %s expire within %s.",
				o.Name, o.Severity, formatFloat(o.Threshold), duration(o.Window)),
			unitOpsPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (endpoint) (rate(%s%s[$__rate_interval]))", metricQuotaExpired, q.sel(true, false)), "expired {{endpoint}}")).
			WithTarget(target("B", fmt.Sprintf("sum(rate(%s%s[$__rate_interval]))", metricQuotaStoreErrors, q.sel(false, false)), "store errors")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(rb)),
	}
}
