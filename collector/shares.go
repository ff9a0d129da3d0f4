package collector

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind label values of rate_limit_shares_units_total.
const (
	SharesUnitsTaken    = "taken"
	SharesUnitsReturned = "returned"
)

// SharesStats is what a class's local shares (shares.enabled) have done on this instance
// since it started. Every field only grows.
type SharesStats struct {
	Reservations uint64 // chunks asked of Redis: granted, refused or failed
	UnitsTaken   uint64 // units granted in chunks
	// UnitsReturned are the units of the chunks given back unused, those of the give-backs
	// that failed included (they are lost for the window instead).
	UnitsReturned  uint64
	GiveBacks      uint64 // chunks given back: sent to Redis, answered or not yet
	GiveBackErrors uint64 // give-backs Redis did not acknowledge: the chunk expires charged
	Plain          uint64 // decisions of keys too cold for a chunk, made on Redis
}

// SharesConfig configures a Shares collector.
type SharesConfig struct {
	// Stats returns the shares' counts by class name, of every class with shares in the config
	// in force and of no other (nothing is exported while there is none); called at each
	// scrape. Required.
	Stats func() map[string]SharesStats
}

// Shares exports the local shares of limits that classes with shares.enabled decide from, by
// class: the chunks reserved from Redis and given back, the units they held and returned, the
// give-backs that failed, and the decisions made on Redis for keys too cold for a chunk. It
// reads a snapshot at each scrape (the caller reads its stores, so this package does not link
// limiter/shares), so that a class leaves and joins with the config in force, and is safe for
// concurrent use.
type Shares struct {
	cfg                                                    SharesConfig
	reservesDesc, unitsDesc, givenDesc, errDesc, plainDesc *prometheus.Desc
}

var _ prometheus.Collector = (*Shares)(nil)

// NewShares returns a Shares collector; register it on the registry /metrics serves.
func NewShares(cfg SharesConfig) (*Shares, error) {
	if cfg.Stats == nil {
		return nil, errors.New("collector: shares: Stats is required")
	}
	class := []string{"class"}
	return &Shares{cfg: cfg,
		reservesDesc: prometheus.NewDesc("rate_limit_shares_reservations_total",
			"Chunks of a limit's units this instance asked Redis to reserve for its local shares (shares.enabled), by class, granted, refused or failed.",
			class, nil),
		unitsDesc: prometheus.NewDesc("rate_limit_shares_units_total",
			"Units of the local shares' chunks, by class: kind=taken, granted by Redis; kind=returned, given back unused (those of failed give-backs included).",
			[]string{"class", "kind"}, nil),
		givenDesc: prometheus.NewDesc("rate_limit_shares_give_backs_total",
			"Chunks of the local shares given back to Redis at what was used of them, by class, failed ones included.",
			class, nil),
		errDesc: prometheus.NewDesc("rate_limit_shares_give_back_errors_total",
			"Give-backs of local shares' chunks that Redis did not acknowledge, by class: the chunk's reservation expires charged, its unused units lost for the window.",
			class, nil),
		plainDesc: prometheus.NewDesc("rate_limit_shares_plain_decisions_total",
			"Decisions of classes with shares made on Redis, one round trip each, by class, because the key asked too little to be worth a chunk.",
			class, nil),
	}, nil
}

// Describe implements prometheus.Collector.
func (s *Shares) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.reservesDesc
	ch <- s.unitsDesc
	ch <- s.givenDesc
	ch <- s.errDesc
	ch <- s.plainDesc
}

// Collect implements prometheus.Collector.
func (s *Shares) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	byClass := s.cfg.Stats()
	for _, class := range sortedKeys(byClass) {
		st := byClass[class]
		counter(s.reservesDesc, st.Reservations, class)
		counter(s.unitsDesc, st.UnitsTaken, class, SharesUnitsTaken)
		counter(s.unitsDesc, st.UnitsReturned, class, SharesUnitsReturned)
		counter(s.givenDesc, st.GiveBacks, class)
		counter(s.errDesc, st.GiveBackErrors, class)
		counter(s.plainDesc, st.Plain, class)
	}
}
