package slo

import (
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/rulefmt"
)

// AlertLeasesExpiring fires while concurrency leases keep expiring unreleased.
const AlertLeasesExpiring = "RateLimitLeasesExpiring"

const (
	metricLeasesExpired = "rate_limit_leases_expired_total"
	// GroupLeases is the rule group of the concurrency leases' alert.
	GroupLeases = "rl-exporter-leases"
)

// LeasesExpiredSpec is the alert on concurrency leases that are never given
// back (algorithm concurrency) and expire at their lease_ttl: a crashed
// instance leaks its leases once, which For outlasts; releases lost all the
// time, or requests longer than lease_ttl, keep them expiring.
type LeasesExpiredSpec struct {
	AlertSpec `koanf:",squash"`
	// Threshold: alert when more leases than this expire within Window,
	// per endpoint and plan tier.
	Threshold float64 `koanf:"threshold"`
	// Window over which expired leases are counted.
	Window string `koanf:"window"`
}

// defaultLeasesExpired is LeasesExpiredSpec's default: any expiry, for
// longer than a crash's window of 10m.
func defaultLeasesExpired() LeasesExpiredSpec {
	return LeasesExpiredSpec{AlertSpec: AlertSpec{Enabled: true, For: "15m", Severity: "warning"}, Window: "10m"}
}

// LeasesExpiredObjective alerts on expired concurrency leases.
type LeasesExpiredObjective struct {
	Alert
	Threshold float64 // leases within Window
	Window    time.Duration
}

func (c *compiler) leasesExpired(spec Spec) *LeasesExpiredObjective {
	l := spec.LeasesExpired
	if !l.Enabled {
		return nil
	}
	return &LeasesExpiredObjective{
		Alert:     c.alert("leases_expired", AlertLeasesExpiring, spec, l.AlertSpec),
		Threshold: c.nonNegative("leases_expired.threshold", l.Threshold),
		Window:    c.window("leases_expired.window", l.Window),
	}
}

// LeasesExpiredRecord names the leases expired within window, per endpoint and plan tier.
func LeasesExpiredRecord(window time.Duration) string {
	return "endpoint_plan_tier:rate_limit_leases_expired:increase" + formatDuration(window)
}

// leasesGroup records expired leases and alerts while they keep expiring.
func (m *Model) leasesGroup(o *LeasesExpiredObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rec := LeasesExpiredRecord(o.Window)
	return rulefmt.RuleGroup{Name: GroupLeases, Rules: []rulefmt.Rule{
		{Record: rec, Expr: fmt.Sprintf("sum by (endpoint, plan_tier) (increase(%s%s[%s]))", metricLeasesExpired, m.sel(""), w)},
		alertRule(o.Alert, fmt.Sprintf("%s > %s", rec, formatFloat(o.Threshold)), nil,
			"Concurrency leases on {{ $labels.endpoint }} ({{ $labels.plan_tier }}) keep expiring instead of being given back",
			fmt.Sprintf("{{ $value | humanize }} concurrency leases of endpoint {{ $labels.endpoint }}, plan tier {{ $labels.plan_tier }}, expired unreleased within %s, for at least %s (threshold %s): requests last longer than lease_ttl, or releases are lost (POST /v1/release not called, instances crashing). Each leaked slot is refused to clients until it expires.",
				w, formatDuration(o.For), formatFloat(o.Threshold))),
	}}
}

// leasesExpired tests the alert: leases expiring on two instances all the
// time fire it; one crash's burst of leaked leases stays quiet.
func (g *testGen) leasesExpired() (RuleTestFile, error) {
	o := g.m.LeasesExpired
	texts, step, total, err := g.windowed(o.Window, o.For)
	if err != nil {
		return RuleTestFile{}, err
	}
	// Per instance, enough per step that the two together go over the threshold in one window.
	perStep := (o.Threshold/2 + 1) * step.Seconds() / o.Window.Seconds()
	labels := func(inst string) map[string]string {
		return g.jobLabels(map[string]string{"instance": inst, "endpoint": "POST /v1/jobs", "plan_tier": "free"})
	}
	var steady, burst []InputSeries
	for _, inst := range []string{"rl-exporter-1:9090", "rl-exporter-2:9090"} {
		steady = append(steady, InputSeries{Series: series(metricLeasesExpired, labels(inst)), Values: counterValues(segment{perStep, total})})
	}
	// One crash: its leases (more than the threshold) expire at once, then nothing.
	crash := o.Threshold + 5
	burst = append(burst, InputSeries{Series: series(metricLeasesExpired, labels("rl-exporter-2:9090")),
		Values: counterValues(segment{0, 3}, segment{crash, 1}, segment{0, total - 4})})
	fire := o.Window + o.For + 2*step
	value := 2 * perStep * o.Window.Seconds() / step.Seconds()
	want, err := expect(texts, o.Name, nil, map[string]string{"endpoint": "POST /v1/jobs", "plan_tier": "free"}, value)
	if err != nil {
		return RuleTestFile{}, err
	}
	over := RuleTest{
		Name:        fmt.Sprintf("leases expiring on two instances for longer than %s fire %s", formatDuration(o.For), o.Name),
		Interval:    formatDuration(step),
		InputSeries: steady,
	}
	if o.For > step {
		over.AlertRuleTests = append(over.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(o.For), Alertname: o.Name})
	}
	over.AlertRuleTests = append(over.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(fire), Alertname: o.Name, ExpAlerts: []ExpAlert{want}})
	quiet := RuleTest{
		Name:        fmt.Sprintf("one crash's %s leaked leases expiring at once stay quiet", formatFloat(crash)),
		Interval:    formatDuration(step),
		InputSeries: burst,
	}
	for _, at := range []time.Duration{4 * step, 4*step + o.Window/2, fire} {
		quiet.AlertRuleTests = append(quiet.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(at), Alertname: o.Name})
	}
	return g.file(step, over, quiet), nil
}

// windowed is what the tests of an alert over a rate window start from: the
// rules' texts, a step with at least four samples per window, and how many
// steps cover the window, the alert's for: and ten steps more.
func (g *testGen) windowed(window, forDur time.Duration) (map[string]ruleTexts, time.Duration, int, error) {
	texts, err := g.texts()
	if err != nil {
		return nil, 0, 0, err
	}
	step := stepFor(window)
	if window/step < 4 {
		step = window / 4
	}
	return texts, step, int((window + forDur + 10*step) / step), nil
}
