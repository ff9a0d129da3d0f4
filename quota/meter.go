package quota

import "time"

// DefaultMinSpan is the least time a Meter measures a rate over: a report that follows the
// previous one closer than that (Envoy's immediate report of a new bucket, then its periodic
// one) is added to the next measure rather than making a rate of a few milliseconds.
const DefaultMinSpan = 250 * time.Millisecond

// Meter measures one client's demand on one limit from its usage reports, on the caller's clock.
// The first report is the client's subscription: it starts the measure and makes no rate. The
// zero Meter is ready, with DefaultMinSpan. A Meter is not safe for concurrent use.
type Meter struct {
	MinSpan time.Duration // 0: DefaultMinSpan

	started bool
	since   time.Time // the start of the measure under way
	pending uint64    // requests reported since then
	rate    float64
	known   bool
	last    time.Time // the last report
}

// Report records a report of n requests (allowed and denied) received at now.
func (m *Meter) Report(n uint64, now time.Time) {
	m.last = now
	if !m.started {
		m.started, m.since = true, now
		return
	}
	m.pending += n
	span := m.MinSpan
	if span <= 0 {
		span = DefaultMinSpan
	}
	if elapsed := now.Sub(m.since); elapsed >= span {
		m.rate, m.known = float64(m.pending)/elapsed.Seconds(), true
		m.pending, m.since = 0, now
	}
}

// Demand returns the client's demand as last measured; a client silent for longer than idle
// (a report lost, a client that stopped reporting) counts as idle, a demand of 0.
func (m *Meter) Demand(client string, now time.Time, idle time.Duration) Demand {
	if !m.known {
		return Demand{Client: client}
	}
	if idle > 0 && now.Sub(m.last) > idle {
		return Demand{Client: client, Known: true}
	}
	return Demand{Client: client, Rate: m.rate, Known: true}
}
