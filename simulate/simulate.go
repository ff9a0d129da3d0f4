// Package simulate replays a traffic pattern against each of the six
// rate-limiting algorithms with the same limit, in simulated time, and
// reports what each admitted: counts, the busiest window, memory per key,
// and an SVG chart. It drives the real limiter on its memory store with an
// injected clock, so a simulation of hours runs in milliseconds and always
// gives the same numbers.
//
// It backs `rl-exporter simulate`, whose purpose is choosing an algorithm,
// and `rl-exporter simulate --regions N` ([SimulateRegions]), which plays
// one key's traffic from N regions against the region modes (local,
// strict, async, hybrid) to choose a mode.
//
// # What the numbers mean
//
// For a limit of R requests per period P and a bucket size B (Burst, R by
// default), the most requests an algorithm lets through in any span of P —
// the table's "max in any P" — is at most:
//
//   - fixed_window: 2R. R at the end of one window and R at the start of the
//     next; boundary-burst shows exactly that (2.00×).
//   - sliding_log: R, exactly; it pays with one stored timestamp per
//     admitted request.
//   - sliding_window: about 2R in the worst case, when the previous window's
//     traffic all came at its end (it assumes that traffic was spread
//     evenly); R when traffic does not cross windows. Against boundary-burst
//     it stays close to R, since the previous window still weighs almost its
//     whole count just after the boundary.
//   - token_bucket and gcra: B + R — a full bucket at the start of the span
//     plus R refilled during it. In a shorter span s, B + R·s/P: against
//     boundary-burst (a span of 3P/60) that is B + 3R/60, 1.05× with B = R.
//     The two decide identically.
//   - leaky_bucket: it admits like token_bucket but holds each admitted
//     request for its Delay, so requests reach the service at most one per
//     P/R: never more than R in a span of P, counted when they pass (the
//     table's "max delay" is the longest hold).
package simulate

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Config describes one simulation: a plain value. Arrivals is required; Rate
// and Period describe the limit every algorithm enforces.
type Config struct {
	// Rate requests are allowed per Period (for the bucket algorithms: the
	// refill or drain rate). Required.
	Rate   int64
	Period time.Duration
	// Burst is the bucket size of token_bucket, leaky_bucket and gcra.
	// Zero means Rate, which makes every algorithm's quota the same.
	Burst int64
	// Arrivals are the request times, as offsets from the start, in
	// ascending order; each request costs 1.
	Arrivals []time.Duration
	// Duration is the simulated span (the chart's time axis). Default: the
	// last arrival plus one Period.
	Duration time.Duration
}

// Result is how one algorithm fared: a plain value.
type Result struct {
	// Algorithm is the algorithm simulated.
	Algorithm limiter.Algorithm
	// Allowed and Rejected count the decisions.
	Allowed, Rejected int
	// Passed are the times admitted requests reach the protected service:
	// the decision time, plus the Delay for leaky_bucket, which holds
	// admitted requests and lets them through at its drain rate. Ascending.
	Passed []time.Duration
	// MaxInWindow is the largest number of Passed times in any half-open
	// span of one Period; MaxRatio is MaxInWindow / Rate.
	MaxInWindow int
	MaxRatio    float64
	// MaxDelay is the longest Delay of an admitted request (leaky_bucket only).
	MaxDelay time.Duration
	// MemoryBytes estimates the memory store's state for the simulated key
	// at its largest (see MemoryPerKey).
	MemoryBytes int64
}

// Run is a finished simulation. It is not modified after Simulate returns;
// its methods only read it and are safe for concurrent use.
type Run struct {
	// Config is the simulation's configuration, defaults filled in.
	Config Config
	// Results holds one Result per algorithm, in limiter.AllAlgorithms order.
	Results []Result
}

// key is the one client every request comes from.
const key = "client"

// start is the simulated clock's origin: 2026-01-01T00:00:00Z rounded down
// to a multiple of the period since the Unix epoch, so that with aligned
// windows the first window starts at offset 0 and boundary-burst's
// boundary falls exactly at one Period.
func start(period time.Duration) time.Time {
	const origin = 1767225600 * int64(time.Second/time.Microsecond) // 2026-01-01 in µs
	p := int64(period / time.Microsecond)
	return time.UnixMicro(origin - origin%p)
}

// Simulate runs cfg against every algorithm. Each algorithm gets a fresh
// memory store whose clock is set to each arrival in turn; windows are
// aligned to multiples of Period since the Unix epoch. It returns an error
// naming the field when the limit is invalid. It shares nothing between
// calls and is safe for concurrent use.
func Simulate(cfg Config) (*Run, error) {
	if len(cfg.Arrivals) == 0 {
		return nil, fmt.Errorf("simulate: no arrivals")
	}
	if !slices.IsSorted(cfg.Arrivals) || cfg.Arrivals[0] < 0 {
		return nil, fmt.Errorf("simulate: arrivals must be ascending offsets >= 0")
	}
	if cfg.Duration <= 0 {
		cfg.Duration = cfg.Arrivals[len(cfg.Arrivals)-1] + cfg.Period
	}
	if err := (limiter.Limit{Algorithm: limiter.TokenBucket, Rate: cfg.Rate, Period: cfg.Period, Burst: cfg.Burst}).Validate(); err != nil {
		return nil, fmt.Errorf("simulate: limit: %w", err)
	}
	if cfg.Period%time.Microsecond != 0 {
		return nil, fmt.Errorf("simulate: limit: period: %s is not a whole number of microseconds", cfg.Period)
	}
	run := &Run{Config: cfg}
	for _, alg := range limiter.AllAlgorithms() {
		res, err := simulateOne(cfg, alg)
		if err != nil {
			return nil, err
		}
		run.Results = append(run.Results, res)
	}
	return run, nil
}

func simulateOne(cfg Config, alg limiter.Algorithm) (Result, error) {
	origin := start(cfg.Period)
	now := origin
	lim := limiter.Limit{Algorithm: alg, Rate: cfg.Rate, Period: cfg.Period, Burst: cfg.Burst, AlignWindows: true}
	l, err := limiter.New(limiter.Config{
		Limit: lim,
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return now }}),
	})
	if err != nil {
		return Result{}, fmt.Errorf("simulate %s: %w", alg, err)
	}
	res := Result{Algorithm: alg}
	var log logSize // sliding_log's state, mirrored to estimate its memory
	ctx := context.Background()
	for _, at := range cfg.Arrivals {
		// The stores count in whole microseconds; so does the simulation,
		// or a Delay would be added to a time the store never saw.
		at = at.Truncate(time.Microsecond)
		now = origin.Add(at)
		d, err := l.Allow(ctx, key)
		if err != nil {
			return Result{}, fmt.Errorf("simulate %s at %s: %w", alg, at, err)
		}
		if !d.Allowed {
			res.Rejected++
			continue
		}
		res.Allowed++
		res.Passed = append(res.Passed, at+d.Delay)
		res.MaxDelay = max(res.MaxDelay, d.Delay)
		if alg == limiter.SlidingLog {
			log.admit(at, cfg.Period, cfg.Rate)
		}
	}
	// Delays can reorder nothing (a leaky bucket is a FIFO queue), but sort
	// anyway so that MaxInWindow does not depend on it.
	slices.Sort(res.Passed)
	res.MaxInWindow = busiestWindow(res.Passed, cfg.Period)
	res.MaxRatio = float64(res.MaxInWindow) / float64(cfg.Rate)
	res.MemoryBytes = MemoryPerKey(alg, len(key), log.capacity)
	return res, nil
}

// busiestWindow is the largest number of times in any half-open span
// [t, t+window); times are ascending.
func busiestWindow(times []time.Duration, window time.Duration) int {
	most, j := 0, 0
	for i := range times {
		for j < len(times) && times[j] < times[i]+window {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// WriteTable writes the results as an aligned text table.
func (r *Run) WriteTable(w io.Writer) error {
	c := r.Config
	burst := c.Burst
	if burst == 0 {
		burst = c.Rate
	}
	if _, err := fmt.Fprintf(w, "limit %d per %s (bucket size %d), %d requests over %s\n\n",
		c.Rate, shortDuration(c.Period), burst, len(c.Arrivals), shortDuration(c.Duration)); err != nil {
		return err
	}
	// Names are padded to one width, so right alignment leaves them left-aligned.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-14s\tallowed\trejected\tmax in any %s\t× limit\tmax delay\tmemory/key\t\n", "algorithm", shortDuration(c.Period))
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%-14s\t%d\t%d\t%d\t%.2f\t%s\t%d B\t\n",
			res.Algorithm, res.Allowed, res.Rejected, res.MaxInWindow, res.MaxRatio, res.MaxDelay.Round(time.Millisecond), res.MemoryBytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n× limit: the most requests let through in any span of %s, divided by the limit %d.\n"+
		"leaky_bucket lets requests through after their delay; that is the time counted.\n"+
		"memory/key: the memory store's state for one key at its largest (an estimate, see simulate.MemoryPerKey).\n",
		shortDuration(c.Period), c.Rate)
	return err
}

// Result returns the result of algorithm a, or false.
func (r *Run) Result(a limiter.Algorithm) (Result, bool) {
	for _, res := range r.Results {
		if res.Algorithm == a {
			return res, true
		}
	}
	return Result{}, false
}
