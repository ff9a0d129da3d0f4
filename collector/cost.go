package collector

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// The phase label values of rate_limit_cost_total.
var costPhases = [...]string{"reserved", "committed", "refunded", "expired", "late"}

const (
	phaseReserved = iota
	phaseCommitted
	phaseRefunded
	phaseExpired
	phaseLate
	numPhases
)

var costReasons = decision.CostReasons()

// pairCost holds the cost series of one (endpoint, plan_tier) label set.
type pairCost struct {
	units      [numPhases]atomic.Uint64
	open       atomic.Int64
	unknown    []atomic.Uint64  // by costReasons
	duplicates [2]atomic.Uint64 // by duplicateReads
}

// The read label values of rate_limit_cost_duplicates_total.
var duplicateReads = [...]string{decision.DuplicateEstimate, decision.DuplicateCost}

var _ decision.CostRecorder = (*Collector)(nil)

func (c *Collector) initCost() {
	labels := []string{"endpoint", "plan_tier"}
	c.costDesc = prometheus.NewDesc("rate_limit_cost_total",
		"Units of cost-based classes (cost_from) by phase: reserved at admission (the estimate), committed at the real cost, refunded (reserved beyond the real cost, or cancelled), expired (reservations found unsettled past their hold), late (the real cost beyond what an expiry took, charged when its settle came after it); each figure at most one quota.",
		[]string{"endpoint", "plan_tier", "phase"}, nil)
	c.openDesc = prometheus.NewDesc("rate_limit_reservations_open",
		"Reservations this instance opened or settled that are still open, counted from what the store answered: the sum over the instances is the fleet's.",
		labels, nil)
	c.unknownDesc = prometheus.NewDesc("rate_limit_cost_unknown_total",
		"Responses of cost-based classes with no usable cost, committed at the estimate, by reason (missing, invalid, too_large, client_gone).",
		[]string{"endpoint", "plan_tier", "reason"}, nil)
	c.duplicatesDesc = prometheus.NewDesc("rate_limit_cost_duplicates_total",
		"Requests of cost-based classes whose estimate (read=estimate), and responses whose cost (read=cost), was given more than once (a repeated JSON member or header): read as the largest.",
		[]string{"endpoint", "plan_tier", "read"}, nil)
	c.estimateRatio = prometheus.NewHistogramVec(histogramOpts("rate_limit_cost_estimate_ratio",
		"The real cost of a request over the estimate it reserved (1: exact; above 1: the estimate was short).",
		[]float64{0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.1, 1.25, 1.5, 2, 4, 10}, c.cfg.NativeHistograms), labels)
}

// pairCostOf returns the cost series of a label set, folded as RecordDecision folds, made on
// first use.
func (c *Collector) pairCostOf(endpoint, tier string) (*endpointSeries, *pairSeries, *pairCost) {
	ep, ok := c.index.Load().endpoints[endpoint]
	var ps *pairSeries
	if ok {
		ps = ep.tier(tier)
	}
	if ps == nil {
		ep, ps = c.fold(endpoint, tier)
	}
	pc := ps.cost.Load()
	if pc == nil {
		fresh := &pairCost{unknown: make([]atomic.Uint64, len(costReasons))}
		if !ps.cost.CompareAndSwap(nil, fresh) {
			return ep, ps, ps.cost.Load()
		}
		pc = fresh
	}
	return ep, ps, pc
}

// CostReserved counts a reservation opened at admission. Part of decision.CostRecorder: safe for
// concurrent use, lock-free.
func (c *Collector) CostReserved(endpoint, planTier string, units int64) {
	_, _, pc := c.pairCostOf(endpoint, planTier)
	pc.units[phaseReserved].Add(uint64(units))
	pc.open.Add(1)
}

// CostSettled counts a reservation committed or cancelled, and observes the real cost over the
// estimate when it was measured. Part of decision.CostRecorder.
func (c *Collector) CostSettled(endpoint, planTier string, s limiter.Settlement, measured bool) {
	ep, ps, pc := c.pairCostOf(endpoint, planTier)
	pc.closed()
	if s.Late {
		pc.units[phaseExpired].Add(uint64(max(s.Estimate, 0)))
		pc.units[phaseLate].Add(uint64(max(s.Charged, 0)))
		return
	}
	pc.units[phaseCommitted].Add(uint64(max(s.Actual, 0)))
	pc.units[phaseRefunded].Add(uint64(max(s.Refunded, 0)))
	if measured && s.Estimate > 0 {
		c.estimateRatio.WithLabelValues(ep.name, ps.tier).Observe(float64(s.Actual) / float64(s.Estimate))
	}
}

// CostExpired counts a reservation found settled by its expiry. Part of decision.CostRecorder.
func (c *Collector) CostExpired(endpoint, planTier string, units int64) {
	_, _, pc := c.pairCostOf(endpoint, planTier)
	pc.units[phaseExpired].Add(uint64(max(units, 0)))
	pc.closed()
}

// closed counts one reservation fewer open. Only a settle the store answered for one of its
// reservations gets here, so on an instance that settles what it opened the gauge never goes
// below zero; a decision API token opened on one instance and committed on another counts +1
// there and −1 here, and the sum is the fleet's.
func (pc *pairCost) closed() { pc.open.Add(-1) }

// CostUnknown counts a response with no usable cost; an unlisted reason counts as invalid. Part
// of decision.CostRecorder.
func (c *Collector) CostUnknown(endpoint, planTier, reason string) {
	_, _, pc := c.pairCostOf(endpoint, planTier)
	i := 1 // invalid
	for j, r := range costReasons {
		if r == reason {
			i = j
		}
	}
	pc.unknown[i].Add(1)
}

// CostDuplicate counts an estimate or a cost given more than once. Part of decision.CostRecorder.
func (c *Collector) CostDuplicate(endpoint, planTier, read string) {
	_, _, pc := c.pairCostOf(endpoint, planTier)
	for i, r := range duplicateReads {
		if r == read {
			pc.duplicates[i].Add(1)
		}
	}
}

func (c *Collector) collectCost(ch chan<- prometheus.Metric, endpoint string, ps *pairSeries) {
	pc := ps.cost.Load()
	if pc == nil {
		return
	}
	for i, p := range costPhases {
		ch <- prometheus.MustNewConstMetric(c.costDesc, prometheus.CounterValue, float64(pc.units[i].Load()), endpoint, ps.tier, p)
	}
	ch <- prometheus.MustNewConstMetric(c.openDesc, prometheus.GaugeValue, float64(pc.open.Load()), endpoint, ps.tier)
	for i, r := range costReasons {
		ch <- prometheus.MustNewConstMetric(c.unknownDesc, prometheus.CounterValue, float64(pc.unknown[i].Load()), endpoint, ps.tier, r)
	}
	for i, r := range duplicateReads {
		ch <- prometheus.MustNewConstMetric(c.duplicatesDesc, prometheus.CounterValue, float64(pc.duplicates[i].Load()), endpoint, ps.tier, r)
	}
}
