package slo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Series read by the rules: the exporter's public metric contract.
const (
	metricRequests     = "rate_limit_requests_total"
	metricRefusals     = "rate_limit_refusals_total"
	metricRedisLatency = "rate_limit_redis_duration_seconds"
	metricFailOpen     = "rate_limit_fail_open_total"
	metricDegraded     = "rate_limit_degraded_total"
	metricRegionLag    = "rate_limit_region_sync_lag_seconds"
	metricRegionErrors = "rate_limit_region_sync_errors_total"
	metricShed         = "rate_limit_shed_total"
)

// RefusedStatuses matches the statuses of rate_limit_requests_total answered
// 429: rejected by the limit, and penalized while a client is in its class's
// penalty box, so that a 429 ratio stays up for a client the box holds.
const RefusedStatuses = "rejected|penalized"

// Rule group names, one per objective: a group evaluates its recording rules
// before the alerts that read them, in the same evaluation.
const (
	GroupRejections   = "rl-exporter-rejections"
	GroupStoreLatency = "rl-exporter-store-latency"
	GroupFailOpen     = "rl-exporter-fail-open"
	GroupDegraded     = "rl-exporter-degraded"
	GroupAvailability = "rl-exporter-availability-slo"
	GroupMetrics      = "rl-exporter-metrics"
	GroupRegions      = "rl-exporter-regions"
	GroupOverload     = "rl-exporter-overload"
)

// Recording rule names, in the level:metric:operations convention.

// RejectionRatioRecord names the per endpoint and plan tier 429 ratio.
func RejectionRatioRecord(window time.Duration) string {
	return "endpoint_plan_tier:rate_limit_rejections:ratio_rate" + formatDuration(window)
}

// RefusalRatioRecord names the share of the decisions of each endpoint and plan tier that each
// of its limits refused (a request refused by several limits counts under each).
func RefusalRatioRecord(window time.Duration) string {
	return "endpoint_plan_tier_limit:rate_limit_refusals:ratio_rate" + formatDuration(window)
}

// RequestRateRecord names the per endpoint and plan tier decision rate.
func RequestRateRecord(window time.Duration) string {
	return "endpoint_plan_tier:rate_limit_requests:rate" + formatDuration(window)
}

// LatencyQuantileRecord names the per operation store latency quantile.
func LatencyQuantileRecord(q float64, window time.Duration) string {
	return "operation:rate_limit_redis_duration_seconds:" + quantileName(q) + "_rate" + formatDuration(window)
}

// FailOpenRecord names the fail-open events within window, over the job.
func FailOpenRecord(window time.Duration) string {
	return "job:rate_limit_fail_open:increase" + formatDuration(window)
}

// DegradedRateRecord names the rate of degraded decisions, over the job.
func DegradedRateRecord(window time.Duration) string {
	return "job:rate_limit_degraded:rate" + formatDuration(window)
}

// ErrorRatioRecord names the availability SLO's error ratio over window.
func ErrorRatioRecord(window time.Duration) string {
	return "job:rate_limit_errors:ratio_rate" + formatDuration(window)
}

// promqlParser is the parser every generated expression must pass.
var promqlParser = parser.NewParser(parser.Options{})

// RuleGroups builds the recording and alerting rules of the model as
// Prometheus's own rulefmt types and checks every expression with the PromQL
// parser.
func (m *Model) RuleGroups() (*rulefmt.RuleGroups, error) {
	var groups []rulefmt.RuleGroup
	if o := m.Rejection; o != nil {
		groups = append(groups, m.rejectionGroup(o))
	}
	if o := m.Latency; o != nil {
		groups = append(groups, m.latencyGroup(o))
	}
	if o := m.FailOpen; o != nil {
		groups = append(groups, m.failOpenGroup(o))
	}
	if o := m.Degraded; o != nil {
		groups = append(groups, m.degradedGroup(o))
	}
	if s := m.Availability; s != nil {
		groups = append(groups, m.availabilityGroup(s), *m.sloRecords())
	}
	if o := m.Regions; o != nil {
		groups = append(groups, rulefmt.RuleGroup{Name: GroupRegions, Rules: m.regionRules(o, m.sel)})
	}
	if o := m.Overload; o != nil && o.CriticalShed != nil {
		groups = append(groups, m.overloadGroup(o))
	}
	if o := m.LeasesExpired; o != nil {
		groups = append(groups, m.leasesGroup(o))
	}
	if o := m.QuotaExpired; o != nil {
		groups = append(groups, m.quotaGroup(o))
	}
	if o := m.SharesGiveBacks; o != nil {
		groups = append(groups, m.sharesGroup(o))
	}
	if a := m.Absent; a != nil {
		groups = append(groups, m.absentGroup(a))
	}
	if m.CostExpired != nil || m.CostEstimate != nil {
		groups = append(groups, m.costGroup())
	}
	rg := &rulefmt.RuleGroups{Groups: groups}
	if err := checkRuleGroups(rg); err != nil {
		return nil, err
	}
	return rg, nil
}

// sel is the series selector of the model's job, with extra matchers.
func (m *Model) sel(extra string) string {
	s := "job=" + strconv.Quote(m.Job)
	if extra != "" {
		s += "," + extra
	}
	return "{" + s + "}"
}

// rejectionGroup records the rejection ratio, the share each limit refused, and alerts per
// limit: each limit's refusals (rate_limit_refusals_total), so that the tier of several limits
// names the one too low; beside them, without a limit label, the 429s of the penalty box
// (penalized, which no limit decided) and, from an exporter without rate_limit_refusals_total,
// every 429 of the endpoint and tier.
func (m *Model) rejectionGroup(o *RejectionObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rate := RequestRateRecord(o.Window)
	ratio := RejectionRatioRecord(o.Window)
	byLimit := RefusalRatioRecord(o.Window)
	all := fmt.Sprintf("(sum by (endpoint, plan_tier) (rate(%s%s[%s])) > 0)", metricRequests, m.sel(""), w)
	return rulefmt.RuleGroup{Name: GroupRejections, Rules: []rulefmt.Rule{
		{Record: rate, Expr: fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[%s]))", metricRequests, m.sel(""), w)},
		{Record: ratio, Expr: fmt.Sprintf(
			"sum by (endpoint, plan_tier) (rate(%s%s[%s]))\n/\n%s",
			metricRequests, m.sel(`status=~"`+RefusedStatuses+`"`), w, all)},
		{Record: byLimit, Expr: fmt.Sprintf(
			"sum by (endpoint, plan_tier, limit) (rate(%s%s[%s]))\n/ on (endpoint, plan_tier) group_left ()\n%s",
			metricRefusals, m.sel(""), w, all)},
		alertRule(o.Alert,
			fmt.Sprintf("(\n  %s\n  or on (endpoint, plan_tier)\n  %s\n  or\n  sum by (endpoint, plan_tier) (rate(%s%s[%s]))\n  /\n  %s\n) > %s\nand on (endpoint, plan_tier)\n%s >= %s",
				byLimit, ratio, metricRequests, m.sel(`status="penalized"`), w, all, formatFloat(o.Threshold), rate, formatFloat(o.MinRate)),
			nil,
			"Too many requests to {{ $labels.endpoint }} ({{ $labels.plan_tier }}) are rejected with 429{{ with $labels.limit }} by limit {{ . }}{{ end }}",
			fmt.Sprintf("{{ $value | humanizePercentage }} of the rate limiter's decisions for endpoint {{ $labels.endpoint }}, plan tier {{ $labels.plan_tier }}, were {{ with $labels.limit }}refused by its limit {{ . }}{{ else }}answered 429{{ end }} over the last %s (threshold %s, alerting only above %s decisions/s). A limit may be too low for real traffic, or a client is hammering the API.",
				w, percent(o.Threshold), formatFloat(o.MinRate))),
	}}
}

// latencyGroup records the store latency quantile and alerts on it.
func (m *Model) latencyGroup(o *LatencyObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rec := LatencyQuantileRecord(o.Quantile, o.Window)
	return rulefmt.RuleGroup{Name: GroupStoreLatency, Rules: []rulefmt.Rule{
		{Record: rec, Expr: fmt.Sprintf(
			"histogram_quantile(%s,\n  sum by (operation, le) (rate(%s_bucket%s[%s]))\n  and on (operation)\n  (sum by (operation) (rate(%s_count%s[%s])) > 0)\n)",
			formatFloat(o.Quantile), metricRedisLatency, m.sel(""), w, metricRedisLatency, m.sel(""), w)},
		alertRule(o.Alert, fmt.Sprintf("%s > %s", rec, formatFloat(o.Threshold)), nil,
			"The rate limiter waits too long on its store ({{ $labels.operation }})",
			fmt.Sprintf("The %s quantile of %s for operation {{ $labels.operation }} is {{ $value | humanizeDuration }} over the last %s (threshold %s): every decision waits on the store, so requests feel it.",
				quantileName(o.Quantile), metricRedisLatency, w, formatDuration(time.Duration(o.Threshold*float64(time.Second))))),
	}}
}

// failOpenGroup records fail-open decisions and alerts on them.
func (m *Model) failOpenGroup(o *FailOpenObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rec := FailOpenRecord(o.Window)
	return rulefmt.RuleGroup{Name: GroupFailOpen, Rules: []rulefmt.Rule{
		{Record: rec, Expr: fmt.Sprintf("sum by (job) (increase(%s%s[%s]))", metricFailOpen, m.sel(""), w)},
		alertRule(o.Alert, fmt.Sprintf("%s > %s", rec, formatFloat(o.Threshold)), nil,
			"Requests pass the rate limiter unchecked because its store fails",
			fmt.Sprintf("{{ $value | humanize }} requests failed open within %s, summed over all instances and endpoints (threshold %s): the store is failing or too slow, and limits are not enforced.",
				w, formatFloat(o.Threshold))),
	}}
}

// degradedGroup records degraded decisions and alerts while they last.
func (m *Model) degradedGroup(o *DegradedObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rec := DegradedRateRecord(o.Window)
	return rulefmt.RuleGroup{Name: GroupDegraded, Rules: []rulefmt.Rule{
		{Record: rec, Expr: fmt.Sprintf("sum by (job) (rate(%s%s[%s]))", metricDegraded, m.sel(""), w)},
		alertRule(o.Alert, fmt.Sprintf("%s > 0", rec), nil,
			"The rate limiter has been deciding in degraded mode because its store fails",
			fmt.Sprintf("{{ $value | humanize }} decisions/s were made on each instance's share of the limit (fail_policy local) for at least %s: the store is down, limits hold only as well as the last known instance count.",
				formatDuration(o.For))),
	}}
}

// CriticalShedRecord names the rate of critical requests shed, per upstream.
func CriticalShedRecord(window time.Duration) string {
	return "upstream:rate_limit_shed_critical:rate" + formatDuration(window)
}

// overloadGroup records the critical requests shed and alerts on any.
func (m *Model) overloadGroup(o *OverloadObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rec := CriticalShedRecord(o.Window)
	return rulefmt.RuleGroup{Name: GroupOverload, Rules: []rulefmt.Rule{
		{Record: rec, Expr: fmt.Sprintf("sum by (upstream) (rate(%s%s[%s]))", metricShed, m.sel(`priority="critical"`), w)},
		alertRule(*o.CriticalShed, fmt.Sprintf("%s > 0", rec), nil,
			"Critical requests to {{ $labels.upstream }} are shed",
			fmt.Sprintf("{{ $value | humanize }} critical requests/s to upstream {{ $labels.upstream }} were shed with 503 over the last %s, for at least %s: the upstream is too slow for its latency objective even with the sheddable and default traffic shed, or the critical traffic alone is more than it serves.",
				w, formatDuration(o.CriticalShed.For))),
	}}
}

// absentGroup alerts when the exporter's series are missing.
func (m *Model) absentGroup(a *Alert) rulefmt.RuleGroup {
	return rulefmt.RuleGroup{Name: GroupMetrics, Rules: []rulefmt.Rule{
		alertRule(*a, fmt.Sprintf("absent(%s%s)", metricRequests, m.sel("")), nil,
			fmt.Sprintf("Prometheus receives no rate limiter metrics from job %s", m.Job),
			fmt.Sprintf("No %s series from job %s for %s: the exporter is down or no longer scraped, and every rate-limit alert is blind.",
				metricRequests, m.Job, formatDuration(a.For))),
	}}
}

// availabilityGroup records the error ratios, then the SLO records read
// from them, and alerts on the burn rates.
func (m *Model) availabilityGroup(s *AvailabilitySLO) rulefmt.RuleGroup {
	var rules []rulefmt.Rule
	for _, w := range s.windows() {
		rules = append(rules, rulefmt.Rule{Record: ErrorRatioRecord(w), Expr: fmt.Sprintf(
			"sum by (job) (rate(%s%s[%s]))\n/\n(sum by (job) (rate(%s%s[%s])) > 0)",
			metricRequests, m.sel(`status=~"fail_open|fail_closed"`), formatDuration(w), metricRequests, m.sel(""), formatDuration(w))})
	}
	rules = append(rules, m.burnRecords(s)...)
	for _, row := range s.Rows {
		if !row.CanFire {
			continue
		}
		a := s.Template
		a.Severity = row.Severity
		a.For = row.For
		long, short := formatDuration(row.Long), formatDuration(row.Short)
		th := formatFloat(row.Threshold)
		rules = append(rules, alertRule(a,
			fmt.Sprintf("%s > %s\nand\n%s > %s", ErrorRatioRecord(row.Long), th, ErrorRatioRecord(row.Short), th),
			map[string]string{"long_window": long, "short_window": short},
			fmt.Sprintf("The rate limiter burns its error budget at %s× the sustainable rate (%s and %s windows)", formatFloat(row.Factor), long, short),
			fmt.Sprintf("{{ $value | humanizePercentage }} of the rate limiter's decisions failed open or closed over the last %s, and over the last %s too (threshold %s: a burn rate of %s against the %s objective over %s spends %s of the period's error budget in %s).",
				long, short, percent(row.Threshold), formatFloat(row.Factor), percent(s.Objective), formatDuration(s.Period), percent(row.BudgetShare), long)))
	}
	return rulefmt.RuleGroup{Name: GroupAvailability, Rules: rules}
}

// regionRules are the two multi-region alerts. The lag is the age of the
// newest counts an instance knows from a peer region, refreshed by every
// sync round, failed rounds included.
//
// RateLimitRegionSyncLagHigh takes the worst instance per peer: one
// instance behind is enough to let that peer's traffic through unseen.
//
// RateLimitRegionPeerUnreachable asks three things of the same instance and
// peer, so that none of them pages alone: the lag is over unreachable_for
// (no successful sync for that long), the sync errors increased within
// unreachable_for (the peer fails, rather than having nothing to ship or a
// shipper that stopped reporting), and the lag grew over that window (a
// live gauge, not a stale value). It needs no for: the lag threshold is the
// duration.
func (m *Model) regionRules(o *RegionsObjective, sel func(string) string) []rulefmt.Rule {
	lagSecs := formatFloat(o.SyncLagThreshold.Seconds())
	u := formatDuration(o.UnreachableFor)
	return []rulefmt.Rule{
		alertRule(o.SyncLag,
			fmt.Sprintf("max by (peer_region) (%s%s) > %s", metricRegionLag, sel(""), lagSecs),
			nil,
			"The counts known from region {{ $labels.peer_region }} are getting old",
			fmt.Sprintf("The newest counts an instance of job %s knows from peer region {{ $labels.peer_region }} are {{ $value | humanizeDuration }} old (threshold %s, for %s): async and hybrid limits admit that region's recent traffic without seeing it, so the global limit overshoots by more than the documented bound.",
				m.Job, formatDuration(o.SyncLagThreshold), formatDuration(o.SyncLag.For))),
		alertRule(o.Unreachable,
			fmt.Sprintf("max by (peer_region) (\n    %s%s > %s\n  and\n    increase(%s%s[%s]) > 0\n  and\n    deriv(%s%s[%s]) > 0\n)",
				metricRegionLag, sel(""), formatFloat(o.UnreachableFor.Seconds()),
				metricRegionErrors, sel(""), u,
				metricRegionLag, sel(""), u),
			nil,
			"Region {{ $labels.peer_region }} is unreachable from the rate limiter",
			fmt.Sprintf("An instance of job %s has had no successful sync with peer region {{ $labels.peer_region }} for {{ $value | humanizeDuration }} (threshold %s) while its sync errors keep increasing: strict and hybrid keys homed there fail as store errors (the fail policy decides), and async limits count that region's traffic as of the last sync.",
				m.Job, u)),
	}
}

// windows lists the distinct windows the burn-rate rows read, shortest first.
func (s *AvailabilitySLO) windows() []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	for _, r := range s.Rows {
		if !r.CanFire {
			continue
		}
		for _, w := range []time.Duration{r.Short, r.Long} {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	sortDurations(out)
	return out
}

func sortDurations(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// alertRule assembles an alerting rule; the spec's texts replace the
// defaults when set.
func alertRule(a Alert, expr string, extra map[string]string, summary, description string) rulefmt.Rule {
	labels := map[string]string{"severity": a.Severity}
	maps.Copy(labels, a.Labels)
	maps.Copy(labels, extra)
	if a.Summary != "" {
		summary = a.Summary
	}
	if a.Description != "" {
		description = a.Description
	}
	ann := map[string]string{"summary": summary, "description": description}
	if a.RunbookURL != "" {
		ann["runbook_url"] = a.RunbookURL
	}
	return rulefmt.Rule{Alert: a.Name, Expr: expr, For: model.Duration(a.For), Labels: labels, Annotations: ann}
}

func percent(ratio float64) string { return formatFloat(roundSig(ratio*100, 10)) + "%" }

// quantileName writes 0.99 as p99, 0.5 as p50 and 0.999 as p999.
func quantileName(q float64) string {
	digits := strings.TrimPrefix(strconv.FormatFloat(q, 'f', -1, 64), "0.")
	if len(digits) == 1 {
		digits += "0"
	}
	return "p" + digits
}

// checkRuleGroups parses every expression with the PromQL parser and then
// the whole encoded file with rulefmt, as Prometheus does when it loads it.
func checkRuleGroups(rg *rulefmt.RuleGroups) error {
	var errs []error
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			if _, err := promqlParser.ParseExpr(r.Expr); err != nil {
				errs = append(errs, fmt.Errorf("group %s, rule %s%s: %w", g.Name, r.Record, r.Alert, err))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var buf bytes.Buffer
	if err := encodeYAML(&buf, rg); err != nil {
		return err
	}
	return CheckRules(buf.Bytes())
}

// CheckRules validates a rule file the way Prometheus loads it: strict
// rulefmt decoding, every expression parsed, every template checked.
func CheckRules(content []byte) error {
	_, errs := rulefmt.Parse(content, false, model.LegacyValidation, promqlParser, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return fmt.Errorf("generated rules do not validate: %w", errors.Join(errs...))
	}
	return nil
}

// WriteRules encodes rule groups as a Prometheus rule file, under a
// "Code generated" header naming the spec it came from.
func WriteRules(w io.Writer, rg *rulefmt.RuleGroups, source string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Code generated by rl-exporter rules from %s. DO NOT EDIT.\n", source)
	if err := encodeYAML(&buf, rg); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func encodeYAML(w io.Writer, v any) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	return enc.Close()
}
