package slo

import (
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/rulefmt"
)

// AlertQuotaAssignmentsExpiring fires when quota assignments of Envoy's rate limit quota
// service (rlqs) run out before the server renews them.
const AlertQuotaAssignmentsExpiring = "RateLimitQuotaAssignmentsExpiring"

const (
	metricQuotaExpired = "rate_limit_rlqs_assignments_expired_total"
	// GroupQuota is the rule group of the quota service's alert.
	GroupQuota = "rl-exporter-quota"
)

// QuotaExpiredSpec is the alert on quota assignments that expire unrenewed: every interval the
// server renews each Envoy's assignment, so one that runs out means the server could not divide
// the limit (the store failed, the instance stalled) for the whole assignment_ttl, and the
// Envoy fell back to its expired_assignment_behavior. An assignment counts once however long
// the failure lasts, so the alert fires on a burst and clears a window after the last one.
type QuotaExpiredSpec struct {
	AlertSpec `koanf:",squash"`
	// Threshold: alert when more assignments than this expire within Window, per rule.
	Threshold float64 `koanf:"threshold"`
	// Window over which expired assignments are counted.
	Window string `koanf:"window"`
}

// defaultQuotaExpired is QuotaExpiredSpec's default: any expiry, at once.
func defaultQuotaExpired() QuotaExpiredSpec {
	return QuotaExpiredSpec{AlertSpec: AlertSpec{Enabled: true, For: "0s", Severity: "warning"}, Window: "5m"}
}

// QuotaExpiredObjective alerts on quota assignments that expired unrenewed.
type QuotaExpiredObjective struct {
	Alert
	Threshold float64 // assignments within Window
	Window    time.Duration
}

func (c *compiler) quotaExpired(spec Spec) *QuotaExpiredObjective {
	q := spec.QuotaExpired
	if !q.Enabled {
		return nil
	}
	return &QuotaExpiredObjective{
		Alert:     c.alert("quota_assignments_expired", AlertQuotaAssignmentsExpiring, spec, q.AlertSpec),
		Threshold: c.nonNegative("quota_assignments_expired.threshold", q.Threshold),
		Window:    c.window("quota_assignments_expired.window", q.Window),
	}
}

// QuotaExpiredRecord names the quota assignments expired within window, per rule (endpoint).
func QuotaExpiredRecord(window time.Duration) string {
	return "endpoint:rate_limit_rlqs_assignments_expired:increase" + formatDuration(window)
}

// quotaGroup records expired quota assignments and alerts on them.
func (m *Model) quotaGroup(o *QuotaExpiredObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rec := QuotaExpiredRecord(o.Window)
	return rulefmt.RuleGroup{Name: GroupQuota, Rules: []rulefmt.Rule{
		{Record: rec, Expr: fmt.Sprintf("sum by (endpoint) (increase(%s%s[%s]))", metricQuotaExpired, m.sel(""), w)},
		alertRule(o.Alert, fmt.Sprintf("%s > %s", rec, formatFloat(o.Threshold)), nil,
			"Envoy quota assignments of {{ $labels.endpoint }} expire before rl-exporter renews them",
			fmt.Sprintf("{{ $value | humanize }} quota assignments (rlqs) of rule {{ $labels.endpoint }} ran out unrenewed within %s (threshold %s): "+
				"the server could not divide the limit for a whole assignment_ttl (rate_limit_rlqs_store_errors_total: the store failing; else the instance stalled), "+
				"and each Envoy concerned fell back to its expired_assignment_behavior, or to its no_assignment_behavior once that ran out.",
				w, formatFloat(o.Threshold))),
	}}
}

// quotaExpired tests the alert: assignments expiring on two instances for one window fire it
// at once, and it clears a window after the last; no expiry stays quiet.
func (g *testGen) quotaExpired() (RuleTestFile, error) {
	o := g.m.QuotaExpired
	texts, step, total, err := g.windowed(o.Window, o.For)
	if err != nil {
		return RuleTestFile{}, err
	}
	// A burst of one window: the increase at its end is the same in Prometheus 2 and 3.
	k := int(o.Window / step)
	perStep := o.Threshold/float64(2*k) + 1
	labels := func(inst string) map[string]string {
		return g.jobLabels(map[string]string{"instance": inst, "endpoint": "chat.name_chat"})
	}
	var burst, none []InputSeries
	for _, inst := range []string{"rl-exporter-1:9090", "rl-exporter-2:9090"} {
		burst = append(burst, InputSeries{Series: series(metricQuotaExpired, labels(inst)),
			Values: counterValues(segment{0, 2}, segment{perStep, k}, segment{0, total - 2 - k})})
		none = append(none, InputSeries{Series: series(metricQuotaExpired, labels(inst)), Values: counterValues(segment{0, total})})
	}
	end := time.Duration(2+k) * step
	want, err := expect(texts, o.Name, nil, map[string]string{"endpoint": "chat.name_chat"}, 2*perStep*float64(k))
	if err != nil {
		return RuleTestFile{}, err
	}
	fires := RuleTest{
		Name:        fmt.Sprintf("assignments expiring on two instances for %s fire %s, which clears %s after the last", formatDuration(o.Window), o.Name, formatDuration(o.Window)),
		Interval:    formatDuration(step),
		InputSeries: burst,
		AlertRuleTests: []AlertRuleTest{
			{EvalTime: formatDuration(step), Alertname: o.Name},
			{EvalTime: formatDuration(end + o.For), Alertname: o.Name, ExpAlerts: []ExpAlert{want}},
			{EvalTime: formatDuration(end + o.Window + step), Alertname: o.Name},
		},
	}
	quiet := RuleTest{
		Name:           "no assignment expiring stays quiet",
		Interval:       formatDuration(step),
		InputSeries:    none,
		AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(end), Alertname: o.Name}},
	}
	return g.file(step, fires, quiet), nil
}
