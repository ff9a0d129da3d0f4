package collector

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// OverloadConfig configures an Overload collector.
type OverloadConfig struct {
	// Upstream is the upstream label value (the upstream's host:port).
	Upstream string
	// Priorities and Reasons are the label values of rate_limit_shed_total:
	// every pair exists at zero from the first scrape.
	Priorities, Reasons []string
	// State returns the concurrency limit and the requests in flight now; called at each scrape.
	State func() (limit, inFlight int)
}

// Overload exports an upstream's load shedding: the adaptive concurrency
// limit, the requests in flight to the upstream and the requests shed, by
// priority and reason. Shed is lock-free and allocation-free, safe for
// concurrent use with itself and with scrapes.
type Overload struct {
	cfg                               OverloadConfig
	shed                              map[[2]string]*atomic.Uint64 // read-only after NewOverload
	limitDesc, inFlightDesc, shedDesc *prometheus.Desc
}

var _ prometheus.Collector = (*Overload)(nil)

// NewOverload returns an Overload collector; register it on the registry /metrics serves.
func NewOverload(cfg OverloadConfig) (*Overload, error) {
	if cfg.State == nil || cfg.Upstream == "" {
		return nil, fmt.Errorf("collector: overload: Upstream and State are required")
	}
	o := &Overload{cfg: cfg, shed: map[[2]string]*atomic.Uint64{},
		limitDesc: prometheus.NewDesc("rate_limit_overload_limit",
			"The adaptive concurrency limit on requests in flight to the upstream (server.overload): it follows the upstream's latency against its baseline and its latency objective.",
			[]string{"upstream"}, nil),
		inFlightDesc: prometheus.NewDesc("rate_limit_overload_in_flight",
			"Requests admitted by server.overload and in flight to the upstream now.",
			[]string{"upstream"}, nil),
		shedDesc: prometheus.NewDesc("rate_limit_shed_total",
			"Requests shed with 503 before reaching the upstream, by priority and reason: limit (the whole concurrency limit was in use) or reserved (what was left of it is kept for higher priorities).",
			[]string{"upstream", "priority", "reason"}, nil),
	}
	for _, p := range cfg.Priorities {
		for _, r := range cfg.Reasons {
			o.shed[[2]string{p, r}] = new(atomic.Uint64)
		}
	}
	return o, nil
}

// Shed counts one request shed; a priority or reason not configured is not counted.
func (o *Overload) Shed(priority, reason string) {
	if c := o.shed[[2]string{priority, reason}]; c != nil {
		c.Add(1)
	}
}

// Describe implements prometheus.Collector.
func (o *Overload) Describe(ch chan<- *prometheus.Desc) {
	ch <- o.limitDesc
	ch <- o.inFlightDesc
	ch <- o.shedDesc
}

// Collect implements prometheus.Collector.
func (o *Overload) Collect(ch chan<- prometheus.Metric) {
	limit, inFlight := o.cfg.State()
	ch <- prometheus.MustNewConstMetric(o.limitDesc, prometheus.GaugeValue, float64(limit), o.cfg.Upstream)
	ch <- prometheus.MustNewConstMetric(o.inFlightDesc, prometheus.GaugeValue, float64(inFlight), o.cfg.Upstream)
	for _, p := range o.cfg.Priorities {
		for _, r := range o.cfg.Reasons {
			ch <- prometheus.MustNewConstMetric(o.shedDesc, prometheus.CounterValue, float64(o.shed[[2]string{p, r}].Load()), o.cfg.Upstream, p, r)
		}
	}
}
