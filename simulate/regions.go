package simulate

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// A multi-region simulation plays one key's traffic, the same steady rate
// from each of N regions, against the four region modes, in simulated time,
// each region deciding on its own copy of the key in a limiter.MemoryStore
// (regionCopy): the point is what each region can see, and when.
//
//   - local: each region decides on its own count and never sees the
//     others'.
//   - strict: every decision runs on the home region's count (region 1),
//     exactly; a request from another region reaches it one one-way
//     latency later and its answer comes back after another, so it adds
//     2 × one-way to that request.
//   - async: each region decides at once on its own admissions plus the
//     other regions' as of their last shipping round that has arrived:
//     region q ships every sync interval (the regions' rounds staggered
//     evenly over the interval), and a round reaches the others one
//     one-way latency later. So a region sees another's admissions as of
//     now − (up to one sync interval) − one-way.
//   - hybrid: async while a request keeps the region's view of the key
//     within floor(threshold × quota) units, as region/ decides, then
//     strict for the rest of the window (for buckets: while a request
//     would take the view past them). A strict decision is
//     made on the home region's view, counted as the home region's
//     admission, and shipped from there like any other.
//
// Buckets replicate consumed units, taken when they become known. Buckets
// start empty, as under sustained load, so that a window's figure is the
// mode's and not the bucket's initial burst (a window algorithm's first
// window is its quota either way).

// RegionAlgorithms are the algorithms every region mode supports: those of
// hybrid, the narrowest.
var RegionAlgorithms = region.Algorithms(region.ModeHybrid)

// DefaultHybridThreshold is the hybrid threshold when none is given, as in
// the configuration.
const DefaultHybridThreshold = region.DefaultHybridThreshold

// RegionsConfig describes one multi-region simulation: a plain value.
type RegionsConfig struct {
	// Regions is the number of regions, 1 or more; region 1 is the key's
	// home.
	Regions int
	// PerRegion is the requests per second each region sends, evenly
	// spaced (the regions' requests interleave evenly).
	PerRegion float64
	// Algorithm is one of RegionAlgorithms.
	Algorithm limiter.Algorithm
	// Rate requests per Period is the global limit; Burst the bucket size
	// of token_bucket and gcra (zero: Rate).
	Rate   int64
	Period time.Duration
	Burst  int64
	// OneWay is the latency between any two regions; SyncInterval how
	// often each region ships its counts to the others.
	OneWay, SyncInterval time.Duration
	// HybridThreshold is the share of the quota at which hybrid turns
	// strict, in (0, 1]; zero means DefaultHybridThreshold.
	HybridThreshold float64
	// Duration is the simulated span; zero means ten periods.
	Duration time.Duration
}

// RegionsResult is how one mode fared: a plain value.
type RegionsResult struct {
	Mode region.Mode
	// Bound is the documented worst case of admitted ÷ limit for the mode
	// (region.OvershootBound), with the other regions' rate as the rate
	// they send.
	Bound float64
	// Allowed and Rejected count the decisions of every region.
	Allowed, Rejected int
	// Admitted are the times of the admissions, where they were decided
	// (a strict decision on the home region, after the one-way latency).
	// Ascending.
	Admitted []time.Duration
	// Windows are the admissions per aligned window of one Period, all
	// regions together, for every whole window of the simulation.
	Windows []int
	// MaxRatio and MeanRatio are the largest and the mean of Windows
	// divided by the quota.
	MaxRatio, MeanRatio float64
	// CrossShare is the share of decisions made in another region than
	// the request's.
	CrossShare float64
	// LatencyP50 and LatencyP99 are what the mode adds to a decision:
	// 2 × one-way for a decision made in another region, 0 otherwise.
	LatencyP50, LatencyP99 time.Duration
}

// RegionsRun is a finished multi-region simulation; read-only after
// SimulateRegions returns and safe for concurrent reads.
type RegionsRun struct {
	// Config has the defaults filled in.
	Config RegionsConfig
	// Arrivals are the requests of every region, ascending.
	Arrivals []time.Duration
	// Results has one result per mode, in region.AllModes order.
	Results []RegionsResult
}

// Result returns the result of mode m, or false.
func (r *RegionsRun) Result(m region.Mode) (RegionsResult, bool) {
	for _, res := range r.Results {
		if res.Mode == m {
			return res, true
		}
	}
	return RegionsResult{}, false
}

// Quota is the number of units a region's view may reach: Rate for the
// window algorithms, the bucket size for the buckets.
func (c RegionsConfig) Quota() int64 {
	return limiter.Limit{Algorithm: c.Algorithm, Rate: c.Rate, Period: c.Period, Burst: c.Burst}.Quota()
}

// validate fills in the defaults and names the first bad field.
func (c *RegionsConfig) validate() error {
	if c.Regions < 1 {
		return fmt.Errorf("regions: %d, want 1 or more", c.Regions)
	}
	if !(c.PerRegion > 0) || math.IsInf(c.PerRegion, 0) {
		return fmt.Errorf("rate per region: %v, want a number of requests per second > 0", c.PerRegion)
	}
	if !slices.Contains(RegionAlgorithms, c.Algorithm) {
		return fmt.Errorf("algorithm %q: region modes share fixed_window, sliding_window, token_bucket and gcra", c.Algorithm)
	}
	lim := limiter.Limit{Algorithm: c.Algorithm, Rate: c.Rate, Period: c.Period, Burst: c.Burst}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("limit: %w", err)
	}
	if c.Period%time.Microsecond != 0 {
		return fmt.Errorf("limit: period: %s is not a whole number of microseconds", c.Period)
	}
	if c.OneWay < 0 {
		return fmt.Errorf("one-way latency: %s, want 0 or more", c.OneWay)
	}
	if c.SyncInterval <= 0 {
		return fmt.Errorf("sync interval: %s, want more than 0", c.SyncInterval)
	}
	if c.HybridThreshold == 0 {
		c.HybridThreshold = DefaultHybridThreshold
	}
	if !(c.HybridThreshold > 0 && c.HybridThreshold <= 1) {
		return fmt.Errorf("hybrid threshold: %v, want a share of the limit in (0, 1]", c.HybridThreshold)
	}
	if c.Duration == 0 {
		c.Duration = 10 * c.Period
	}
	if c.Duration < c.Period {
		return fmt.Errorf("duration: %s, want at least one period (%s)", c.Duration, c.Period)
	}
	if n := float64(c.Regions) * c.PerRegion * c.Duration.Seconds(); n > MaxArrivals {
		return fmt.Errorf("%.0f requests over %s, more than the %d a simulation replays", n, c.Duration, MaxArrivals)
	}
	return nil
}

// SimulateRegions runs cfg against every region mode. It returns an error
// naming the field when cfg is invalid. It shares nothing between calls
// and is safe for concurrent use.
func SimulateRegions(cfg RegionsConfig) (*RegionsRun, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("simulate regions: %w", err)
	}
	arrivals := regionArrivals(cfg)
	run := &RegionsRun{Config: cfg}
	for _, a := range arrivals {
		run.Arrivals = append(run.Arrivals, time.Duration(a.at)*time.Microsecond)
	}
	slices.Sort(run.Arrivals)
	for _, m := range region.AllModes() {
		res, err := simulateMode(cfg, m, arrivals)
		if err != nil {
			return nil, fmt.Errorf("simulate regions: %s: %w", m, err)
		}
		run.Results = append(run.Results, res)
	}
	return run, nil
}

// request is one request of one region, times in microseconds.
type request struct {
	at     int64
	region int
}

// regionArrivals spaces each region's requests evenly, the regions'
// phases spread over one gap so that they interleave.
func regionArrivals(c RegionsConfig) []request {
	gap := float64(time.Second/time.Microsecond) / c.PerRegion
	end := int64(c.Duration / time.Microsecond)
	var out []request
	for r := range c.Regions {
		phase := gap * float64(r) / float64(c.Regions)
		for k := 0; ; k++ {
			at := int64(phase + float64(k)*gap)
			if at >= end {
				break
			}
			out = append(out, request{at: at, region: r})
		}
	}
	slices.SortStableFunc(out, func(a, b request) int { return cmpInt64(a.at, b.at) })
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// admission is one admitted request as the regions' views hold it: when
// and on which region's count.
type admission struct {
	at     int64
	region int
}

// world is the state of one simulated mode: every admission so far, in
// time order, and each region's view of them.
type world struct {
	c      RegionsConfig
	mode   region.Mode
	period int64 // µs
	oneWay int64
	sync   int64
	events []admission
	views  []view
}

// view is what one region knows of the admissions: its copy of the key,
// fed with the admissions of events[:seen] it knows of, each other region q
// known up to cut[q]; unseen holds those of events[:seen] it does not know
// of yet, in time order; last is the time of the latest admission applied.
type view struct {
	copy   *regionCopy
	seen   int
	cut    []int64
	unseen []admission
	last   int64
}

// known is the latest time up to which region r knows region q's
// admissions at now: q's last shipping round that has reached r. Region q
// ships at q·sync/N + k·sync. In local mode nothing of q is ever known.
func (w *world) known(q, r int, now int64) int64 {
	if q == r {
		return now
	}
	if w.mode == region.ModeLocal {
		return math.MinInt64
	}
	phase := int64(q) * w.sync / int64(w.c.Regions)
	t := now - w.oneWay - phase
	if t < 0 {
		return math.MinInt64
	}
	return phase + t/w.sync*w.sync
}

// stateAt is region r's copy of the key at now, with every admission it
// knows of applied as region/ applies them. A bucket takes the units of a
// round as they become known, as if they arrived then (region/'s
// token_bucket.lua and gcra.lua), and its own when made. A window
// algorithm counts each admission in the window it was made in: the units
// of a round are applied at their own times, in time order, which, when
// the region has applied a later admission of its own or moved on to a
// later window (windows are aligned), means replaying what it knows from
// two periods back (what is older belongs to no window the state keeps).
func (w *world) stateAt(r int, now int64) (*regionCopy, error) {
	v := &w.views[r]
	learnt := false
	for q := range w.c.Regions {
		if k := w.known(q, r, now); q != r && k != v.cut[q] {
			v.cut[q], learnt = k, true
		}
	}
	knows := func(e admission) bool { return e.region == r || e.at <= v.cut[e.region] }
	bucket := w.c.Algorithm.IsBucket()
	apply := func(e admission) error {
		t := e.at
		if bucket {
			t = max(t, v.copy.now)
		}
		v.last = t
		return v.copy.apply(t)
	}
	if learnt {
		var known []admission
		still := v.unseen[:0]
		for _, e := range v.unseen {
			if knows(e) {
				known = append(known, e)
			} else {
				still = append(still, e)
			}
		}
		v.unseen = still
		// The copy holds the window it last decided in (a peek moves it
		// to a new one): an admission of an earlier window, or from
		// before the last one applied, cannot be added on top.
		if !bucket && len(known) > 0 && (known[0].at < v.last || known[0].at/w.period != v.copy.now/w.period) {
			return w.replay(r, now)
		}
		for _, e := range known {
			if err := apply(e); err != nil {
				return nil, err
			}
		}
	}
	for ; v.seen < len(w.events); v.seen++ {
		if e := w.events[v.seen]; !knows(e) {
			v.unseen = append(v.unseen, e)
		} else if err := apply(e); err != nil {
			return nil, err
		}
	}
	v.copy.now = now
	return v.copy, nil
}

// replay rebuilds region r's copy of a window algorithm's key at now from
// the admissions of the last two periods it knows of.
func (w *world) replay(r int, now int64) (*regionCopy, error) {
	v := &w.views[r]
	if err := v.copy.reset(); err != nil {
		return nil, err
	}
	v.unseen, v.last = v.unseen[:0], math.MinInt64
	from := now - 2*w.period
	for v.seen = sort.Search(len(w.events), func(i int) bool { return w.events[i].at >= from }); v.seen < len(w.events); v.seen++ {
		e := w.events[v.seen]
		if e.region != r && e.at > v.cut[e.region] {
			v.unseen = append(v.unseen, e)
			continue
		}
		v.last = e.at
		if err := v.copy.apply(e.at); err != nil {
			return nil, err
		}
	}
	v.copy.now = now
	return v.copy, nil
}

// pending is a decision to make: a request decided at its own region, or
// forwarded to the home region.
type pending struct {
	at      int64 // when the deciding region decides
	origin  int   // the request's region
	decider int
	seq     int
}

type pendingQueue []pending

func (q pendingQueue) Len() int { return len(q) }
func (q pendingQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q pendingQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pendingQueue) Push(x any)   { *q = append(*q, x.(pending)) }
func (q *pendingQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

const home = 0

// newWorld is the regions' state at the start: each region's view of
// the key empty, and cut off from every other region's admissions.
func newWorld(c RegionsConfig, mode region.Mode) (*world, error) {
	w := &world{
		c: c, mode: mode,
		period: int64(c.Period / time.Microsecond),
		oneWay: int64(c.OneWay / time.Microsecond),
		sync:   max(1, int64(c.SyncInterval/time.Microsecond)),
	}
	for range c.Regions {
		cut := make([]int64, c.Regions)
		for q := range cut {
			cut[q] = math.MinInt64
		}
		rc, err := newRegionCopy(c)
		if err != nil {
			return nil, err
		}
		w.views = append(w.views, view{copy: rc, cut: cut})
	}
	return w, nil
}

// summarize fills in the share of crossing decisions, the added latency
// and the admitted ÷ limit per whole aligned window.
func (res *RegionsResult) summarize(c RegionsConfig, crossing int, quota float64) {
	total := res.Allowed + res.Rejected
	res.CrossShare = float64(crossing) / float64(total)
	added := 2 * c.OneWay
	if crossing > 0 && float64(total-crossing) < 0.5*float64(total) {
		res.LatencyP50 = added
	}
	if crossing > 0 && float64(total-crossing) < 0.99*float64(total) {
		res.LatencyP99 = added
	}
	// Whole aligned windows, the first left out.
	windows := int(c.Duration / c.Period)
	counts := make([]int, windows)
	for _, t := range res.Admitted {
		if i := int(t / c.Period); i < windows {
			counts[i]++
		}
	}
	res.Windows = counts
	sum := 0
	for _, n := range res.Windows {
		sum += n
		res.MaxRatio = max(res.MaxRatio, float64(n)/quota)
	}
	res.MeanRatio = float64(sum) / float64(len(res.Windows)) / quota
}

func simulateMode(c RegionsConfig, mode region.Mode, arrivals []request) (RegionsResult, error) {
	w, err := newWorld(c, mode)
	if err != nil {
		return RegionsResult{}, err
	}
	quota := float64(c.Quota())
	// strictUntil[r] is the end of the window for which region r has
	// turned strict (hybrid, window algorithms).
	strictUntil := make([]int64, c.Regions)

	lim := limiter.Limit{Algorithm: c.Algorithm, Rate: c.Rate, Period: c.Period, Burst: c.Burst}
	res := RegionsResult{Mode: mode, Bound: region.OvershootBound(mode, lim, c.Regions,
		c.PerRegion*float64(c.Regions-1), c.OneWay, c.SyncInterval, c.HybridThreshold)}
	var crossing int
	q := &pendingQueue{}
	next := 0
	seq := 0
	for next < len(arrivals) || q.Len() > 0 {
		// Arrivals first at equal times: a forwarded request reaches home
		// after the requests that arrived there at the same instant.
		if next < len(arrivals) && (q.Len() == 0 || arrivals[next].at <= (*q)[0].at) {
			a := arrivals[next]
			next++
			decider := a.region
			switch mode {
			case region.ModeStrict:
				decider = home
			case region.ModeHybrid:
				if a.region != home {
					s, err := w.stateAt(a.region, a.at)
					if err != nil {
						return res, err
					}
					over, err := s.overThreshold()
					if err != nil {
						return res, err
					}
					if a.at < strictUntil[a.region] || over {
						decider = home
						if c.Algorithm == limiter.FixedWindow || c.Algorithm == limiter.SlidingWindow {
							strictUntil[a.region] = (a.at/w.period + 1) * w.period
						}
					}
				}
			}
			at := a.at
			if decider != a.region {
				at += w.oneWay
				crossing++
			}
			heap.Push(q, pending{at: at, origin: a.region, decider: decider, seq: seq})
			seq++
			continue
		}
		p := heap.Pop(q).(pending)
		s, err := w.stateAt(p.decider, p.at)
		if err != nil {
			return res, err
		}
		allowed, err := s.allows()
		if err != nil {
			return res, err
		}
		if allowed {
			res.Allowed++
			w.events = append(w.events, admission{at: p.at, region: p.decider})
			res.Admitted = append(res.Admitted, time.Duration(p.at)*time.Microsecond)
		} else {
			res.Rejected++
		}
	}
	res.summarize(c, crossing, quota)
	return res, nil
}

// WriteTable writes the modes side by side: one column per mode.
func (r *RegionsRun) WriteTable(w io.Writer) error {
	c := r.Config
	if _, err := fmt.Fprintf(w, "%d regions, each sending %s requests/s on one key; limit %d per %s (%s, quota %d); one-way %s, sync interval %s, hybrid threshold %s; %s simulated\n\n",
		c.Regions, formatRate(c.PerRegion), c.Rate, shortDuration(c.Period), c.Algorithm, c.Quota(),
		shortDuration(c.OneWay), shortDuration(c.SyncInterval), formatRate(c.HybridThreshold), shortDuration(c.Duration)); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-30s\t", "")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t", res.Mode)
	}
	fmt.Fprintln(tw)
	row := func(name string, cell func(RegionsResult) string) {
		fmt.Fprintf(tw, "%-30s\t", name)
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t", cell(res))
		}
		fmt.Fprintln(tw)
	}
	row("admitted ÷ limit, max window", func(res RegionsResult) string { return fmt.Sprintf("%.2f×", res.MaxRatio) })
	row("admitted ÷ limit, mean window", func(res RegionsResult) string { return fmt.Sprintf("%.2f×", res.MeanRatio) })
	row("documented bound", func(res RegionsResult) string { return fmt.Sprintf("%.2f×", res.Bound) })
	row("allowed", func(res RegionsResult) string { return fmt.Sprint(res.Allowed) })
	row("rejected", func(res RegionsResult) string { return fmt.Sprint(res.Rejected) })
	row("decisions crossing regions", func(res RegionsResult) string { return fmt.Sprintf("%.1f%%", 100*res.CrossShare) })
	row("added latency p50", func(res RegionsResult) string { return shortDuration(res.LatencyP50) })
	row("added latency p99", func(res RegionsResult) string { return shortDuration(res.LatencyP99) })
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\ndocumented bound: region.OvershootBound with the other regions' rate (%s/s) as their admitted rate.\n"+
		"admitted ÷ limit: admissions of all regions in each aligned %s window divided by the quota %d (buckets\n"+
		"start empty, as under sustained load). Region 1 is the key's home: a strict decision from another region\n"+
		"adds 2 × one-way (%s). Async regions see each other's counts as of now − the sync round's phase (up to %s)\n"+
		"− one-way.\n",
		formatRate(c.PerRegion*float64(c.Regions-1)), shortDuration(c.Period), c.Quota(), shortDuration(2*c.OneWay), shortDuration(c.SyncInterval))
	return err
}

// formatRate writes a number without trailing zeros.
func formatRate(v float64) string { return fmt.Sprint(math.Round(v*1000) / 1000) }

// WriteSVG draws, for each mode, the requests all regions let through in
// the trailing window of one Period over time, over the requests offered
// and the limit, like Run.WriteSVG. The output depends only on the run and
// opts.
func (r *RegionsRun) WriteSVG(w io.Writer, opts SVGOptions) error {
	c := r.Config
	var panels []chartPanel
	for _, res := range r.Results {
		panels = append(panels, chartPanel{
			name: string(res.Mode),
			stats: fmt.Sprintf("up to %.2f× the limit per %s, %.0f%% crossing, p99 +%s",
				res.MaxRatio, shortDuration(c.Period), 100*res.CrossShare, shortDuration(res.LatencyP99)),
			note:   regionNotes[res.Mode],
			passed: res.Admitted,
		})
	}
	return writeChart(w, chartSpec{
		opts: opts,
		subtitle: fmt.Sprintf("%d regions, %s requests/s each on one key, limit %d per %s (%s); one-way %s, sync every %s, hybrid at %s of the limit.",
			c.Regions, formatRate(c.PerRegion), c.Rate, shortDuration(c.Period), c.Algorithm, shortDuration(c.OneWay), shortDuration(c.SyncInterval), formatRate(c.HybridThreshold)),
		period: c.Period, rate: c.Rate, duration: c.Duration,
		offered: r.Arrivals,
		panels:  panels,
	})
}

// regionNotes say in a line how each mode decides.
var regionNotes = map[region.Mode]string{
	region.ModeLocal:  "each region on its own count",
	region.ModeStrict: "every decision on the home region's count",
	region.ModeAsync:  "own count + the others' as last shipped",
	region.ModeHybrid: "async, strict from the threshold on",
}
