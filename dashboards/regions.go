package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/rl-exporter/rl-exporter/slo"
)

// Series of the multi-region metric contract (docs/metrics.md), read by the
// Regions row.
const (
	metricRegionLag       = "rate_limit_region_sync_lag_seconds"
	metricRegionErrors    = "rate_limit_region_sync_errors_total"
	metricRegionDecisions = "rate_limit_region_decisions_total"
	metricRegionRTT       = "rate_limit_region_rtt_seconds"
)

// RegionsRowTitle is the title of the row the Overview gains when the spec
// has a regions: block.
const RegionsRowTitle = "Regions"

// regionPanels are the Regions row: how fresh the counts known from each
// peer region are, how often syncing with it fails, where decisions run
// and what a decision on a peer costs.
func regionPanels(o *slo.RegionsObjective, q queries, next func() uint32) []*timeseries.PanelBuilder {
	lag := runbook(true, func() slo.Alert { return o.SyncLag })
	lost := runbook(true, func() slo.Alert { return o.Unreachable })
	return []*timeseries.PanelBuilder{
		timeseriesPanel(next(), "Sync lag by peer region",
			fmt.Sprintf("Age of the newest counts known from each peer region, the worst instance's, as %s reads it "+
				"(async and hybrid limits count that region's traffic as of then). The dashed line is its threshold "+
				"(%s, %s, for %s); %s pages when an instance has had no successful sync for %s while its sync errors increase.",
				o.SyncLag.Name, duration(o.SyncLagThreshold), o.SyncLag.Severity, duration(o.SyncLag.For),
				o.Unreachable.Name, duration(o.UnreachableFor)),
			unitSeconds).
			WithTarget(target("A", fmt.Sprintf("max by (peer_region) (%s%s)", metricRegionLag, q.sel(false, false)), "{{peer_region}}")).
			Thresholds(thresholds(step(o.SyncLagThreshold.Seconds(), severityColor[o.SyncLag.Severity]))).
			ThresholdsStyle(lineThresholds()).
			Links(links(lag, lost)),
		timeseriesPanel(next(), "Sync errors per second by peer region",
			"Sync rounds with each peer region that failed (shipping counts to it or reading its counts). "+
				"Errors with a growing lag are a lost peer; errors between successful rounds are a flaky link.",
			unitOpsPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (peer_region) (rate(%s%s[$__rate_interval]))", metricRegionErrors, q.sel(false, false)), "{{peer_region}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(lost)),
		timeseriesPanel(next(), "Region decisions per second by mode and home",
			"Decisions of limits in a region mode other than local, by mode (strict, async, hybrid) and by where they ran: "+
				"home local (this region's Redis) or remote (a peer's, one cross-region round trip each).",
			unitReqPerSec).
			WithTarget(target("A", fmt.Sprintf("sum by (mode, home) (rate(%s%s[$__rate_interval]))", metricRegionDecisions, q.sel(false, false)), "{{mode}} {{home}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			OverrideByRegexp(".* remote$", fixedColor("orange")).
			Links(links(lost)),
		timeseriesPanel(next(), "Cross-region round trip "+quantileName(0.5)+" / "+quantileName(0.99),
			"Round-trip time of the decisions made on a peer region's Redis (strict, and hybrid past its threshold), by peer, failures included: "+
				"what a remote decision adds to a request.",
			unitSeconds).
			WithTarget(target("A", fmt.Sprintf("histogram_quantile(0.5, sum by (peer_region, le) (rate(%s_bucket%s[$__rate_interval])))", metricRegionRTT, q.sel(false, false)), quantileName(0.5)+" {{peer_region}}")).
			WithTarget(target("B", fmt.Sprintf("histogram_quantile(0.99, sum by (peer_region, le) (rate(%s_bucket%s[$__rate_interval])))", metricRegionRTT, q.sel(false, false)), quantileName(0.99)+" {{peer_region}}")).
			Thresholds(thresholds()).
			ThresholdsStyle(noThresholdLine()).
			Links(links(lost)),
	}
}
