package slo

import (
	"fmt"
	"time"
)

// costs tests the alerts on reservations: units expiring on one endpoint fire
// RateLimitReservationsExpiring after its for:, a clean endpoint stays quiet; a share of
// settlements over twice their estimate above the threshold fires RateLimitCostEstimateOff, one
// just under it does not.
func (g *testGen) costs() (RuleTestFile, error) {
	texts, err := g.texts()
	if err != nil {
		return RuleTestFile{}, err
	}
	var shortest time.Duration
	for _, w := range []*time.Duration{windowOf(g.m.Expiring), windowOfOff(g.m.EstimateOff)} {
		if w != nil && (shortest == 0 || *w < shortest) {
			shortest = *w
		}
	}
	step := stepFor(shortest)
	var tests []RuleTest
	lbl := func(extra map[string]string) map[string]string {
		l := g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090", "endpoint": "POST /v1/chat", "plan_tier": "free"})
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	if o := g.m.Expiring; o != nil {
		total := int((o.Window + o.For + 10*step) / step)
		const perStep = 600 // units expiring per step
		fire := o.Window + o.For + 2*step
		want, err := expect(texts, o.Name, nil, map[string]string{"endpoint": "POST /v1/chat", "plan_tier": "free"}, perStep/step.Seconds())
		if err != nil {
			return RuleTestFile{}, err
		}
		tests = append(tests, RuleTest{
			Name:     fmt.Sprintf("reservations expiring for longer than %s fire %s", formatDuration(o.For), o.Name),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				{Series: series(metricCost, lbl(map[string]string{"phase": "expired"})), Values: counterValues(segment{perStep, total})},
				{Series: series(metricCost, lbl(map[string]string{"phase": "committed"})), Values: counterValues(segment{5000, total})},
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name, ExpAlerts: []ExpAlert{want}}},
		}, RuleTest{
			Name:     "reservations all settled stay quiet",
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				{Series: series(metricCost, lbl(map[string]string{"phase": "expired"})), Values: counterValues(segment{0, total})},
				{Series: series(metricCost, lbl(map[string]string{"phase": "committed"})), Values: counterValues(segment{5000, total})},
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name}},
		})
	}
	if o := g.m.EstimateOff; o != nil {
		total := int((o.Window + o.For + 10*step) / step)
		fire := o.Window + o.For + 2*step
		// Settlements per step, far above the minimum rate; off of them cost over twice the estimate.
		perStep := max(100, 10*o.MinRate*step.Seconds())
		mk := func(share float64) []InputSeries {
			off := perStep * share
			return []InputSeries{
				{Series: series(metricEstimateErr+"_count", lbl(nil)), Values: counterValues(segment{perStep, total})},
				{Series: series(metricEstimateErr+"_bucket", lbl(map[string]string{"le": "2"})), Values: counterValues(segment{perStep - off, total})},
			}
		}
		over := roundSig(o.Threshold*1.5, 6)
		want, err := expect(texts, o.Name, nil, map[string]string{"endpoint": "POST /v1/chat", "plan_tier": "free"}, over)
		if err != nil {
			return RuleTestFile{}, err
		}
		tests = append(tests, RuleTest{
			Name:           fmt.Sprintf("%s of settlements over twice their estimate fire %s", percent(over), o.Name),
			Interval:       formatDuration(step),
			InputSeries:    mk(over),
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name, ExpAlerts: []ExpAlert{want}}},
		}, RuleTest{
			Name:           fmt.Sprintf("%s of settlements over twice their estimate stay quiet", percent(o.Threshold/2)),
			Interval:       formatDuration(step),
			InputSeries:    mk(o.Threshold / 2),
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name}},
		})
	}
	return g.file(step, tests...), nil
}

func windowOf(o *DegradedObjective) *time.Duration {
	if o == nil {
		return nil
	}
	return &o.Window
}

func windowOfOff(o *EstimateOffObjective) *time.Duration {
	if o == nil {
		return nil
	}
	return &o.Window
}
