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
	step := min(15*time.Second, max(time.Second, (shortest/8).Truncate(time.Second)))
	secs := step.Seconds()
	lagThreshold := o.SyncLagThreshold.Seconds()
	healthyLag := lagThreshold / 4

	// RateLimitRegionSyncLagHigh: one instance behind on one peer.
	lagSteps := int((o.SyncLag.For+10*step)/step) + 1
	fireLag := o.SyncLag.For + 2*step
	overLag := lagThreshold * 1.5
	lagSeries := func(instance, peer string, values string) InputSeries {
		return InputSeries{
			Series: series(metricRegionLag, g.jobLabels(map[string]string{"instance": instance, "peer_region": peer})),
			Values: values,
		}
	}
	constant := func(v float64, steps int) string { return fmt.Sprintf("%sx%d", num(v), steps) }
	wantLag, err := expect(texts, o.SyncLag.Name, nil, map[string]string{"peer_region": testPeerLost}, overLag)
	if err != nil {
		return RuleTestFile{}, err
	}
	lagHigh := RuleTest{
		Name: fmt.Sprintf("a lag of %s on one instance for %s fires %s for that peer; %s on the other instance and on another peer stay quiet",
			formatSeconds(overLag), formatDuration(fireLag), o.SyncLag.Name, formatSeconds(healthyLag)),
		Interval: formatDuration(step),
		InputSeries: []InputSeries{
			lagSeries("rl-exporter-1:9090", testPeerLost, constant(overLag, lagSteps)),
			lagSeries("rl-exporter-2:9090", testPeerLost, constant(healthyLag, lagSteps)),
			lagSeries("rl-exporter-1:9090", testPeerHealthy, constant(healthyLag, lagSteps)),
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
			InputSeries: []InputSeries{lagSeries("rl-exporter-1:9090", testPeerLost,
				constant(healthyLag, 2)+" "+constant(overLag, spell-1)+" "+constant(healthyLag, lagSteps-spell-2))},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fireLag), Alertname: o.SyncLag.Name}},
		})
	}

	// RateLimitRegionPeerUnreachable: healthy rounds, then a peer that
	// answers no more. Each step counts errorsPerStep failed rounds and
	// adds a step to the lag.
	const errorsPerStep = 10
	healthySteps := 4
	outageSteps := int(o.UnreachableFor/step) + 6
	total := healthySteps + outageSteps
	growing := func(from int) string {
		// healthyLag until step from, then one second per second.
		return constant(healthyLag, from) + " " + fmt.Sprintf("%s+%sx%d", num(healthyLag+secs), num(secs), total-from-1)
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
		return RuleTestFile{}, err
	}
	// Intermittent failures: errors every step, but rounds in between
	// succeed, so the lag never grows.
	sawtooth := make([]string, 0, total)
	for k := range total {
		v := healthyLag
		if k%2 == 1 {
			v = healthyLag * 2
		}
		sawtooth = append(sawtooth, num(v))
	}
	tests = append(tests,
		RuleTest{
			Name: fmt.Sprintf("no successful sync with a peer for more than %s while its errors increase fires %s for that peer, not before; a healthy peer stays quiet",
				formatDuration(o.UnreachableFor), o.Unreachable.Name),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				lagSeries("rl-exporter-1:9090", testPeerLost, growing(healthySteps)),
				errSeries(testPeerLost, errorsFrom(healthySteps)),
				lagSeries("rl-exporter-1:9090", testPeerHealthy, constant(healthyLag, total-1)),
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
				lagSeries("rl-exporter-1:9090", testPeerLost, strings.Join(sawtooth, " ")),
				errSeries(testPeerLost, errorsFrom(0)),
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(time.Duration(over) * step), Alertname: o.Unreachable.Name}},
		},
		RuleTest{
			Name:     fmt.Sprintf("a lag growing past %s without sync errors stays quiet (the lag warning covers it)", formatDuration(o.UnreachableFor)),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				lagSeries("rl-exporter-1:9090", testPeerLost, growing(healthySteps)),
				errSeries(testPeerLost, counterValues(segment{0, total - 1})),
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(time.Duration(over) * step), Alertname: o.Unreachable.Name}},
		},
		RuleTest{
			Name:     fmt.Sprintf("a lag frozen over %s while errors increase (a gauge no longer refreshed) stays quiet", formatDuration(o.UnreachableFor)),
			Interval: formatDuration(step),
			InputSeries: []InputSeries{
				lagSeries("rl-exporter-1:9090", testPeerLost, constant(o.UnreachableFor.Seconds()*2, total-1)),
				errSeries(testPeerLost, errorsFrom(0)),
			},
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(time.Duration(over) * step), Alertname: o.Unreachable.Name}},
		},
	)
	return g.file(step, tests...), nil
}

// formatSeconds writes a number of seconds as a duration: 3 as 3s, 0.5 as
// 500ms.
func formatSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}
