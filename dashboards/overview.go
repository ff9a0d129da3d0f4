package dashboards

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/rl-exporter/rl-exporter/slo"
)

// Identity of the Overview dashboard: its uid is stable so that links to it
// survive regeneration.
const (
	OverviewUID   = "rl-exporter-overview"
	OverviewTitle = "rl-exporter / Overview"
)

// Template variables every dashboard defines. Queries select with
// job=~"$job", instance=~"$instance", endpoint=~"$endpoint" and
// plan_tier=~"$plan_tier"; panels and queries name their data source as
// ${datasource}. $job defaults to the spec's job.
const (
	VarDatasource = "datasource"
	VarJob        = "job"
	VarInstance   = "instance"
	VarEndpoint   = "endpoint"
	VarPlanTier   = "plan_tier"
)

// Series of the exporter's metric contract read by the dashboards (the
// collector exports them; see docs/metrics.md).
const (
	metricRequests     = "rate_limit_requests_total"
	metricNearLimit    = "rate_limit_near_limit_total"
	metricLimit        = "rate_limit_limit"
	metricStoreLatency = "rate_limit_redis_duration_seconds"
	metricFailOpen     = "rate_limit_fail_open_total"
	metricFailClosed   = "rate_limit_fail_closed_total"
	metricStoreErrors  = "rate_limit_store_errors_total"
	metricCircuit      = "rate_limit_circuit_state"
	metricBuildInfo    = "rl_exporter_build_info"
)

// refused selects the decisions answered 429 (slo.RefusedStatuses).
const refused = `status=~"` + slo.RefusedStatuses + `"`

// Units, as Grafana names them.
const (
	unitReqPerSec = "reqps"
	unitOpsPerSec = "ops"
	unitRatio     = "percentunit"
	unitSeconds   = "s"
	unitCount     = "short"
	unitTimes     = "suffix:×"
)

// Threshold colours by severity.
var severityColor = map[string]string{"page": "red", "ticket": "orange", "warning": "yellow"}

var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + VarDatasource + "}")}

// overview builds the Overview dashboard from the model. source names the
// spec in the "generated" description.
func overview(m *slo.Model, source string) (dashboard.Dashboard, error) {
	q := queries{}
	b := overviewFrame(m, q, source)

	var id uint32
	next := func() uint32 { id++; return id }
	row := func(title string) { b.WithRow(dashboard.NewRowBuilder(title).Id(next())) }

	rejectionRunbook := runbook(m.Rejection != nil, func() slo.Alert { return m.Rejection.Alert })

	row("Decisions")
	b.WithPanel(decisionsPanel(q, next(), VarEndpoint, rejectionRunbook))
	b.WithPanel(decisionsPanel(q, next(), VarPlanTier, rejectionRunbook))
	b.WithPanel(rejectionRatioPanel(m, q, next()))
	b.WithPanel(limitPanel(q, next(), rejectionRunbook))
	b.WithPanel(limitsPanel(q, next(), rejectionRunbook))

	row("Store")
	b.WithPanel(latencyPanel(m, q, next()))
	b.WithPanel(latencyHeatmap(m, q, next()))
	b.WithPanel(failuresPanel(m, q, next()))
	b.WithPanel(storeErrorsPanel(m, q, next()))
	b.WithPanel(circuitPanel(m, q, next()))

	if s := m.Availability; s != nil {
		row(fmt.Sprintf("Availability SLO: %s of decisions neither fail open nor closed over %s", percent(s.Objective), duration(s.Period)))
		b.WithPanel(budgetPanel(m, q, next()))
		b.WithPanel(burnRatePanel(m, q, next()))
	}

	if o := m.Regions; o != nil {
		row(RegionsRowTitle)
		for _, p := range regionPanels(o, q, next) {
			b.WithPanel(p)
		}
	}

	row(CostRowTitle)
	for _, p := range costPanels(m, q, next) {
		b.WithPanel(p)
	}
	if o := m.Overload; o != nil {
		row(OverloadRowTitle)
		for _, p := range overloadPanels(o, q, next) {
			b.WithPanel(p)
		}
	}
	if o := m.LeasesExpired; o != nil {
		row(ConcurrencyRowTitle)
		for _, p := range leasePanels(o, q, next) {
			b.WithPanel(p)
		}
	}
	if o := m.QuotaExpired; o != nil {
		row(QuotaRowTitle)
		for _, p := range quotaPanels(o, q, next) {
			b.WithPanel(p)
		}
	}

	row("Trend")
	b.WithPanel(weeklyRejectionPanel(m, q, next()))
	b.WithPanel(instancesPanel(q, next()))

	return b.Build()
}

// overviewFrame is the Overview dashboard without its rows: its identity,
// time settings and variables.
func overviewFrame(m *slo.Model, q queries, source string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(OverviewTitle).
		Uid(OverviewUID).
		Description(generatedMarker(source)).
		Tags([]string{"rl-exporter", "rate-limit", "generated"}).
		Readonly().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder(VarDatasource).
			Label("Data source").
			Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder(VarJob).
			Label("Job").
			Description("The Prometheus job that scrapes rl-exporter; the spec's is " + strconv.Quote(m.Job) + ".").
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: cog.ToPtr(fmt.Sprintf("label_values(%s, %s)", metricBuildInfo, VarJob))}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Current(option(m.Job))).
		WithVariable(multiVariable(VarInstance, "Instance", "The rl-exporter processes of the job (the instance label).",
			fmt.Sprintf(`label_values(%s{job=~"$job"}, %s)`, metricBuildInfo, VarInstance))).
		WithVariable(multiVariable(VarEndpoint, "Endpoint", "Route patterns of the limiter's configuration (the endpoint label).",
			q.labelValues(metricRequests, "", VarEndpoint))).
		WithVariable(multiVariable(VarPlanTier, "Plan tier", "Plan tiers of the limiter's configuration (the plan_tier label).",
			q.labelValues(metricRequests, `endpoint=~"$endpoint"`, VarPlanTier)))
}

// multiVariable is a query variable of several values, All by default,
// refreshed with the time range.
func multiVariable(name, label, description, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Description(description).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Current(allOption())
}

func generatedMarker(source string) string {
	return fmt.Sprintf("Code generated by rl-exporter rules from %s. DO NOT EDIT: change the spec and run `rl-exporter rules`. "+
		"Decisions, limits, store latency and failures of the rl-exporter rate limiter, with its SLO.", source)
}

// option is a single selected value of a variable.
func option(v string) dashboard.VariableOption {
	return dashboard.VariableOption{
		Text:  dashboard.StringOrArrayOfString{String: cog.ToPtr(v)},
		Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(v)},
	}
}

func allOption() dashboard.VariableOption {
	return dashboard.VariableOption{
		Text:  dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
		Value: dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
	}
}

// queries writes the PromQL of the panels.
type queries struct{}

// jobMatch selects the $job variable's job; recorded series keep the job
// label, not the instance.
const jobMatch = `job=~"$job"`

// sel is the selector of a raw series: the job and instance variables, the
// endpoint and plan tier variables where the series has those labels, and
// extra matchers.
func (q queries) sel(endpoint, tier bool, extra ...string) string {
	m := []string{jobMatch, `instance=~"$instance"`}
	if endpoint {
		m = append(m, `endpoint=~"$endpoint"`)
	}
	if tier {
		m = append(m, `plan_tier=~"$plan_tier"`)
	}
	return "{" + strings.Join(append(m, extra...), ", ") + "}"
}

func (q queries) labelValues(metric, extra, label string) string {
	m := jobMatch + `, instance=~"$instance"`
	if extra != "" {
		m += ", " + extra
	}
	return fmt.Sprintf("label_values(%s{%s}, %s)", metric, m, label)
}

// ratio divides two rates with a guarded denominator, so no traffic draws
// no line instead of NaN.
func ratio(num, den string) string { return num + "\n/\n(" + den + " > 0)" }

func target(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		RefId(ref).
		Datasource(datasource).
		Expr(expr).
		LegendFormat(legend).
		Range()
}

// runbookLink is a panel link to an alert's runbook; nil when the alert is
// off or has no runbook.
type runbookLink struct{ alert, url string }

func runbook(enabled bool, alert func() slo.Alert) *runbookLink {
	if !enabled {
		return nil
	}
	a := alert()
	if a.RunbookURL == "" {
		return nil
	}
	return &runbookLink{alert: a.Name, url: a.RunbookURL}
}

func links(rbs ...*runbookLink) []cog.Builder[dashboard.DashboardLink] {
	var out []cog.Builder[dashboard.DashboardLink]
	for _, rb := range rbs {
		if rb == nil {
			continue
		}
		out = append(out, dashboard.NewDashboardLinkBuilder("Runbook: "+rb.alert).
			Type(dashboard.DashboardLinkTypeLink).
			Url(rb.url).
			Tooltip("What "+rb.alert+" means and what to do").
			TargetBlank(true))
	}
	return out
}

// thresholds is a green base with one step per threshold.
func thresholds(steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	all := append([]dashboard.Threshold{{Color: "green"}}, steps...)
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(all)
}

func step(v float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: cog.ToPtr(v), Color: color}
}

func lineThresholds() *common.GraphThresholdsStyleConfigBuilder {
	return common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)
}

func noThresholdLine() *common.GraphThresholdsStyleConfigBuilder {
	return common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeOff)
}

// timeseriesPanel sets what every time series panel shares.
func timeseriesPanel(id uint32, title, description, unit string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Id(id).
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Min(0).
		Span(12).
		Height(8).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

func decisionsPanel(q queries, id uint32, by string, rb *runbookLink) *timeseries.PanelBuilder {
	name := map[string]string{VarEndpoint: "endpoint", VarPlanTier: "plan tier"}[by]
	return timeseriesPanel(id, "Decisions per second by "+name,
		fmt.Sprintf("Rate-limit decisions per second by %s and outcome: allowed, rejected (429), shadow_rejected (over the limit in shadow mode, let through), fail_open, fail_closed and penalized (429 while in a penalty box).", name),
		unitReqPerSec).
		WithTarget(target("A",
			fmt.Sprintf("sum by (%s, status) (rate(%s%s[$__rate_interval]))", by, metricRequests, q.sel(true, true)),
			fmt.Sprintf("{{%s}} {{status}}", by))).
		Thresholds(thresholds()).
		ThresholdsStyle(noThresholdLine()).
		OverrideByRegexp(".* allowed$", fixedColor("green")).
		OverrideByRegexp(".* rejected$", fixedColor("red")).
		OverrideByRegexp(".* fail_(open|closed)$", fixedColor("orange")).
		OverrideByRegexp(".* penalized$", fixedColor("purple")).
		Links(links(rb))
}

func fixedColor(c string) []dashboard.DynamicConfigValue {
	return []dashboard.DynamicConfigValue{{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": c}}}
}

// rejectionRatioPanel draws the 429 ratio. With a rejection objective it is
// the alert's record computed again from the raw series over the record's
// window: the record aggregates job and instance away, so $job and
// $instance could not filter it.
func rejectionRatioPanel(m *slo.Model, q queries, id uint32) *timeseries.PanelBuilder {
	desc := "Share of decisions answered 429, per endpoint and plan tier: rejected by the limit, or penalized (a client in its penalty box)."
	p := timeseriesPanel(id, "429 ratio by endpoint and plan tier", "", unitRatio)
	window := "$__rate_interval"
	if o := m.Rejection; o != nil {
		window = duration(o.Window)
		desc += fmt.Sprintf(" Over %s, as the recording rule %s the %s alert reads (which sums every instance of the job): the dashed line is its threshold (%s, %s, for %s, only above %s decisions/s).",
			window, slo.RejectionRatioRecord(o.Window), o.Name, percent(o.Threshold), o.Severity, duration(o.For), formatFloat(o.MinRate))
		p.Thresholds(thresholds(step(o.Threshold, severityColor[o.Severity]))).
			ThresholdsStyle(lineThresholds()).
			Links(links(runbook(true, func() slo.Alert { return o.Alert })))
	} else {
		p.Thresholds(thresholds()).ThresholdsStyle(noThresholdLine())
	}
	p.WithTarget(target("A", ratio(
		fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[%s]))", metricRequests, q.sel(true, true, refused), window),
		fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[%s]))", metricRequests, q.sel(true, true), window)),
		"{{endpoint}} {{plan_tier}}"))
	return p.Description(desc)
}

func limitPanel(q queries, id uint32, rb *runbookLink) *timeseries.PanelBuilder {
	all := fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[$__rate_interval]))", metricRequests, q.sel(true, true))
	return timeseriesPanel(id, "Limit in force against usage",
		"Right axis: the limit in force (rate_limit_limit: requests per window, or the bucket size of token and leaky buckets), "+
			"which moves when limits change live. Left axis: how close clients come to it: the share of decisions that were allowed "+
			"but left less than the near-limit share of the quota (the early warning), and the share answered 429 (rejected or penalized).",
		unitRatio).
		WithTarget(target("A", fmt.Sprintf("max by (endpoint, plan_tier, algorithm) (%s%s)", metricLimit, q.sel(true, true)),
			"limit {{endpoint}} {{plan_tier}} ({{algorithm}})")).
		WithTarget(target("B", ratio(
			fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[$__rate_interval]))", metricNearLimit, q.sel(true, true)), all),
			"near the limit {{endpoint}} {{plan_tier}}")).
		WithTarget(target("C", ratio(
			fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[$__rate_interval]))", metricRequests, q.sel(true, true, refused)), all),
			"over the limit {{endpoint}} {{plan_tier}}")).
		Thresholds(thresholds()).
		ThresholdsStyle(noThresholdLine()).
		AxisLabel("share of decisions").
		OverrideByQuery("A", []dashboard.DynamicConfigValue{
			{Id: "unit", Value: unitCount},
			{Id: "custom.axisPlacement", Value: string(common.AxisPlacementRight)},
			{Id: "custom.axisLabel", Value: "limit (requests per window or bucket size)"},
			{Id: "custom.lineInterpolation", Value: string(common.LineInterpolationStepAfter)},
			{Id: "custom.fillOpacity", Value: 0},
			{Id: "custom.lineWidth", Value: 2},
		}).
		Links(links(rb))
}

// latencyQuantile is the quantile the latency panel draws beside the
// median: the spec's, or the p99.
func latencyQuantile(m *slo.Model) float64 {
	if m.Latency != nil {
		return m.Latency.Quantile
	}
	return 0.99
}

func latencyPanel(m *slo.Model, q queries, id uint32) *timeseries.PanelBuilder {
	qt := latencyQuantile(m)
	buckets := fmt.Sprintf("sum by (operation, le) (rate(%s_bucket%s[$__rate_interval]))", metricStoreLatency, q.sel(false, false))
	desc := "How long decisions waited on the store (Redis or memory), timeouts included, by operation (the algorithm)."
	p := timeseriesPanel(id, "Store latency "+quantileName(0.5)+" / "+quantileName(qt), "", unitSeconds).
		WithTarget(target("A", fmt.Sprintf("histogram_quantile(0.5, %s)", buckets), quantileName(0.5)+" {{operation}}")).
		WithTarget(target("B", fmt.Sprintf("histogram_quantile(%s, %s)", formatFloat(qt), buckets), quantileName(qt)+" {{operation}}"))
	if o := m.Latency; o != nil {
		desc += fmt.Sprintf(" The dashed line is the %s threshold (%s of the %s over %s, %s, for %s).",
			o.Name, duration(time.Duration(o.Threshold*float64(time.Second))), quantileName(o.Quantile), duration(o.Window), o.Severity, duration(o.For))
		p.Thresholds(thresholds(step(o.Threshold, severityColor[o.Severity]))).
			ThresholdsStyle(lineThresholds()).
			Links(links(runbook(true, func() slo.Alert { return o.Alert })))
	} else {
		p.Thresholds(thresholds()).ThresholdsStyle(noThresholdLine())
	}
	return p.Description(desc)
}

func latencyHeatmap(m *slo.Model, q queries, id uint32) *heatmap.PanelBuilder {
	p := heatmap.NewPanelBuilder().
		Id(id).
		Title("Store latency distribution").
		Description("Decisions per latency bucket of " + metricStoreLatency + " (classic buckets), all operations.").
		Datasource(datasource).
		Span(12).
		Height(8).
		Unit(unitSeconds).
		WithTarget(target("A",
			fmt.Sprintf("sum by (le) (increase(%s_bucket%s[$__rate_interval]))", metricStoreLatency, q.sel(false, false)),
			"{{le}}").Format(prometheus.PromQueryFormatHeatmap)).
		Calculate(false).
		RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutLe)).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit(unitSeconds).AxisLabel("store latency")).
		Color(heatmap.NewHeatmapColorOptionsBuilder().
			Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Oranges").
			Scale(heatmap.HeatmapColorScaleExponential).
			Exponent(0.5).
			Fill("dark-orange").
			Steps(64)).
		CellValues(heatmap.NewCellValuesBuilder().Unit(unitCount)).
		ShowLegend()
	if o := m.Latency; o != nil {
		p.Links(links(runbook(true, func() slo.Alert { return o.Alert })))
	}
	return p
}

func failuresPanel(m *slo.Model, q queries, id uint32) *timeseries.PanelBuilder {
	window := time.Minute
	if m.FailOpen != nil {
		window = m.FailOpen.Window
	}
	w := duration(window)
	p := timeseriesPanel(id, "Fail-open and fail-closed events per "+w, "", unitCount).
		AxisLabel("requests per " + w).
		WithTarget(target("A",
			fmt.Sprintf("sum by (endpoint, reason) (increase(%s%s[%s]))", metricFailOpen, q.sel(true, false), w),
			"fail open {{endpoint}} ({{reason}})")).
		WithTarget(target("B",
			fmt.Sprintf("sum by (endpoint, reason) (increase(%s%s[%s]))", metricFailClosed, q.sel(true, false), w),
			"fail closed {{endpoint}} ({{reason}})"))
	desc := "Requests let through (fail open) or refused with 503 (fail closed) because the store failed, by endpoint and reason."
	if o := m.FailOpen; o != nil {
		desc += fmt.Sprintf(" The total line is the recording rule %s, summed over all instances and endpoints as the %s alert reads it: "+
			"the dashed line is its threshold (more than %s within %s, %s).", slo.FailOpenRecord(o.Window), o.Name,
			formatFloat(o.Threshold), w, o.Severity)
		p.WithTarget(target("C", slo.FailOpenRecord(o.Window)+"{"+jobMatch+"}", "fail open, all instances")).
			Thresholds(thresholds(step(o.Threshold, severityColor[o.Severity]))).
			ThresholdsStyle(lineThresholds()).
			Links(links(runbook(true, func() slo.Alert { return o.Alert })))
	} else {
		p.Thresholds(thresholds()).ThresholdsStyle(noThresholdLine())
	}
	return p.Description(desc)
}

func storeErrorsPanel(m *slo.Model, q queries, id uint32) *timeseries.PanelBuilder {
	p := timeseriesPanel(id, "Store errors per second",
		"Store calls that failed, by store and kind (timeout, error). Each one becomes a fail-open or fail-closed decision, as the fail policy says.",
		unitOpsPerSec).
		WithTarget(target("A",
			fmt.Sprintf("sum by (store, kind) (rate(%s%s[$__rate_interval]))", metricStoreErrors, q.sel(false, false)),
			"{{store}} {{kind}}")).
		Thresholds(thresholds()).
		ThresholdsStyle(noThresholdLine())
	if o := m.FailOpen; o != nil {
		p.Links(links(runbook(true, func() slo.Alert { return o.Alert })))
	}
	return p
}

// circuitPanel shows each breaker's state, the worst instance's: one series
// for a single Redis or memory store, one per master on a Redis Cluster
// (store="redis/<address>"), with no series for the Cluster as a whole.
func circuitPanel(m *slo.Model, q queries, id uint32) *timeseries.PanelBuilder {
	p := timeseriesPanel(id, "Circuit breakers (0 closed, 1 half-open, 2 open)",
		"The circuit breaker in front of the store, the worst state among the selected instances: one series for a single "+
			"Redis or the memory store, one per master on a Redis Cluster (store=\"redis/<address>\"; a master's circuit opens alone, "+
			"and its series is dropped when it leaves the slot map). While open, its decisions follow store.fail_policy without calling it.",
		unitCount).
		WithTarget(target("A", fmt.Sprintf("max by (store) (%s%s)", metricCircuit, q.sel(false, false)), "{{store}}")).
		Max(2).
		Thresholds(thresholds()).
		ThresholdsStyle(noThresholdLine())
	if o := m.FailOpen; o != nil {
		// An open circuit's decisions are what the fail-open alert counts.
		p.Links(links(runbook(true, func() slo.Alert { return o.Alert })))
	}
	return p
}

func budgetPanel(m *slo.Model, q queries, id uint32) *stat.PanelBuilder {
	s := m.Availability
	budget := roundSig(1 - s.Objective)
	burn := runbook(true, func() slo.Alert { return s.Template })
	return stat.NewPanelBuilder().
		Id(id).
		Title("Error budget remaining (" + duration(s.Period) + ")").
		Description(fmt.Sprintf("Share of the %s error budget (1 − %s objective = %s of decisions may fail open or closed) "+
			"not yet spent over the last %s, from the recording rule %s. A 429 is the limiter doing its job and never spends it. Below 0: the SLO is missed.",
			duration(s.Period), percent(s.Objective), percent(budget), duration(s.Period), slo.SLOBudgetRemainingRecord)).
		Datasource(datasource).
		Span(6).
		Height(8).
		Unit(unitRatio).
		Decimals(1).
		WithTarget(target("A", slo.SLOBudgetRemainingRecord+"{"+jobMatch+"}", "budget remaining").Instant()).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
			{Color: "red"}, step(0, "orange"), step(0.25, "green"),
		})).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Links(links(burn))
}

func burnRatePanel(m *slo.Model, q queries, id uint32) *timeseries.PanelBuilder {
	s := m.Availability
	budget := formatFloat(roundSig(1 - s.Objective))
	var steps []dashboard.Threshold
	var table []string
	seen := map[float64]bool{}
	p := timeseriesPanel(id, "Error budget burn rate", "", unitTimes).Span(18)
	ref := 'A'
	for _, w := range burnWindows(s) {
		p.WithTarget(target(string(ref), fmt.Sprintf("%s{%s} / %s", slo.ErrorRatioRecord(w), jobMatch, budget), "over "+duration(w)))
		ref++
	}
	for _, r := range s.Rows {
		if !r.CanFire {
			table = append(table, fmt.Sprintf("%s/%s: %s× can never fire", duration(r.Long), duration(r.Short), formatFloat(r.Factor)))
			continue
		}
		table = append(table, fmt.Sprintf("%s when both %s and %s burn above %s×", r.Severity, duration(r.Long), duration(r.Short), formatFloat(r.Factor)))
		if !seen[r.Factor] {
			seen[r.Factor] = true
			steps = append(steps, step(r.Factor, severityColor[r.Severity]))
		}
	}
	slices.SortFunc(steps, func(a, b dashboard.Threshold) int {
		switch {
		case *a.Value < *b.Value:
			return -1
		case *a.Value > *b.Value:
			return 1
		}
		return 0
	})
	return p.Description(fmt.Sprintf("How fast decisions failing open or closed spend the error budget: the error ratio over each window of the "+
		"burn-rate table divided by the budget (%s); 1× spends exactly the budget in %s. The dashed lines are the factors of the table "+
		"(%s): %s.", budget, duration(s.Period), s.Template.Name, strings.Join(table, "; "))).
		Thresholds(thresholds(steps...)).
		ThresholdsStyle(lineThresholds()).
		Links(links(runbook(true, func() slo.Alert { return s.Template })))
}

// burnWindows lists the windows the burn-rate alerts read (and the
// generator records), shortest first.
func burnWindows(s *slo.AvailabilitySLO) []time.Duration {
	var out []time.Duration
	for _, r := range s.Rows {
		if !r.CanFire {
			continue
		}
		for _, w := range []time.Duration{r.Short, r.Long} {
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	slices.Sort(out)
	return out
}

func weeklyRejectionPanel(m *slo.Model, q queries, id uint32) *timeseries.PanelBuilder {
	p := timeseriesPanel(id, "429 ratio week by week",
		"Share of all decisions answered 429 (rejected or penalized) over each week, for the last twelve weeks: the trend to follow while tuning limits "+
			"(a ratio falling from 8.2 % to 1.7 % over a few weeks means the limits now fit real traffic).",
		unitRatio).
		Span(18).
		Interval("1w").
		TimeFrom("12w").
		DrawStyle(common.GraphDrawStyleBars).
		FillOpacity(60).
		WithTarget(target("A", ratio(
			fmt.Sprintf("sum(increase(%s%s[1w]))", metricRequests, q.sel(true, true, refused)),
			fmt.Sprintf("sum(increase(%s%s[1w]))", metricRequests, q.sel(true, true))),
			"429 ratio over the week"))
	if o := m.Rejection; o != nil {
		p.Thresholds(thresholds(step(o.Threshold, severityColor[o.Severity]))).
			ThresholdsStyle(lineThresholds()).
			Links(links(runbook(true, func() slo.Alert { return o.Alert })))
	} else {
		p.Thresholds(thresholds()).ThresholdsStyle(noThresholdLine())
	}
	return p
}

func instancesPanel(q queries, id uint32) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Id(id).
		Title("Instances by version").
		Description("rl-exporter processes scraped, by version (" + metricBuildInfo + ").").
		Datasource(datasource).
		Span(6).
		Height(8).
		Unit(unitCount).
		WithTarget(target("A", fmt.Sprintf("count by (version) (%s%s)", metricBuildInfo, q.sel(false, false)), "{{version}}").Instant()).
		Thresholds(thresholds()).
		ColorMode(common.BigValueColorModeNone).
		GraphMode(common.BigValueGraphModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
}

func duration(d time.Duration) string { return model.Duration(d).String() }

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// percent writes a ratio as a percentage: 0.05 as "5%", 0.999 as "99.9%".
func percent(r float64) string { return formatFloat(roundSig(r*100)) + "%" }

// roundSig rounds v to 10 significant digits, so 1 − 0.999 is 0.001 and not
// 0.0010000000000000009 in the queries.
func roundSig(v float64) float64 {
	f, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64)
	if err != nil {
		return v
	}
	return f
}

// quantileName writes 0.99 as p99 and 0.5 as p50, as slo names its
// recording rules.
func quantileName(q float64) string {
	digits := strings.TrimPrefix(strconv.FormatFloat(q, 'f', -1, 64), "0.")
	if len(digits) == 1 {
		digits += "0"
	}
	return "p" + digits
}
