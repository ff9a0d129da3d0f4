package slo

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/rulefmt"
)

// GroupAvailabilityRecords holds the availability SLO's constants: the
// objective, error budget, period and an info series, as SLO tools such as
// Sloth record them. The records computed from the error ratios (burn
// rates, budget remaining) are in GroupAvailability, after the ratios they
// read: Prometheus evaluates groups concurrently, the rules of one group in
// order.
const GroupAvailabilityRecords = "rl-exporter-availability-slo-records"

// Records of the availability SLO, every one with the job label.
const (
	// SLOObjectiveRecord is the objective as a ratio (0.999).
	SLOObjectiveRecord = "job:rate_limit_slo_objective:ratio"
	// SLOErrorBudgetRecord is the error budget as a ratio (1 − objective).
	SLOErrorBudgetRecord = "job:rate_limit_slo_error_budget:ratio"
	// SLOPeriodDaysRecord is the SLO period in days.
	SLOPeriodDaysRecord = "job:rate_limit_slo_period:days"
	// SLOCurrentBurnRateRecord is the error ratio over the shortest
	// burn-rate window divided by the error budget: 1 spends exactly the
	// budget over the period.
	SLOCurrentBurnRateRecord = "job:rate_limit_slo_burn_rate:current"
	// SLOPeriodBurnRateRecord is the error ratio over the whole period
	// divided by the error budget.
	SLOPeriodBurnRateRecord = "job:rate_limit_slo_burn_rate:period"
	// SLOBudgetRemainingRecord is the share of the period's error budget
	// not spent: 1 − the period burn rate; below 0 the SLO is missed.
	SLOBudgetRemainingRecord = "job:rate_limit_slo_error_budget_remaining:ratio"
	// SLOInfoRecord is 1, with the SLO's name, objective and period as
	// labels.
	SLOInfoRecord = "job:rate_limit_slo:info"
)

// PeriodErrorRatioRecord names the availability SLO's error ratio over its
// whole period: the average of the shortest window's error ratio over the
// period, which costs one sample per evaluation instead of a rate() over
// the period.
func PeriodErrorRatioRecord(period time.Duration) string { return ErrorRatioRecord(period) }

// sloRecords builds the availability SLO's constants group; nil without an
// availability SLO.
func (m *Model) sloRecords() *rulefmt.RuleGroup {
	s := m.Availability
	if s == nil {
		return nil
	}
	job := map[string]string{"job": m.Job}
	days := formatFloat(roundSig(float64(s.Period)/float64(24*time.Hour), 10))
	return &rulefmt.RuleGroup{Name: GroupAvailabilityRecords, Rules: []rulefmt.Rule{
		{Record: SLOObjectiveRecord, Expr: fmt.Sprintf("vector(%s)", formatFloat(s.Objective)), Labels: job},
		{Record: SLOErrorBudgetRecord, Expr: fmt.Sprintf("vector(%s)", sloBudget(s)), Labels: job},
		{Record: SLOPeriodDaysRecord, Expr: fmt.Sprintf("vector(%s)", days), Labels: job},
		{Record: SLOInfoRecord, Expr: "vector(1)", Labels: map[string]string{
			"job": m.Job, "slo": "availability", "objective": formatFloat(s.Objective), "period": formatDuration(s.Period),
		}},
	}}
}

func sloBudget(s *AvailabilitySLO) string { return formatFloat(roundSig(1-s.Objective, 10)) }

// burnRecords are the SLO's records read from the error ratios: the
// current and period burn rates and the budget remaining, which
// availabilityGroup places after the ratios.
func (m *Model) burnRecords(s *AvailabilitySLO) []rulefmt.Rule {
	windows := s.windows()
	if len(windows) == 0 {
		return nil
	}
	sel := "{job=" + strconv.Quote(m.Job) + "}"
	budget := sloBudget(s)
	short := ErrorRatioRecord(windows[0])
	period := PeriodErrorRatioRecord(s.Period)
	rules := []rulefmt.Rule{{Record: SLOCurrentBurnRateRecord,
		Expr: fmt.Sprintf("sum by (job) (%s%s) / %s", short, sel, budget)}}
	if windows[len(windows)-1] != s.Period {
		rules = append(rules, rulefmt.Rule{Record: period, Expr: fmt.Sprintf(
			"sum by (job) (sum_over_time(%s%s[%s]))\n/\nsum by (job) (count_over_time(%s%s[%s]))",
			short, sel, formatDuration(s.Period), short, sel, formatDuration(s.Period))})
	}
	return append(rules,
		rulefmt.Rule{Record: SLOPeriodBurnRateRecord, Expr: fmt.Sprintf("sum by (job) (%s%s) / %s", period, sel, budget)},
		rulefmt.Rule{Record: SLOBudgetRemainingRecord, Expr: fmt.Sprintf("1 - sum by (job) (%s%s)", SLOPeriodBurnRateRecord, sel)})
}

// PromqlExprTest checks the samples an expression returns at EvalTime.
type PromqlExprTest struct {
	Expr       string      `yaml:"expr"`
	EvalTime   string      `yaml:"eval_time"`
	ExpSamples []ExpSample `yaml:"exp_samples"`
}

// ExpSample is one expected sample: its series in PromQL notation and its
// value.
type ExpSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// sloRecordTests adds the promtool tests of the SLO records: the SLO's
// constants and current burn rate from decisions, and the period's burn
// rate and budget remaining from a period of the shortest window's error
// ratio. The values are chosen exact in binary, and the expected ones
// computed with the same float operations Prometheus does.
func (g *testGen) sloRecordTests(add func(string, RuleTestFile, error) error) error {
	s := g.m.Availability
	windows := s.windows()
	if len(windows) == 0 {
		return nil
	}
	budget := roundSig(1-s.Objective, 10)
	job := map[string]string{"job": g.m.Job}
	sample := func(name string, l map[string]string, v float64) ExpSample {
		return ExpSample{Labels: series(name, l), Value: v}
	}
	expr := func(name, at string, samples ...ExpSample) PromqlExprTest {
		return PromqlExprTest{Expr: name, EvalTime: at, ExpSamples: samples}
	}

	// Half the decisions fail open: an error ratio of exactly 0.5.
	step := stepFor(windows[0])
	total := int(2*windows[0]/step) + 2
	at := formatDuration(time.Duration(total-1) * step)
	now := RuleTest{
		Name:     "the SLO's objective, budget, period and info, and a burn rate of 0.5 / budget when half the decisions fail open",
		Interval: formatDuration(step),
		InputSeries: []InputSeries{
			{Series: series(metricRequests, g.jobLabels(map[string]string{"instance": "rl-exporter-1:9090", "endpoint": "/v1/orders", "plan_tier": "free", "status": "allowed"})),
				Values: counterValues(segment{10 * step.Seconds(), total})},
			{Series: series(metricRequests, g.jobLabels(map[string]string{"instance": "rl-exporter-2:9090", "endpoint": "/v1/orders", "plan_tier": "free", "status": "fail_open"})),
				Values: counterValues(segment{10 * step.Seconds(), total})},
		},
		PromqlExprTests: []PromqlExprTest{
			expr(SLOObjectiveRecord, at, sample(SLOObjectiveRecord, job, s.Objective)),
			expr(SLOErrorBudgetRecord, at, sample(SLOErrorBudgetRecord, job, budget)),
			expr(SLOPeriodDaysRecord, at, sample(SLOPeriodDaysRecord, job, roundSig(float64(s.Period)/float64(24*time.Hour), 10))),
			expr(SLOInfoRecord, at, sample(SLOInfoRecord, map[string]string{
				"job": g.m.Job, "slo": "availability", "objective": formatFloat(s.Objective), "period": formatDuration(s.Period),
			}, 1)),
			expr(SLOCurrentBurnRateRecord, at, sample(SLOCurrentBurnRateRecord, job, 0.5/budget)),
		},
	}
	if err := add("slo-records.yml", g.file(step, now), nil); err != nil {
		return err
	}

	// A whole period of a constant error ratio below the budget: a power
	// of two, so its average over the period is exact.
	ratio := math.Exp2(math.Floor(math.Log2(budget / 2)))
	hour := time.Hour
	steps := int(s.Period / hour)
	end := formatDuration(s.Period)
	burn := ratio / budget
	period := RuleTest{
		Name:     fmt.Sprintf("an error ratio of %s over the whole %s spends %s of the budget", formatFloat(ratio), formatDuration(s.Period), percent(burn)),
		Interval: formatDuration(hour),
		InputSeries: []InputSeries{
			{Series: series(ErrorRatioRecord(windows[0]), job), Values: fmt.Sprintf("%sx%d", formatFloat(ratio), steps)},
		},
		PromqlExprTests: []PromqlExprTest{
			expr(PeriodErrorRatioRecord(s.Period), end, sample(PeriodErrorRatioRecord(s.Period), job, ratio)),
			expr(SLOPeriodBurnRateRecord, end, sample(SLOPeriodBurnRateRecord, job, burn)),
			expr(SLOBudgetRemainingRecord, end, sample(SLOBudgetRemainingRecord, job, 1-burn)),
		},
	}
	return add("slo-period.yml", g.file(hour, period), nil)
}
