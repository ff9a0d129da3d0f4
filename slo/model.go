package slo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/template"

	"github.com/rl-exporter/rl-exporter/collector/buckets"
)

// latencyBuckets are the classic bucket bounds, in seconds, of
// rate_limit_redis_duration_seconds (plus +Inf), read from the collector's
// metric contract: a latency threshold must be one of them.
var latencyBuckets = buckets.StoreDuration()

// Severities an alert may carry; the Alertmanager routes are built on them.
var Severities = []string{"page", "ticket", "warning"}

// Alert names: stable, part of what on-call people search for.
const (
	AlertRejectionRatioHigh = "RateLimitRejectionRatioHigh"
	AlertStoreLatencyHigh   = "RateLimitStoreLatencyHigh"
	AlertFailOpen           = "RateLimitFailOpen"
	AlertDegraded           = "RateLimitDegraded"
	AlertErrorBudgetBurn    = "RateLimitErrorBudgetBurn"
	AlertMetricsAbsent      = "RateLimitMetricsAbsent"
	AlertRegionSyncLagHigh  = "RateLimitRegionSyncLagHigh"
	AlertRegionUnreachable  = "RateLimitRegionPeerUnreachable"
	AlertCriticalShed       = "RateLimitCriticalShed"
)

// Model is a validated spec with every default applied and every duration
// parsed: the input of the generators. Disabled objectives are nil. A Model
// is immutable after [Compile] and safe for concurrent use.
type Model struct {
	// Source is the spec file the model was compiled from.
	Source string
	// Job is the Prometheus scrape job of the exporter.
	Job string

	Rejection    *RejectionObjective
	Latency      *LatencyObjective
	FailOpen     *FailOpenObjective
	Degraded     *DegradedObjective
	Absent       *Alert
	Availability *AvailabilitySLO
	// Regions is nil unless the spec has a regions: block.
	Regions *RegionsObjective
	// Overload is the upstream's latency objective; never nil.
	Overload *OverloadObjective
	Routing  Routing
	// CostExpired and CostEstimate are the cost alerts; nil when disabled.
	CostExpired  *CostExpiredObjective
	CostEstimate *CostEstimateObjective
	// Warnings are things worth telling the operator that do not make the
	// spec invalid, such as a burn-rate row that can never fire.
	Warnings []string
	// LeasesExpired alerts on concurrency leases never given back.
	LeasesExpired *LeasesExpiredObjective
	// QuotaExpired alerts on quota assignments (rlqs) that expire unrenewed.
	QuotaExpired *QuotaExpiredObjective
	// SharesGiveBacks alerts on give-backs of local shares (shares.enabled) that keep failing.
	SharesGiveBacks *SharesGiveBacksObjective
}

// Alert is what every generated alert has: when it fires and what it says.
type Alert struct {
	Name     string
	For      time.Duration
	Severity string
	// Labels are the spec-wide labels overlaid with the alert's own.
	Labels      map[string]string
	RunbookURL  string
	Summary     string
	Description string
}

// RejectionObjective alerts on the share of 429s per endpoint and plan tier.
type RejectionObjective struct {
	Alert
	Threshold float64 // ratio, 0.05 for 5 %
	MinRate   float64 // decisions per second below which it stays quiet
	Window    time.Duration
}

// LatencyObjective alerts on a quantile of the store latency histogram.
type LatencyObjective struct {
	Alert
	Quantile  float64
	Threshold float64 // seconds, one of latencyBuckets
	Window    time.Duration
}

// FailOpenObjective alerts on requests let through because the store failed.
type FailOpenObjective struct {
	Alert
	Threshold float64 // events within Window
	Window    time.Duration
}

// DegradedObjective alerts when decisions have been made in degraded mode
// (on each instance's share of the limit) for longer than its For.
type DegradedObjective struct {
	Alert
	Window time.Duration
}

// AvailabilitySLO is the limiter's availability objective with its
// multi-window multi-burn-rate table.
type AvailabilitySLO struct {
	Objective float64 // ratio, 0.999 for 99.9 %
	Period    time.Duration
	Rows      []BurnRateRow
	// Template holds labels, runbook and texts shared by every row's alert.
	Template Alert
}

// BurnRateRow is one row of the burn-rate table. Factor is the burn rate:
// BudgetShare × Period ÷ Long; Threshold is the error ratio it stands for:
// Factor × (1 − Objective). A row whose Threshold exceeds 1 can never fire
// (CanFire false) and gets no alert.
type BurnRateRow struct {
	Long, Short time.Duration
	BudgetShare float64
	Severity    string
	For         time.Duration
	Factor      float64
	Threshold   float64
	CanFire     bool
}

// RegionsObjective alerts on the multi-region sync: SyncLag (a warning by
// default) when the counts known from a peer region stay older than
// SyncLagThreshold for SyncLag.For, and Unreachable (a page by default)
// when an instance has had no successful sync with a peer for
// UnreachableFor while its sync errors keep increasing.
type RegionsObjective struct {
	SyncLag          Alert
	SyncLagThreshold time.Duration
	Unreachable      Alert
	UnreachableFor   time.Duration
}

// OverloadObjective is the upstream's latency objective, read by serve's
// server.overload, and the alert on shed critical requests (nil CriticalShed
// when disabled).
type OverloadObjective struct {
	LatencyQuantile  float64
	LatencyThreshold time.Duration
	CriticalShed     *Alert
	Window           time.Duration
}

// Routing is the validated routing section.
type Routing struct {
	GroupBy                                  []string
	GroupWait, GroupInterval, RepeatInterval time.Duration
	Page, Ticket                             ReceiverSpec
}

// Compile applies the defaults to a decoded spec and validates it. file
// names the spec in errors. All problems are reported at once, joined.
func Compile(spec Spec, file string) (*Model, error) {
	c := &compiler{file: file}
	m := &Model{Source: file, Job: spec.Job}
	if spec.Job == "" {
		c.fail("job", "must not be empty")
	}
	c.labels("labels", spec.Labels)
	if _, err := url.ParseRequestURI(spec.RunbookURL); err != nil && spec.RunbookURL != "" {
		c.fail("runbook_url", fmt.Sprintf("not a URL: %v", err))
	}
	c.alertTemplate("runbook_url", spec.RunbookURL)

	if r := spec.RejectionRatio; r.Enabled {
		o := &RejectionObjective{
			Alert:     c.alert("rejection_ratio", AlertRejectionRatioHigh, spec, r.AlertSpec),
			Threshold: roundSig(c.percent("rejection_ratio.threshold_percent", r.ThresholdPercent)/100, 12),
			MinRate:   c.nonNegative("rejection_ratio.min_requests_per_second", r.MinRequestsPerSecond),
			Window:    c.window("rejection_ratio.window", r.Window),
		}
		m.Rejection = o
	}
	if l := spec.StoreLatency; l.Enabled {
		o := &LatencyObjective{
			Alert:    c.alert("store_latency", AlertStoreLatencyHigh, spec, l.AlertSpec),
			Quantile: l.Quantile,
			Window:   c.window("store_latency.window", l.Window),
		}
		if !(l.Quantile > 0 && l.Quantile < 1) {
			c.fail("store_latency.quantile", fmt.Sprintf("%v is not between 0 and 1 (exclusive)", l.Quantile))
		}
		o.Threshold = c.bucketBound("store_latency.threshold", l.Threshold)
		m.Latency = o
	}
	if f := spec.FailOpen; f.Enabled {
		m.FailOpen = &FailOpenObjective{
			Alert:     c.alert("fail_open", AlertFailOpen, spec, f.AlertSpec),
			Threshold: c.nonNegative("fail_open.threshold", f.Threshold),
			Window:    c.window("fail_open.window", f.Window),
		}
	}
	if d := spec.Degraded; d.Enabled {
		m.Degraded = &DegradedObjective{
			Alert:  c.alert("degraded", AlertDegraded, spec, d.AlertSpec),
			Window: c.window("degraded.window", d.Window),
		}
	}
	if a := spec.MetricsAbsent; a.Enabled {
		al := c.alert("metrics_absent", AlertMetricsAbsent, spec, a)
		m.Absent = &al
	}
	if a := spec.Availability; a.Enabled {
		m.Availability = c.availability(spec, a)
		for i, row := range m.Availability.Rows {
			if !row.CanFire {
				m.Warnings = append(m.Warnings, fmt.Sprintf(
					"%s: availability.windows[%d]: burn rate %s × (1 − %s) = %s exceeds 1: this row can never fire and gets no alert",
					file, i, formatFloat(row.Factor), formatFloat(m.Availability.Objective), formatFloat(row.Threshold)))
			}
		}
	}
	if r := spec.Regions; r != nil {
		m.Regions = c.regions(spec, *r)
	}
	m.Overload = c.overload(spec)
	m.LeasesExpired = c.leasesExpired(spec)
	m.QuotaExpired = c.quotaExpired(spec)
	m.SharesGiveBacks = c.sharesGiveBacks(spec)
	m.Routing = c.routing(spec.Routing)
	c.cost(spec, m)
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return m, nil
}

type compiler struct {
	file string
	errs []error
}

func (c *compiler) fail(field, reason string) {
	c.errs = append(c.errs, &FieldError{File: c.file, Field: field, Reason: reason})
}

// duration parses a Prometheus duration; zero is allowed when allowZero.
func (c *compiler) duration(field, s string, allowZero bool) time.Duration {
	if s == "" {
		c.fail(field, "must not be empty")
		return 0
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		c.fail(field, fmt.Sprintf("%q does not parse as a duration (like 30s, 5m, 1h, 3d): %v", s, err))
		return 0
	}
	if d == 0 && !allowZero {
		c.fail(field, "must be longer than 0s")
	}
	return time.Duration(d)
}

func (c *compiler) window(field, s string) time.Duration { return c.duration(field, s, false) }

func (c *compiler) percent(field string, v float64) float64 {
	if !(v > 0 && v < 100) {
		c.fail(field, fmt.Sprintf("%v is not a percentage above 0 and below 100", v))
	}
	return v
}

func (c *compiler) nonNegative(field string, v float64) float64 {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		c.fail(field, fmt.Sprintf("%v must be a finite number, 0 or more", v))
	}
	return v
}

func (c *compiler) severity(field, s string) string {
	if !slices.Contains(Severities, s) {
		c.fail(field, fmt.Sprintf("%q is not one of %s", s, strings.Join(Severities, ", ")))
	}
	return s
}

// reservedLabels are set by the generator and cannot be overridden.
var reservedLabels = []string{"alertname", "severity", "long_window", "short_window", "job", "endpoint", "plan_tier", "operation", "peer_region", "upstream"}

func (c *compiler) labels(field string, l map[string]string) {
	for k, v := range l {
		switch {
		case !model.LabelName(k).IsValidLegacy():
			c.fail(field+"."+k, "not a valid label name (letters, digits and _; not starting with a digit)")
		case strings.HasPrefix(k, "__"):
			c.fail(field+"."+k, "label names starting with __ are reserved by Prometheus")
		case slices.Contains(reservedLabels, k):
			c.fail(field+"."+k, "set by the generator; choose another label name")
		case !model.LabelValue(v).IsValid():
			c.fail(field+"."+k, "label value is not valid UTF-8")
		default:
			c.alertTemplate(field+"."+k, v)
		}
	}
}

// alertTemplate fails field unless text parses as a Prometheus alert
// template: Prometheus expands the labels and annotations of an alerting
// rule as templates and refuses to load a rule file where one does not
// parse (the check below is rulefmt's).
func (c *compiler) alertTemplate(field, text string) {
	const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	data := template.AlertTemplateData(map[string]string{}, map[string]string{}, "", promql.Sample{})
	t := template.NewTemplateExpander(context.Background(), defs+text, "__alert_check", data, 0, nil, nil, nil)
	if err := t.ParseTest(); err != nil {
		c.fail(field, fmt.Sprintf("not a valid Prometheus alert template: %v", err))
	}
}

func (c *compiler) alert(field, name string, spec Spec, a AlertSpec) Alert {
	c.labels(field+".labels", a.Labels)
	c.alertTemplate(field+".summary", a.Summary)
	c.alertTemplate(field+".description", a.Description)
	c.alertTemplate(field+".runbook_url", a.RunbookURL)
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	for k, v := range a.Labels {
		labels[k] = v
	}
	runbook := a.RunbookURL
	if runbook == "" && spec.RunbookURL != "" {
		runbook = spec.RunbookURL + "#" + strings.ToLower(name)
	} else if runbook != "" {
		if _, err := url.ParseRequestURI(runbook); err != nil {
			c.fail(field+".runbook_url", fmt.Sprintf("not a URL: %v", err))
		}
	}
	return Alert{
		Name:        name,
		For:         c.duration(field+".for", a.For, true),
		Severity:    c.severity(field+".severity", a.Severity),
		Labels:      labels,
		RunbookURL:  runbook,
		Summary:     a.Summary,
		Description: a.Description,
	}
}

func (c *compiler) bucketBound(field, s string) float64 {
	d := c.duration(field, s, false)
	if d == 0 {
		return 0
	}
	secs := d.Seconds()
	i := slices.Index(latencyBuckets, secs)
	if i < 0 || i == len(latencyBuckets)-1 {
		bounds := make([]string, 0, len(latencyBuckets))
		for _, b := range latencyBuckets[:len(latencyBuckets)-1] {
			bounds = append(bounds, model.Duration(time.Duration(b*float64(time.Second))).String())
		}
		why := "is not a bucket bound of rate_limit_redis_duration_seconds, so the quantile would be interpolated across a bucket"
		if i == len(latencyBuckets)-1 {
			why = "is the highest finite bucket bound of rate_limit_redis_duration_seconds; histogram_quantile never reports more, so the alert could not fire"
		}
		c.fail(field, fmt.Sprintf("%s %s; use one of %s (buckets %s, +Inf)", s, why,
			strings.Join(bounds, ", "), bucketList()))
	}
	return secs
}

func bucketList() string {
	s := make([]string, len(latencyBuckets))
	for i, b := range latencyBuckets {
		s[i] = strconv.FormatFloat(b, 'g', -1, 64)
	}
	return strings.Join(s, ", ")
}

func (c *compiler) availability(spec Spec, a AvailabilitySpec) *AvailabilitySLO {
	slo := &AvailabilitySLO{Period: c.window("availability.period", a.Period)}
	if !(a.ObjectivePercent > 0 && a.ObjectivePercent < 100) {
		c.fail("availability.objective_percent", fmt.Sprintf("%v is not a percentage above 0 and below 100 (an objective of 100 %% leaves no error budget)", a.ObjectivePercent))
	}
	slo.Objective = roundSig(a.ObjectivePercent/100, 12)
	slo.Template = c.alert("availability", AlertErrorBudgetBurn, spec, AlertSpec{
		Labels: a.Labels, RunbookURL: a.RunbookURL, Summary: a.Summary, Description: a.Description,
		For: "0s", Severity: "page",
	})
	if len(a.Windows) == 0 {
		c.fail("availability.windows", "needs at least one row (or set availability.enabled: false)")
	}
	for i, w := range a.Windows {
		f := fmt.Sprintf("availability.windows[%d]", i)
		row := BurnRateRow{
			Long:        c.window(f+".long", w.Long),
			Short:       c.window(f+".short", w.Short),
			BudgetShare: roundSig(c.percentUpTo100(f+".budget_percent", w.BudgetPercent)/100, 12),
			Severity:    c.severity(f+".severity", w.Severity),
			For:         c.duration(f+".for", w.For, true),
		}
		if row.Long > 0 && row.Short >= row.Long {
			c.fail(f+".short", fmt.Sprintf("%s must be shorter than the long window %s", w.Short, w.Long))
		}
		if row.Long > slo.Period && slo.Period > 0 {
			c.fail(f+".long", fmt.Sprintf("%s is longer than the SLO period %s", w.Long, a.Period))
		}
		if row.Long > 0 && slo.Period > 0 {
			row.Factor = roundSig(row.BudgetShare*float64(slo.Period)/float64(row.Long), 10)
			row.Threshold = roundSig(row.Factor*(1-slo.Objective), 10)
			row.CanFire = row.Threshold < 1
		}
		for j, prev := range slo.Rows {
			if prev.Long == row.Long && prev.Short == row.Short && prev.Long > 0 {
				c.fail(f, fmt.Sprintf("same long and short windows as availability.windows[%d]", j))
			}
		}
		slo.Rows = append(slo.Rows, row)
	}
	return slo
}

func (c *compiler) regions(spec Spec, r RegionsSpec) *RegionsObjective {
	c.labels("regions.labels", r.Labels)
	o := &RegionsObjective{
		SyncLagThreshold: c.window("regions.sync_lag_threshold", r.SyncLagThreshold),
		UnreachableFor:   c.window("regions.unreachable_for", r.UnreachableFor),
	}
	// alert() checks the labels, severity and for: of one alert block; here
	// two alerts share one block, so each field is checked once under the
	// name the file uses.
	regionAlert := func(name, forField, forValue, sevField, sevValue string) Alert {
		a := c.alert("regions", name, spec, AlertSpec{For: "0s", Severity: Severities[0]})
		maps.Copy(a.Labels, r.Labels)
		a.For = c.duration(forField, forValue, true)
		a.Severity = c.severity(sevField, sevValue)
		return a
	}
	o.SyncLag = regionAlert(AlertRegionSyncLagHigh, "regions.sync_lag_for", r.SyncLagFor, "regions.sync_lag_severity", r.SyncLagSeverity)
	o.Unreachable = regionAlert(AlertRegionUnreachable, "", "0s", "regions.unreachable_severity", r.UnreachableSeverity)
	if o.SyncLagThreshold > 0 && o.UnreachableFor > 0 && o.SyncLagThreshold >= o.UnreachableFor {
		c.fail("regions.sync_lag_threshold", fmt.Sprintf("%s must be shorter than regions.unreachable_for (%s): the warning on a growing lag comes before the page on a lost peer",
			r.SyncLagThreshold, r.UnreachableFor))
	}
	return o
}

func (c *compiler) overload(spec Spec) *OverloadObjective {
	o := spec.Overload
	out := &OverloadObjective{LatencyQuantile: o.LatencyQuantile, LatencyThreshold: c.window("overload.latency_threshold", o.LatencyThreshold)}
	if !(o.LatencyQuantile > 0 && o.LatencyQuantile < 1) {
		c.fail("overload.latency_quantile", fmt.Sprintf("%v is not between 0 and 1 (exclusive)", o.LatencyQuantile))
	}
	if a := o.CriticalShed; a.Enabled {
		al := c.alert("overload.critical_shed", AlertCriticalShed, spec, a.AlertSpec)
		out.CriticalShed = &al
		out.Window = c.window("overload.critical_shed.window", a.Window)
	}
	return out
}

func (c *compiler) percentUpTo100(field string, v float64) float64 {
	if !(v > 0 && v <= 100) {
		c.fail(field, fmt.Sprintf("%v is not a percentage above 0 and at most 100", v))
	}
	return v
}

func (c *compiler) routing(r RoutingSpec) Routing {
	out := Routing{
		GroupBy:        r.GroupBy,
		GroupWait:      c.window("routing.group_wait", r.GroupWait),
		GroupInterval:  c.window("routing.group_interval", r.GroupInterval),
		RepeatInterval: c.window("routing.repeat_interval", r.RepeatInterval),
		Page:           c.receiver("routing.page", r.Page),
		Ticket:         c.receiver("routing.ticket", r.Ticket),
	}
	for i, l := range r.GroupBy {
		if l != "..." && !model.LabelName(l).IsValidLegacy() {
			c.fail(fmt.Sprintf("routing.group_by[%d]", i), fmt.Sprintf("%q is not a valid label name", l))
		}
	}
	return out
}

func (c *compiler) receiver(field string, r ReceiverSpec) ReceiverSpec {
	if r.Webhook == nil && r.PagerDuty == nil && r.Opsgenie == nil && r.Slack == nil {
		r.Webhook = &WebhookSpec{URL: DefaultWebhookURL}
	}
	if w := r.Webhook; w != nil {
		c.httpURL(field+".webhook.url", w.URL, true)
	}
	if p := r.PagerDuty; p != nil {
		if (p.RoutingKeyFile == "") == (p.ServiceKeyFile == "") {
			c.fail(field+".pagerduty", "needs exactly one of routing_key_file (Events API v2) or service_key_file (v1)")
		}
		c.httpURL(field+".pagerduty.url", p.URL, false)
	}
	if o := r.Opsgenie; o != nil {
		if o.APIKeyFile == "" {
			c.fail(field+".opsgenie.api_key_file", "must name the file holding the Opsgenie API key")
		}
		c.httpURL(field+".opsgenie.api_url", o.APIURL, false)
	}
	if s := r.Slack; s != nil && s.APIURLFile == "" {
		c.fail(field+".slack.api_url_file", "must name the file holding the Slack webhook URL")
	}
	return r
}

func (c *compiler) httpURL(field, s string, required bool) {
	if s == "" {
		if required {
			c.fail(field, "must not be empty")
		}
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.fail(field, fmt.Sprintf("%q is not an http or https URL", s))
		return
	}
	if u.User != nil {
		// Quoting the URL back would print the very secret.
		c.fail(field, fmt.Sprintf("%s://%s: a user or password in the URL would be written into the generated configuration; secrets are read from files (for a webhook, credentials_file)", u.Scheme, u.Host))
	}
}

// roundSig rounds v to n significant digits, so 0.02 × 720 is 14.4 and not
// 14.400000000000002 in the generated expressions.
func roundSig(v float64, n int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', n, 64), 64)
	return f
}

// formatFloat writes v as short as it reads back exactly.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// formatDuration writes d the way Prometheus does (5m, 1h, 3d).
func formatDuration(d time.Duration) string { return model.Duration(d).String() }
