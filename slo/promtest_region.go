package slo

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Peer regions of the generated multi-region tests.
const (
	testPeerLost    = "ap-northeast-1"
	testPeerHealthy = "eu-west-1"
)

// regions writes the promtool tests of the two multi-region alerts. The lag
// gauge is written sample by sample: a healthy peer's lag stays near one
// sync interval, a lost peer's grows by one second per second.
func (g *testGen) regions() (RuleTestFile, error) {
	o := g.m.Regions
	texts, err := g.texts()
	if err != nil {
		return RuleTestFile{}, err
	}
	// Eight samples in the shorter of the two durations, at most every 15s:
	// enough for increase() and deriv() over unreachable_for.
	shortest := o.UnreachableFor
	if o.SyncLag.For > 0 {
		shortest = min(shortest, o.SyncLag.For)
	}
	p := regionTestPlan{step: min(15*time.Second, max(time.Second, (shortest/8).Truncate(time.Second)))}
	p.lagThreshold = o.SyncLagThreshold.Seconds()
	p.healthyLag = p.lagThreshold / 4
	lag, err := g.regionLagTests(texts, p)
	if err != nil {
		return RuleTestFile{}, err
	}
	unreachable, err := g.regionUnreachableTests(texts, p)
	if err != nil {
		return RuleTestFile{}, err
	}
	return g.file(p.step, append(lag, unreachable...)...), nil
}

// regionTestPlan is what both region alerts' tests share: the sample step,
// and the lag threshold and a healthy peer's lag, in seconds.
type regionTestPlan struct {
	step                     time.Duration
	lagThreshold, healthyLag float64
}

// lagSeries is one instance's sync lag gauge for peer.
func (g *testGen) lagSeries(instance, peer string, values string) InputSeries {
	return InputSeries{
		Series: series(metricRegionLag, g.jobLabels(map[string]string{"instance": instance, "peer_region": peer})),
		Values: values,
	}
}

// repeated is v for steps samples, in promtool's series notation.
func repeated(v float64, steps int) string { return fmt.Sprintf("%sx%d", num(v), steps) }

// regionLagTests are the tests of RateLimitRegionSyncLagHigh.
func (g *testGen) regionLagTests(texts map[string]ruleTexts, p regionTestPlan) ([]RuleTest, error) {
	o := g.m.Regions
	step, lagThreshold, healthyLag := p.step, p.lagThreshold, p.healthyLag
	// One instance behind on one peer.
	lagSteps := int((o.SyncLag.For+10*step)/step) + 1
	fireLag := o.SyncLag.For + 2*step
	overLag := lagThreshold * 1.5
	wantLag, err := expect(texts, o.SyncLag.Name, nil, map[string]string{"peer_region": testPeerLost}, overLag)
	if err != nil {
		return nil, err
	}
	lagHigh := RuleTest{
		Name: fmt.Sprintf("a lag of %s on one instance for %s fires %s for that peer; %s on the other instance and on another peer stay quiet",
			formatSeconds(overLag), formatDuration(fireLag), o.SyncLag.Name, formatSeconds(healthyLag)),
		Interval: formatDuration(step),
		InputSeries: []InputSeries{
			g.lagSeries("rl-exporter-1:9090", testPeerLost, repeated(overLag, lagSteps)),
			g.lagSeries("rl-exporter-2:9090", testPeerLost, repeated(healthyLag, lagSteps)),
			g.lagSeries("rl-exporter-1:9090", testPeerHealthy, repeated(healthyLag, lagSteps)),
		},
	}
	if o.SyncLag.For > step {
		lagHigh.AlertRuleTests = append(lagHigh.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(o.SyncLag.For / 2), Alertname: o.SyncLag.Name})
	}
	lagHigh.AlertRuleTests = append(lagHigh.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(fireLag), Alertname: o.SyncLag.Name, ExpAlerts: []ExpAlert{wantLag}})
	tests := []RuleTest{lagHigh}
	if spell := int(o.SyncLag.For/step) / 2; spell >= 1 {
		tests = append(tests, RuleTest{
			Name:     fmt.Sprintf("a lag of %s for %s, shorter than %s, stays quiet", formatSeconds(overLag), formatDuration(time.Duration(spell)*step), formatDuration(o.SyncLag.For)),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{g.lagSeries("rl-exporter-1:9090", testPeerLost,
				repeated(healthyLag, 2)+" "+repeated(overLag, spell-1)+" "+repeated(healthyLag, lagSteps-spell-2))},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fireLag), Alertname: o.SyncLag.Name}},
		})
	}

	return tests, nil
}

// regionUnreachableTests are the tests of RateLimitRegionPeerUnreachable.
func (g *testGen) regionUnreachableTests(texts map[string]ruleTexts, p regionTestPlan) ([]RuleTest, error) {
	o := g.m.Regions
	step, secs, healthyLag := p.step, p.step.Seconds(), p.healthyLag
	// Healthy rounds, then a peer that answers no more. Each step counts errorsPerStep failed rounds and
	// adds a step to the lag.
	const errorsPerStep = 10
	healthySteps := 4
	outageSteps := int(o.UnreachableFor/step) + 6
	total := healthySteps + outageSteps
	growing := func(from int) string {
		// healthyLag until step from, then one second per second.
		return repeated(healthyLag, from) + " " + fmt.Sprintf("%s+%sx%d", num(healthyLag+secs), num(secs), total-from-1)
	}
	errorsFrom := func(from int) string {
		return counterValues(segment{0, from}, segment{errorsPerStep, total - from})
	}
	errSeries := func(peer, values string) InputSeries {
		return InputSeries{
			Series: series(metricRegionErrors, g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090", "peer_region": peer})),
			Values: values,
		}
	}
	// The alert holds once the lag is over unreachable_for: the first step
	// whose lag exceeds it, and a step more so that increase() and deriv()
	// see only the outage.
	over := healthySteps + int(o.UnreachableFor/step) + 2
	before := healthySteps + int(math.Ceil((o.UnreachableFor.Seconds()-healthyLag)/secs)) - 1
	lagAt := func(k int) float64 { return healthyLag + float64(k-healthySteps)*secs }
	wantLost, err := expect(texts, o.Unreachable.Name, nil, map[string]string{"peer_region": testPeerLost}, lagAt(over))
	if err != nil {
		return nil, err
	}
	return []RuleTest{
		RuleTest{
			Name: fmt.Sprintf("no successful sync with a peer for more than %s while its errors increase fires %s for that peer, not before; a healthy peer stays quiet",
				formatDuration(o.UnreachableFor), o.Unreachable.Name),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				g.lagSeries("rl-exporter-1:9090", testPeerLost, growing(healthySteps)),
				errSeries(testPeerLost, errorsFrom(healthySteps)),
				g.lagSeries("rl-exporter-1:9090", testPeerHealthy, repeated(healthyLag, total-1)),
				errSeries(testPeerHealthy, counterValues(segment{0, total - 1})),
			},
			AlertRuleTests: []AlertRuleTest{
				{EvalTime: formatDuration(time.Duration(before) * step), Alertname: o.Unreachable.Name},
				{EvalTime: formatDuration(time.Duration(over) * step), Alertname: o.Unreachable.Name, ExpAlerts: []ExpAlert{wantLost}},
			},
		},
		RuleTest{
			Name:     "sync errors between successful rounds (the lag stays short) stay quiet",
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				g.lagSeries("rl-exporter-1:9090", testPeerLost, sawtooth(healthyLag, total)),
				errSeries(testPeerLost, errorsFrom(0)),
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(time.Duration(over) * step), Alertname: o.Unreachable.Name}},
		},
		RuleTest{
			Name:     fmt.Sprintf("a lag growing past %s without sync errors stays quiet (the lag warning covers it)", formatDuration(o.UnreachableFor)),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				g.lagSeries("rl-exporter-1:9090", testPeerLost, growing(healthySteps)),
				errSeries(testPeerLost, counterValues(segment{0, total - 1})),
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(time.Duration(over) * step), Alertname: o.Unreachable.Name}},
		},
		RuleTest{
			Name:     fmt.Sprintf("a lag frozen over %s while errors increase (a gauge no longer refreshed) stays quiet", formatDuration(o.UnreachableFor)),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				g.lagSeries("rl-exporter-1:9090", testPeerLost, repeated(o.UnreachableFor.Seconds()*2, total-1)),
				errSeries(testPeerLost, errorsFrom(0)),
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(time.Duration(over) * step), Alertname: o.Unreachable.Name}},
		},
	}, nil
}

// sawtooth is a lag of intermittent failures: errors every step, but
// rounds in between succeed, so the lag never grows past twice healthy.
func sawtooth(healthy float64, steps int) string {
	values := make([]string, 0, steps)
	for k := range steps {
		v := healthy
		if k%2 == 1 {
			v = healthy * 2
		}
		values = append(values, num(v))
	}
	return strings.Join(values, " ")
}

// formatSeconds writes a number of seconds as a duration: 3 as 3s, 0.5 as
// 500ms.
func formatSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
