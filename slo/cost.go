package slo

import (
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/rulefmt"
)

// Series of the cost of requests (reservations settled at their real cost).
const (
	metricCost          = "rate_limit_cost_total"
	metricEstimateRatio = "rate_limit_cost_estimate_ratio"
)

// GroupCost is the rule group of the cost alerts.
const GroupCost = "rl-exporter-cost"

// Alert names of the cost objectives.
const (
	AlertReservationsExpiring = "RateLimitReservationsExpiring"
	AlertCostEstimateOff      = "RateLimitCostEstimateOff"
)

// CostSpec holds the alerts on what requests really cost: reservations left
// to expire and estimates far from the cost settled.
type CostSpec struct {
	// Expired: RateLimitReservationsExpiring fires while reservations
	// expire unsettled (rate_limit_cost_total{phase="expired"} grows) for
	// For: a proxy or backend is dropping its commits.
	Expired CostExpiredSpec `koanf:"expired"`
	// Estimate: RateLimitCostEstimateOff fires while a quantile of
	// rate_limit_cost_estimate_ratio (actual ÷ estimate) stays outside
	// [Low, High] for For.
	Estimate CostEstimateSpec `koanf:"estimate"`
}

// CostExpiredSpec is the alert on reservations that expire unsettled.
type CostExpiredSpec struct {
	AlertSpec `koanf:",squash"`
	// Window is the rate window of the expired units.
	Window string `koanf:"window"`
}

// CostEstimateSpec is the alert on estimates far from the real cost.
type CostEstimateSpec struct {
	AlertSpec `koanf:",squash"`
	// Quantile of actual ÷ estimate; 0.5, the median, by default.
	Quantile float64 `koanf:"quantile"`
	// Low and High bound the ratio an estimate may be off by.
	Low  float64 `koanf:"low"`
	High float64 `koanf:"high"`
	// Window is the rate window of the quantile.
	Window string `koanf:"window"`
}

// DefaultCost returns the cost alerts' defaults.
func DefaultCost() CostSpec {
	return CostSpec{
		Expired: CostExpiredSpec{AlertSpec: AlertSpec{Enabled: true, For: "10m", Severity: "ticket"}, Window: "5m"},
		Estimate: CostEstimateSpec{AlertSpec: AlertSpec{Enabled: true, For: "30m", Severity: "ticket"},
			Quantile: 0.5, Low: 0.5, High: 2, Window: "30m"},
	}
}

// CostExpiredObjective alerts while reservations expire unsettled.
type CostExpiredObjective struct {
	Alert
	Window time.Duration
}

// CostEstimateObjective alerts while estimates are off by more than
// [Low, High] at Quantile.
type CostEstimateObjective struct {
	Alert
	Quantile, Low, High float64
	Window              time.Duration
}

// CostExpiredRecord names the rate of units expired unsettled.
func CostExpiredRecord(window time.Duration) string {
	return "endpoint_plan_tier:rate_limit_cost_expired:rate" + formatDuration(window)
}

// CostEstimateRatioRecord names the quantile of actual ÷ estimate (rate_limit_cost_estimate_ratio).
func CostEstimateRatioRecord(q float64, window time.Duration) string {
	return "endpoint_plan_tier:rate_limit_cost_estimate_ratio:" + quantileName(q) + "_rate" + formatDuration(window)
}

func (c *compiler) cost(spec Spec, m *Model) {
	if e := spec.Cost.Expired; e.Enabled {
		m.CostExpired = &CostExpiredObjective{
			Alert:  c.alert("cost.expired", AlertReservationsExpiring, spec, e.AlertSpec),
			Window: c.window("cost.expired.window", e.Window),
		}
	}
	if e := spec.Cost.Estimate; e.Enabled {
		o := &CostEstimateObjective{
			Alert:    c.alert("cost.estimate", AlertCostEstimateOff, spec, e.AlertSpec),
			Quantile: e.Quantile, Low: e.Low, High: e.High,
			Window: c.window("cost.estimate.window", e.Window),
		}
		if !(e.Quantile > 0 && e.Quantile < 1) {
			c.fail("cost.estimate.quantile", fmt.Sprintf("%v is not between 0 and 1 (exclusive)", e.Quantile))
		}
		if !(e.Low > 0 && e.Low < 1) {
			c.fail("cost.estimate.low", fmt.Sprintf("%v is not a ratio between 0 and 1 (exclusive)", e.Low))
		}
		if !(e.High > 1) {
			c.fail("cost.estimate.high", fmt.Sprintf("%v is not a ratio above 1", e.High))
		}
		m.CostEstimate = o
	}
}

// costGroup records the expired units and the ratio of real cost to estimate and alerts on them.
func (m *Model) costGroup() rulefmt.RuleGroup {
	g := rulefmt.RuleGroup{Name: GroupCost}
	if o := m.CostExpired; o != nil {
		w, rec := formatDuration(o.Window), CostExpiredRecord(o.Window)
		g.Rules = append(g.Rules,
			rulefmt.Rule{Record: rec, Expr: fmt.Sprintf("sum by (endpoint, plan_tier) (rate(%s%s[%s]))", metricCost, m.sel(`phase="expired"`), w)},
			alertRule(o.Alert, rec+" > 0", nil,
				"Reservations on {{ $labels.endpoint }} ({{ $labels.plan_tier }}) expire without being settled",
				fmt.Sprintf("{{ $value | humanize }} units/s of reservations on endpoint {{ $labels.endpoint }}, plan tier {{ $labels.plan_tier }}, expired unsettled over the last %s, for at least %s: a proxy or backend is dropping its commits, so budgets are charged estimates instead of real costs.",
					w, formatDuration(o.For))))
	}
	if o := m.CostEstimate; o != nil {
		w, rec := formatDuration(o.Window), CostEstimateRatioRecord(o.Quantile, o.Window)
		g.Rules = append(g.Rules,
			rulefmt.Rule{Record: rec, Expr: fmt.Sprintf(
				"histogram_quantile(%s,\n  sum by (endpoint, plan_tier, le) (rate(%s_bucket%s[%s]))\n  and on (endpoint, plan_tier)\n  (sum by (endpoint, plan_tier) (rate(%s_count%s[%s])) > 0)\n)",
				formatFloat(o.Quantile), metricEstimateRatio, m.sel(""), w, metricEstimateRatio, m.sel(""), w)},
			alertRule(o.Alert, fmt.Sprintf("%s < %s or %s > %s", rec, formatFloat(o.Low), rec, formatFloat(o.High)), nil,
				"Cost estimates on {{ $labels.endpoint }} ({{ $labels.plan_tier }}) are far from the real cost",
				fmt.Sprintf("The %s of actual ÷ estimated cost on endpoint {{ $labels.endpoint }}, plan tier {{ $labels.plan_tier }}, is {{ $value | humanize }} over the last %s (allowed %s to %s): admission reserves the wrong amount, so concurrent requests overshoot or are refused for budget they do not use. Adjust the class's estimate.",
					quantileName(o.Quantile), w, formatFloat(o.Low), formatFloat(o.High))))
	}
	return g
}
