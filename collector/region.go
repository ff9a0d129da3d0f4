package collector

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/collector/buckets"
)

// Home label values of rate_limit_region_decisions_total: where a decision ran.
const (
	HomeLocal  = "local"
	HomeRemote = "remote"
)

// RegionConfig configures a Region collector.
type RegionConfig struct {
	// Peers are the other regions' names: the peer_region label values.
	// Their sync errors and round-trip times exist at zero from the first
	// scrape; calls naming another peer are not counted.
	Peers []string
	// Modes are the region modes in use ("strict", "async", "hybrid"):
	// their decisions exist at zero, for both homes, from the first scrape.
	// Other modes are counted from their first decision.
	Modes []string
	// NativeHistograms adds a native histogram beside the classic buckets
	// of rate_limit_region_rtt_seconds.
	NativeHistograms bool
}

// Region exports the multi-region metrics: the lag and errors of the
// counts exchanged with each peer region, the decisions by mode and where
// they ran, and the round-trip time of the decisions made on a peer. Its
// Observe methods have the shape of region.Observer (the caller adapts the
// mode's type, so this package does not link the region package and its
// Redis client); they are lock-free, allocation-free for configured peers
// and modes, and safe for concurrent use with each other and with scrapes.
type Region struct {
	peers     map[string]*peerSeries // read-only after NewRegion
	peerOrder []*peerSeries

	decisionsMu sync.Mutex // serialises adding a mode; reads go through decisions
	decisions   sync.Map   // mode + "\x00" + home → *atomic.Uint64
	modeOrder   []string   // guarded by decisionsMu

	rtt *prometheus.HistogramVec

	lagDesc, syncErrorsDesc, decisionsDesc, rejectedDesc *prometheus.Desc
}

// peerSeries holds one peer region's series.
type peerSeries struct {
	name    string
	lagBits atomic.Uint64 // math.Float64bits of the last lag, in seconds
	lagSeen atomic.Bool
	errors  atomic.Uint64
	// rejected are the slots of the exchange with the peer that a merge
	// ignored as too far in the future.
	rejected atomic.Uint64
	rtt      prometheus.Observer
}

var _ prometheus.Collector = (*Region)(nil)

// NewRegion returns a Region collector with the series of cfg's peers and
// modes at zero (the sync lag appears once a peer's first sync round is
// observed: before it the lag is unknown, not zero). Register it on the
// registry /metrics serves.
func NewRegion(cfg RegionConfig) (*Region, error) {
	r := &Region{
		peers: make(map[string]*peerSeries, len(cfg.Peers)),
		lagDesc: prometheus.NewDesc("rate_limit_region_sync_lag_seconds",
			"Age of the newest counts known from the peer region, as of the last sync round with it (async and hybrid modes).",
			[]string{"peer_region"}, nil),
		syncErrorsDesc: prometheus.NewDesc("rate_limit_region_sync_errors_total",
			"Sync rounds with the peer region that failed (shipping counts to it or reading its counts).",
			[]string{"peer_region"}, nil),
		rejectedDesc: prometheus.NewDesc("rate_limit_region_rejected_slots_total",
			"Slots of the exchange with the peer region that a merge ignored because their window started more than region.max_clock_skew ahead of the receiving Redis's clock (a peer's clock stepped forward, or a forged slot).",
			[]string{"peer_region"}, nil),
		decisionsDesc: prometheus.NewDesc("rate_limit_region_decisions_total",
			"Decisions of limits in a region mode other than local, by mode and by where they ran: home local (this region's Redis) or remote (a peer's).",
			[]string{"mode", "home"}, nil),
	}
	r.rtt = prometheus.NewHistogramVec(histogramOpts("rate_limit_region_rtt_seconds",
		"Round-trip time of the decisions made on a peer region's Redis (strict and hybrid modes), failures included.",
		buckets.RegionRTT(), cfg.NativeHistograms), []string{"peer_region"})
	for _, p := range cfg.Peers {
		if _, dup := r.peers[p]; dup {
			return nil, fmt.Errorf("collector: region: peer %q listed twice", p)
		}
		ps := &peerSeries{name: p, rtt: r.rtt.WithLabelValues(p)}
		r.peers[p] = ps
		r.peerOrder = append(r.peerOrder, ps)
	}
	for _, m := range cfg.Modes {
		r.counter(m, HomeLocal)
		r.counter(m, HomeRemote)
	}
	return r, nil
}

// counter returns the decision counter of mode and home, made on first use.
func (r *Region) counter(mode, home string) *atomic.Uint64 {
	key := mode + "\x00" + home
	if c, ok := r.decisions.Load(key); ok {
		return c.(*atomic.Uint64)
	}
	r.decisionsMu.Lock()
	defer r.decisionsMu.Unlock()
	c, loaded := r.decisions.LoadOrStore(key, new(atomic.Uint64))
	if !loaded {
		r.modeOrder = append(r.modeOrder, key)
	}
	return c.(*atomic.Uint64)
}

// ObserveSync records one sync round with peer: lag is the age of the
// newest counts known from it (negative: unknown, not recorded), err
// non-nil when the round failed.
func (r *Region) ObserveSync(peer string, lag time.Duration, err error) {
	ps := r.peers[peer]
	if ps == nil {
		return
	}
	if lag >= 0 {
		ps.lagBits.Store(math.Float64bits(lag.Seconds()))
		ps.lagSeen.Store(true)
	}
	if err != nil {
		ps.errors.Add(1)
	}
}

// ObserveDecision counts one decision of a limit in mode, made at home
// (HomeLocal or HomeRemote).
func (r *Region) ObserveDecision(mode, home string) {
	r.counter(mode, home).Add(1)
}

// ObserveRTT records the round-trip time of one decision made on peer's Redis.
func (r *Region) ObserveRTT(peer string, elapsed time.Duration) {
	if ps := r.peers[peer]; ps != nil {
		ps.rtt.Observe(elapsed.Seconds())
	}
}

// ObserveRejectedSlots counts n slots of the exchange with peer that a
// merge ignored as too far in the future of the receiving Redis's clock.
func (r *Region) ObserveRejectedSlots(peer string, n int) {
	if ps := r.peers[peer]; ps != nil && n > 0 {
		ps.rejected.Add(uint64(n))
	}
}

// Describe implements prometheus.Collector.
func (r *Region) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.lagDesc
	ch <- r.syncErrorsDesc
	ch <- r.decisionsDesc
	ch <- r.rejectedDesc
	r.rtt.Describe(ch)
}

// Collect implements prometheus.Collector.
func (r *Region) Collect(ch chan<- prometheus.Metric) {
	for _, ps := range r.peerOrder {
		if ps.lagSeen.Load() {
			ch <- prometheus.MustNewConstMetric(r.lagDesc, prometheus.GaugeValue, math.Float64frombits(ps.lagBits.Load()), ps.name)
		}
		ch <- prometheus.MustNewConstMetric(r.syncErrorsDesc, prometheus.CounterValue, float64(ps.errors.Load()), ps.name)
		ch <- prometheus.MustNewConstMetric(r.rejectedDesc, prometheus.CounterValue, float64(ps.rejected.Load()), ps.name)
	}
	r.decisionsMu.Lock()
	keys := append([]string(nil), r.modeOrder...)
	r.decisionsMu.Unlock()
	for _, k := range keys {
		c, _ := r.decisions.Load(k)
		mode, home, _ := strings.Cut(k, "\x00")
		ch <- prometheus.MustNewConstMetric(r.decisionsDesc, prometheus.CounterValue, float64(c.(*atomic.Uint64).Load()), mode, home)
	}
	r.rtt.Collect(ch)
}
