package slo

import "fmt"

// overload writes the promtool tests of the alert on shed critical requests:
// critical requests shed on one instance for longer than for: fire it for
// that upstream, sheddable ones shed alone stay quiet.
func (g *testGen) overload() (RuleTestFile, error) {
	o := g.m.Overload
	a := o.CriticalShed
	texts, err := g.texts()
	if err != nil {
		return RuleTestFile{}, err
	}
	step := windowStep(o.Window)
	total := int((o.Window + a.For + 10*step) / step)
	const perStep = 30 // shed requests per step
	const upstream = "api.internal:8080"
	shed := func(priority string, steps int) InputSeries {
		return InputSeries{
			Series: series(metricShed, g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090", "upstream": upstream, "priority": priority, "reason": "reserved"})),
			Values: counterValues(segment{perStep, steps}, segment{0, total - steps}),
		}
	}
	fire := o.Window + a.For + 2*step
	want, err := expect(texts, a.Name, nil, map[string]string{"upstream": upstream}, perStep/step.Seconds())
	if err != nil {
		return RuleTestFile{}, err
	}
	over := RuleTest{
		Name:        fmt.Sprintf("critical requests shed for longer than %s fire %s for their upstream", formatDuration(a.For), a.Name),
		Interval:    formatDuration(step),
		InputSeries: []InputSeries{shed("critical", total), shed("sheddable", total)},
	}
	if a.For > step {
		over.AlertRuleTests = append(over.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(step), Alertname: a.Name})
	}
	over.AlertRuleTests = append(over.AlertRuleTests, AlertRuleTest{EvalTime: formatDuration(fire), Alertname: a.Name, ExpAlerts: []ExpAlert{want}})
	quiet := RuleTest{
		Name:           "sheddable and default requests shed, critical ones not, stay quiet",
		Interval:       formatDuration(step),
		InputSeries:    []InputSeries{shed("sheddable", total), shed("default", total), shed("critical", 0)},
		AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: a.Name}},
	}
	return g.file(step, over, quiet), nil
}
