package slo

import (
	"errors"
	"fmt"
)

// costTests builds the promtool tests of the cost alerts, on synthetic
// series of the metrics the cost of requests is counted in.
func (g *testGen) costTests(add func(string, RuleTestFile, error) error) error {
	var errs []error
	if g.m.CostExpired != nil {
		f, err := g.costExpired()
		errs = append(errs, add("cost-expired.yml", f, err))
	}
	if g.m.CostEstimate != nil {
		f, err := g.costEstimate()
		errs = append(errs, add("cost-estimate.yml", f, err))
	}
	return errors.Join(errs...)
}

var costLabels = map[string]string{"endpoint": "POST /v1/chat/completions", "plan_tier": "pro"}

func (g *testGen) costExpired() (RuleTestFile, error) {
	o := g.m.CostExpired
	texts, err := g.texts()
	if err != nil {
		return RuleTestFile{}, err
	}
	step := stepFor(o.Window)
	total := int((o.Window + o.For + 10*step) / step)
	const perStep = 300 // units expired per step
	mk := func(expiringSteps int) []InputSeries {
		l := g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090", "phase": "expired"})
		for k, v := range costLabels {
			l[k] = v
		}
		committed := g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090", "phase": "committed"})
		for k, v := range costLabels {
			committed[k] = v
		}
		return []InputSeries{
			{Series: series(metricCost, l), Values: counterValues(segment{perStep, expiringSteps}, segment{0, total - expiringSteps})},
			{Series: series(metricCost, committed), Values: counterValues(segment{5000, total})},
		}
	}
	fire := o.Window + o.For + 2*step
	want, err := expect(texts, o.Name, nil, costLabels, perStep/step.Seconds())
	if err != nil {
		return RuleTestFile{}, err
	}
	over := RuleTest{
		Name:        fmt.Sprintf("reservations expiring unsettled for longer than %s fire %s", formatDuration(o.For), o.Name),
		Interval:    formatDuration(step),
		InputSeries: mk(total),
		AlertRuleTests: []AlertRuleTest{
			{EvalTime: formatDuration(fire), Alertname: o.Name, ExpAlerts: []ExpAlert{want}},
		},
	}
	brief := int(o.For/step) / 2
	under := RuleTest{
		Name:           fmt.Sprintf("a spell of expiring reservations shorter than %s, and commits alone, stay quiet", formatDuration(o.For)),
		Interval:       formatDuration(step),
		InputSeries:    mk(brief),
		AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name}},
	}
	return g.file(step, over, under), nil
}

// estimateBuckets are the bucket bounds of the synthetic estimate-error
// histogram: ratios of actual to estimated cost.
var estimateBuckets = []float64{0.25, 0.5, 1, 2, 4}

func (g *testGen) costEstimate() (RuleTestFile, error) {
	o := g.m.CostEstimate
	texts, err := g.texts()
	if err != nil {
		return RuleTestFile{}, err
	}
	step := stepFor(o.Window)
	total := int((o.Window + o.For + 10*step) / step)
	const perStep = 60 // observations per step
	// mk puts every observation in the bucket ending at le[i] (above le[i-1]).
	mk := func(i int) []InputSeries {
		var in []InputSeries
		for j, le := range append(append([]float64(nil), estimateBuckets...), 0) {
			l := g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090", "le": formatFloat(le)})
			if j == len(estimateBuckets) {
				l["le"] = "+Inf"
			}
			for k, v := range costLabels {
				l[k] = v
			}
			inc := 0.0
			if j >= i {
				inc = perStep
			}
			in = append(in, InputSeries{Series: series(metricEstimateRatio+"_bucket", l), Values: counterValues(segment{inc, total})})
		}
		l := g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090"})
		for k, v := range costLabels {
			l[k] = v
		}
		in = append(in, InputSeries{Series: series(metricEstimateRatio+"_count", l), Values: counterValues(segment{perStep, total})})
		return in
	}
	fire := o.Window + o.For + 2*step
	// All in (High, 2·High] or [Low/2, Low): the quantile interpolates within that bucket.
	hi, lo := bucketAbove(o.High), bucketBelow(o.Low)
	var tests []RuleTest
	for _, c := range []struct {
		name   string
		bucket int
	}{
		{fmt.Sprintf("costs over %s× their estimates for longer than %s fire %s", formatFloat(o.High), formatDuration(o.For), o.Name), hi},
		{fmt.Sprintf("costs under %s× their estimates for longer than %s fire %s", formatFloat(o.Low), formatDuration(o.For), o.Name), lo},
	} {
		if c.bucket < 0 {
			return RuleTestFile{}, fmt.Errorf("cost.estimate: no bucket of the test histogram %v lies beyond %s or %s", estimateBuckets, formatFloat(o.Low), formatFloat(o.High))
		}
		want, err := expect(texts, o.Name, nil, costLabels, quantileInBucket(o.Quantile, c.bucket))
		if err != nil {
			return RuleTestFile{}, err
		}
		tests = append(tests, RuleTest{Name: c.name, Interval: formatDuration(step), InputSeries: mk(c.bucket),
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name, ExpAlerts: []ExpAlert{want}}}})
	}
	good := bucketWithin(o.Low, o.High)
	if good >= 0 {
		tests = append(tests, RuleTest{Name: "costs near their estimates stay quiet", Interval: formatDuration(step), InputSeries: mk(good),
			AlertRuleTests: []AlertRuleTest{{EvalTime: formatDuration(fire), Alertname: o.Name}}})
	}
	return g.file(step, tests...), nil
}

// quantileInBucket is histogram_quantile(q) when every observation is in bucket i.
func quantileInBucket(q float64, i int) float64 {
	lower := 0.0
	if i > 0 {
		lower = estimateBuckets[i-1]
	}
	return lower + (estimateBuckets[i]-lower)*q
}

// bucketAbove is the first bucket wholly above high (its lower bound ≥ high), or -1.
func bucketAbove(high float64) int {
	for i := 1; i < len(estimateBuckets); i++ {
		if estimateBuckets[i-1] >= high {
			return i
		}
	}
	return -1
}

// bucketBelow is a bucket wholly below low (its upper bound ≤ low), or -1.
func bucketBelow(low float64) int {
	for i := len(estimateBuckets) - 1; i >= 0; i-- {
		if estimateBuckets[i] <= low {
			return i
		}
	}
	return -1
}

// bucketWithin is a bucket wholly within [low, high], or -1.
func bucketWithin(low, high float64) int {
	for i := 1; i < len(estimateBuckets); i++ {
		if estimateBuckets[i-1] >= low && estimateBuckets[i] <= high {
			return i
		}
	}
	return -1
}
