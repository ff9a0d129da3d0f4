package collector

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// OtherLimit is the limit label of refusals by a limit the collector was not told of
// (SetLimits): a name outside its endpoint and tier's list, or a refusal of an endpoint and
// tier with no limit set, folded so that the label stays bounded.
const OtherLimit = "other"

// NamedLimit is one limit of an endpoint and tier, by the name its rate_limit_quota and
// rate_limit_refusals_total carry as the limit label: a single limit's class, a listed limit's
// own name. A plain value.
type NamedLimit struct {
	Name  string
	Limit limiter.Limit
}

// namedCount is the refusals of one configured limit of a label set.
type namedCount struct {
	name string
	n    *atomic.Uint64
}

// SetLimits sets the limits in force on an endpoint and plan tier ("": the default tier), in
// place of any set before: rate_limit_quota and rate_limit_refusals_total (from zero) for each
// by its name, and rate_limit_limit when there is one limit alone (a tier of several has no
// one limit in force). A later call keeps the refusals of the names it keeps. An endpoint
// folded by the cardinality cap is ignored. Names must be unique and not empty. Safe for
// concurrent use.
func (c *Collector) SetLimits(endpoint, tier string, limits []NamedLimit) error {
	if len(limits) == 0 {
		return fmt.Errorf("collector: set limits of %s (tier %s): no limit", endpoint, tier)
	}
	vs := make([]limitValue, len(limits))
	for i, l := range limits {
		if _, err := limiter.ParseAlgorithm(string(l.Limit.Algorithm)); err != nil {
			return fmt.Errorf("collector: set limit %q of %s (tier %s): %w", l.Name, endpoint, tier, err)
		}
		if l.Name == "" {
			return fmt.Errorf("collector: set limits of %s (tier %s): a limit has no name", endpoint, tier)
		}
		for _, prev := range limits[:i] {
			if prev.Name == l.Name {
				return fmt.Errorf("collector: set limits of %s (tier %s): limit %q named twice", endpoint, tier, l.Name)
			}
		}
		vs[i] = limitValue{name: l.Name, algorithm: string(l.Limit.Algorithm), quota: float64(l.Limit.Quota())}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.setLimitLocked(endpoint, tier, vs)
	return err
}

// nameRefusals makes ps count refusals under the names of vs, keeping the counts of the names
// it had. Under Collector.mu: the one writer of ps.refusals.
func (ps *pairSeries) nameRefusals(vs []limitValue) {
	var old []namedCount
	if p := ps.refusals.Load(); p != nil {
		old = *p
	}
	named := make([]namedCount, len(vs))
	for i, v := range vs {
		named[i].name = v.name
		for _, o := range old {
			if o.name == v.name {
				named[i].n = o.n
			}
		}
		if named[i].n == nil {
			named[i].n = new(atomic.Uint64)
		}
	}
	ps.refusals.Store(&named)
}

// countRefusals counts one refusal under each name of by, or under the label set's limit when by
// is empty (a single limit), the names not configured under OtherLimit. Lock-free, allocation-free.
func (ps *pairSeries) countRefusals(by []string) {
	var named []namedCount
	if p := ps.refusals.Load(); p != nil {
		named = *p
	}
	if len(by) == 0 {
		if len(named) == 1 {
			named[0].n.Add(1)
		} else {
			ps.refusedBy.Add(1)
		}
		return
	}
next:
	for _, name := range by {
		for _, nc := range named {
			if nc.name == name {
				nc.n.Add(1)
				continue next
			}
		}
		ps.refusedBy.Add(1)
	}
}

// collectRefusals sends ps's refusals: every configured limit's, and OtherLimit's once above zero.
func (c *Collector) collectRefusals(ch chan<- prometheus.Metric, endpoint string, ps *pairSeries) {
	other := ps.refusedBy.Load()
	if p := ps.refusals.Load(); p != nil {
		for _, nc := range *p {
			v := nc.n.Load()
			if nc.name == OtherLimit { // a limit named "other" takes the folded ones too
				v, other = v+other, 0
			}
			ch <- prometheus.MustNewConstMetric(c.refusalsDesc, prometheus.CounterValue, float64(v), endpoint, ps.tier, nc.name)
		}
	}
	if other > 0 {
		ch <- prometheus.MustNewConstMetric(c.refusalsDesc, prometheus.CounterValue, float64(other), endpoint, ps.tier, OtherLimit)
	}
}
