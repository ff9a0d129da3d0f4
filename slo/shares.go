package slo

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/prometheus/model/rulefmt"
)

// AlertSharesGiveBacksFailing fires while Redis keeps failing to acknowledge the chunks of
// local shares (shares.enabled) given back.
const AlertSharesGiveBacksFailing = "RateLimitSharesGiveBacksFailing"

const (
	metricSharesGiveBacks      = "rate_limit_shares_give_backs_total"
	metricSharesGiveBackErrors = "rate_limit_shares_give_back_errors_total"
	// GroupShares is the rule group of the local shares' alert.
	GroupShares = "rl-exporter-shares"
)

// SharesGiveBacksSpec is the alert on give-backs of local shares' chunks that Redis did not
// acknowledge: each such chunk's reservation expires charged, its unused units lost to every
// replica for the rest of the window, so clients are refused what their limit would admit.
// A Redis blip loses its chunks once, an undershoot that ends with it, and For outlasts it;
// give-backs failing all the time keep refusing. It is a share of the give-backs, not a
// count, because their number grows with the keys and the replicas; a share of each class's,
// so that the alert names the class whose clients are refused, and a class whose give-backs
// all fail is not drowned by a busier class's (a slow Redis fails those of the shortest
// shares.interval first: their timeout is the shortest).
type SharesGiveBacksSpec struct {
	AlertSpec `koanf:",squash"`
	// ThresholdPercent: alert when more than this share of the chunks a class gave back within
	// Window failed, summed over the instances.
	ThresholdPercent float64 `koanf:"threshold_percent"`
	// Window is the rate window of the share.
	Window string `koanf:"window"`
}

// defaultSharesGiveBacks is SharesGiveBacksSpec's default: more than 5 % failing for 15m, three
// windows, a warning: the units lost are bounded by the chunks (a tenth of a key's quota each).
func defaultSharesGiveBacks() SharesGiveBacksSpec {
	return SharesGiveBacksSpec{AlertSpec: AlertSpec{Enabled: true, For: "15m", Severity: "warning"}, ThresholdPercent: 5, Window: "5m"}
}

// SharesGiveBacksObjective alerts on give-backs of local shares that keep failing.
type SharesGiveBacksObjective struct {
	Alert
	Threshold float64 // ratio, 0.05 for 5 %
	Window    time.Duration
}

func (c *compiler) sharesGiveBacks(spec Spec) *SharesGiveBacksObjective {
	s := spec.SharesGiveBacks
	if !s.Enabled {
		return nil
	}
	return &SharesGiveBacksObjective{
		Alert:     c.alert("shares_give_back_errors", AlertSharesGiveBacksFailing, spec, s.AlertSpec),
		Threshold: roundSig(c.percent("shares_give_back_errors.threshold_percent", s.ThresholdPercent)/100, 12),
		Window:    c.window("shares_give_back_errors.window", s.Window),
	}
}

// SharesGiveBackErrorRatioRecord names the share of each class's give-backs of local shares
// that failed within window.
func SharesGiveBackErrorRatioRecord(window time.Duration) string {
	return "job_class:rate_limit_shares_give_back_errors:ratio_rate" + formatDuration(window)
}

// sharesGroup records the share of each class's give-backs that failed and alerts while it
// stays high. Without give-backs (no class with shares) the ratio is not recorded. The job
// stays in the labels: Alertmanager silences the alert by the job's store failing. An exporter
// without the class label records one ratio of its job, which the texts name without a class.
func (m *Model) sharesGroup(o *SharesGiveBacksObjective) rulefmt.RuleGroup {
	w := formatDuration(o.Window)
	rec := SharesGiveBackErrorRatioRecord(o.Window)
	return rulefmt.RuleGroup{Name: GroupShares, Rules: []rulefmt.Rule{
		{Record: rec, Expr: fmt.Sprintf("sum by (job, class) (rate(%s%s[%s]))\n/\n(sum by (job, class) (rate(%s%s[%s])) > 0)",
			metricSharesGiveBackErrors, m.sel(""), w, metricSharesGiveBacks, m.sel(""), w)},
		alertRule(o.Alert, fmt.Sprintf("%s > %s", rec, formatFloat(o.Threshold)), nil,
			"Redis keeps failing the give-backs of local shares{{ with $labels.class }} of class {{ . }}{{ end }}: clients are refused what their limits would admit",
			fmt.Sprintf("{{ $value | humanizePercentage }} of the chunks of local shares (shares.enabled){{ with $labels.class }} of class {{ . }}{{ end }} given back to Redis over the last %s were not acknowledged, for at least %s (threshold %s): "+
				"each one's reservation expires charged, its unused units lost to every replica for the rest of the window, so clients of {{ if $labels.class }}that class{{ else }}those classes{{ end }} are refused requests their limits would admit. "+
				"A Redis blip holds this ratio up for one window after it; this has lasted: Redis is down, failing writes, or slower than half the reservation's hold. "+
				"serve logs the failed give-backs at WARN with their class, units and error. "+
				"Until it is fixed, shares.enabled: false on {{ with $labels.class }}classes.{{ . }}{{ else }}the class{{ end }} (applies on reload) decides on Redis without chunks.",
				w, formatDuration(o.For), percent(o.Threshold))),
	}}
}

// sharesGiveBacks tests the alert: give-backs failing over the threshold on two instances for
// longer than for: fire it, naming the class; failing under it stay quiet; one class failing
// every give-back beside a busier class, under the threshold summed over both, fires for that
// class alone; one blip of Redis failing every give-back stays quiet (when for: outlasts the
// windows that see it); so does a job without shares, or with shares and nothing given back.
func (g *testGen) sharesGiveBacks() (RuleTestFile, error) {
	o := g.m.SharesGiveBacks
	texts, step, total, err := g.windowed(o.Window, o.For)
	if err != nil {
		return RuleTestFile{}, err
	}
	const perStep = 100.0 // chunks given back per step on each instance
	over := math.Min(o.Threshold*2, (o.Threshold+1)/2)
	under := o.Threshold / 2
	const class, busy = "search", "api"
	labelsOf := func(inst, class string) map[string]string {
		return g.jobLabels(map[string]string{"instance": inst, "class": class})
	}
	labels := func(inst string) map[string]string { return labelsOf(inst, class) }
	instances := []string{"rl-exporter-1:9090", "rl-exporter-2:9090"}
	// given is a class's give-backs on every instance, perStep each step, errs of them failing.
	given := func(class string, perStep float64, errs ...segment) []InputSeries {
		var in []InputSeries
		for _, inst := range instances {
			in = append(in,
				InputSeries{Series: series(metricSharesGiveBacks, labelsOf(inst, class)), Values: counterValues(segment{perStep, total})},
				InputSeries{Series: series(metricSharesGiveBackErrors, labelsOf(inst, class)), Values: counterValues(errs...)})
		}
		return in
	}
	failing := func(errs ...segment) []InputSeries { return given(class, perStep, errs...) }
	fire := o.Window + o.For + 2*step
	classLabels := map[string]string{"job": g.m.Job, "class": class}
	want, err := expect(texts, o.Name, nil, classLabels, over)
	if err != nil {
		return RuleTestFile{}, err
	}
	alone, err := expect(texts, o.Name, nil, classLabels, 1)
	if err != nil {
		return RuleTestFile{}, err
	}
	sustained := RuleTest{
		Name:        fmt.Sprintf("%s of give-backs failing on two instances for longer than %s fire %s", percent(over), formatDuration(o.For), o.Name),
		Interval:    formatDuration(step),
		InputSeries: failing(segment{perStep * over, total}),
	}
	if o.For > step {
		sustained.AlertRuleTests = append(sustained.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(o.For), Alertname: o.Name})
	}
	sustained.AlertRuleTests = append(sustained.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(fire), Alertname: o.Name, ExpAlerts: []ExpAlert{want}})
	// The failing class gives back under the threshold's share of all the give-backs, every
	// one failing: summed over the classes the ratio stays under the threshold.
	small := perStep * under
	tests := []RuleTest{sustained, {
		Name:           fmt.Sprintf("%s of give-backs failing for good stay quiet", percent(under)),
		Interval:       formatDuration(step),
		InputSeries:    failing(segment{perStep * under, total}),
		AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name}},
	}, {
		Name: fmt.Sprintf("class %s failing every give-back beside class %s, %s of the job's, fires for %s alone",
			class, busy, percent(roundSig(small/(perStep+small), 4)), class),
		Interval:       formatDuration(step),
		InputSeries:    append(given(busy, perStep, segment{0, total}), given(class, small, segment{small, total})...),
		AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name, ExpAlerts: []ExpAlert{alone}}},
	}}
	// The blip: every give-back fails for as few steps as put the window's share over the
	// threshold. The windows see it from the step after it starts until the one before they
	// have moved past it, a step longer in Prometheus 2, whose windows are closed on the left:
	// seenUntil. A for: shorter than that span fires on it, and the test is left out.
	k := int(o.Window / step)
	blip := min(k, int(math.Floor(o.Threshold*float64(k)))+1)
	const start = 3
	seenUntil := start + blip + k - 1
	if o.For > time.Duration(blip+k)*step {
		t := RuleTest{
			Name: fmt.Sprintf("a Redis blip failing every give-back for %s, %s of the %s window, stays quiet",
				formatDuration(time.Duration(blip)*step), percent(roundSig(float64(blip)/float64(k), 4)), formatDuration(o.Window)),
			Interval:    formatDuration(step),
			InputSeries: failing(segment{0, start}, segment{perStep, blip}, segment{0, total - start - blip}),
		}
		for _, at := range []int{start + 1, start + blip, seenUntil - 1, seenUntil} {
			t.AlertRuleTests = append(t.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(time.Duration(at) * step), Alertname: o.Name})
		}
		// At its end the window holds the whole blip, at least blip/k of its give-backs failed:
		// over the threshold, so that for: alone keeps the alert quiet.
		t.PromqlExprTests = []PromqlExprTest{{
			Expr:       fmt.Sprintf("%s > bool %s", SharesGiveBackErrorRatioRecord(o.Window), formatFloat(o.Threshold)),
			EvalTime:   formatDuration(time.Duration(start+blip) * step),
			ExpSamples: []ExpSample{{Labels: series("", classLabels), Value: 1}},
		}}
		tests = append(tests, t)
	}
	// Without shares there are no rate_limit_shares_* series; with shares and no chunk given
	// back they stay at zero, and no ratio is recorded.
	idle := []InputSeries{
		{Series: series(metricRequests, g.jobLabels(map[string]string{"instance": instances[0], "status": "allowed", "endpoint": "/v1/search", "plan_tier": "free"})),
			Values: counterValues(segment{perStep, total})},
		{Series: series(metricSharesGiveBacks, labels(instances[1])), Values: counterValues(segment{0, total})},
		{Series: series(metricSharesGiveBackErrors, labels(instances[1])), Values: counterValues(segment{0, total})},
	}
	tests = append(tests, RuleTest{
		Name:           "a job without shares, or with shares and nothing given back, stays quiet",
		Interval:       formatDuration(step),
		InputSeries:    idle,
		AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name}},
	})
	return g.file(step, tests...), nil
}
