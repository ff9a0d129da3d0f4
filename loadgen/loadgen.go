// Package loadgen drives a rate limiter with concurrent callers and measures
// what it sees: decisions per second, how many were allowed, rejected or
// failed, and the latency distribution.
//
// It knows nothing of the limiter or its store: a run calls a DecideFunc, so
// the same engine measures rl-exporter's limiter on any store and, in the
// comparison module, other limiters too. Keys are chosen uniformly or with a
// Zipf skew (a few hot keys), latencies go to fixed-size histograms (one per
// caller, merged at the end), and nothing is allocated per decision by the
// engine itself. The engine reads the clock once per decision (a monotonic
// offset from the start of the run), so that it costs little beside an
// in-process limiter whose decision takes a hundred nanoseconds.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DecideFunc makes one decision for key. It returns whether the request was
// allowed; a non-nil error counts the decision as an error, neither allowed
// nor rejected. It is called from many goroutines at once and must be safe
// for concurrent use.
type DecideFunc func(ctx context.Context, key string) (allowed bool, err error)

// Config describes one run. The zero value of every optional field is a
// usable default.
type Config struct {
	// Duration is how long callers keep starting decisions. Required (> 0).
	Duration time.Duration
	// Concurrency is the number of callers, each making one decision at a
	// time. Default 1.
	Concurrency int
	// Keys is the number of distinct keys. Default 1.
	Keys int
	// Zipf skews key choice: 0 picks keys uniformly; a value s > 1 picks key
	// i with a probability proportional to 1/(1+i)^s, so low-numbered keys
	// are hot (1.1 is mildly skewed, 2 very).
	Zipf float64
	// KeyPrefix is put before each key's number. Default "bench:".
	KeyPrefix string
	// Seed makes the key sequence reproducible; 0 picks a random seed.
	Seed uint64
	// Progress, when set, is called about every ProgressInterval from a
	// goroutine of its own with the time elapsed and the decisions made so
	// far, and once more when the run ends.
	Progress func(elapsed time.Duration, decisions uint64)
	// ProgressInterval defaults to 200ms.
	ProgressInterval time.Duration
}

// maxPrebuiltKeys bounds the keys built before a run; above it, each
// decision formats its key (one small allocation).
const maxPrebuiltKeys = 1 << 20

// MaxKeys is the largest accepted Config.Keys.
const MaxKeys = math.MaxInt32

func (c *Config) defaults() error {
	if c.Duration <= 0 {
		return fmt.Errorf("duration: must be > 0, got %s", c.Duration)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("concurrency: must be >= 1, got %d", c.Concurrency)
	}
	if c.Keys == 0 {
		c.Keys = 1
	}
	if c.Keys < 0 || c.Keys > MaxKeys {
		return fmt.Errorf("keys: must be between 1 and %d, got %d", int64(MaxKeys), c.Keys)
	}
	if c.Zipf != 0 && !(c.Zipf > 1) {
		return fmt.Errorf("zipf: must be 0 (uniform) or greater than 1, got %g", c.Zipf)
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "bench:"
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 200 * time.Millisecond
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return nil
}

// Result is what a run measured. It is a plain value once returned.
type Result struct {
	// Elapsed is the time from the first decision started to the last one
	// finished.
	Elapsed time.Duration
	// Decisions is the number of decisions made: Allowed+Rejected+Errors.
	Decisions uint64
	// Allowed counts decisions that let the request through.
	Allowed uint64
	// Rejected counts decisions that refused the request.
	Rejected uint64
	// Errors counts decisions whose DecideFunc returned an error.
	Errors uint64
	// FirstError is the first error seen, or nil.
	FirstError error
	// Latency holds the duration of every decision, errors included. A
	// caller reads the clock once per decision, so a decision's duration is
	// measured from the end of the caller's previous one and includes the
	// caller's own bookkeeping between the two (choosing the key, recording
	// the sample: about 10 ns).
	Latency *Histogram
}

// DecisionsPerSecond is Decisions divided by Elapsed; 0 for an empty run.
func (r Result) DecisionsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Decisions) / r.Elapsed.Seconds()
}

// caller is one goroutine's state, padded so that callers' hot counters do
// not share a cache line.
type caller struct {
	done     atomic.Uint64
	allowed  uint64
	rejected uint64
	errors   uint64
	firstErr error
	hist     Histogram
	_        [64]byte
}

// Run calls decide from cfg.Concurrency goroutines for cfg.Duration and
// returns what it measured. Decisions in flight when the duration ends are
// waited for and counted. When ctx is cancelled early, Run stops the callers,
// waits for them and returns the partial Result with ctx's error.
func Run(ctx context.Context, cfg Config, decide DecideFunc) (Result, error) {
	if decide == nil {
		return Result{}, errors.New("loadgen: decide function is nil")
	}
	if err := cfg.defaults(); err != nil {
		return Result{}, fmt.Errorf("loadgen: %w", err)
	}
	keys := newKeySpace(cfg)

	callers := make([]caller, cfg.Concurrency)
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for i := range callers {
		wg.Add(1)
		go func(c *caller, seed uint64) {
			defer wg.Done()
			c.run(ctx, decide, keys.picker(seed), start, &stop)
		}(&callers[i], cfg.Seed+uint64(i)*0x9E3779B97F4A7C15)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	count := func() uint64 {
		var n uint64
		for i := range callers {
			n += callers[i].done.Load()
		}
		return n
	}
	ctxErr := waitFor(ctx, cfg, start, count)
	stop.Store(true)
	<-finished
	elapsed := time.Since(start)
	if cfg.Progress != nil {
		cfg.Progress(elapsed, count())
	}
	return merge(callers, elapsed), ctxErr
}

// run decides with one caller's keys until stop is set.
func (c *caller) run(ctx context.Context, decide DecideFunc, pick func() string, start time.Time, stop *atomic.Bool) {
	// One clock read per decision: each reading, as a monotonic offset
	// from start, ends one decision and starts the next.
	last := time.Since(start)
	var n uint64
	for !stop.Load() {
		allowed, err := decide(ctx, pick())
		now := time.Since(start)
		c.hist.Record(now - last)
		last = now
		switch {
		case err != nil:
			c.errors++
			if c.firstErr == nil {
				c.firstErr = err
			}
		case allowed:
			c.allowed++
		default:
			c.rejected++
		}
		// Published every 16 decisions (and at the end): an atomic store
		// per decision costs as much as a fast decision.
		if n++; n%16 == 0 {
			c.done.Store(n)
		}
	}
	c.done.Store(n)
}

// waitFor waits out cfg.Duration, reporting progress, and returns ctx's
// error when ctx ends first.
func waitFor(ctx context.Context, cfg Config, start time.Time, count func() uint64) error {
	timer := time.NewTimer(cfg.Duration)
	defer timer.Stop()
	var tick <-chan time.Time
	if cfg.Progress != nil {
		t := time.NewTicker(cfg.ProgressInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			cfg.Progress(time.Since(start), count())
		}
	}
}

// merge adds up the callers' counts and latencies.
func merge(callers []caller, elapsed time.Duration) Result {
	res := Result{Elapsed: elapsed, Latency: NewHistogram()}
	for i := range callers {
		c := &callers[i]
		res.Allowed += c.allowed
		res.Rejected += c.rejected
		res.Errors += c.errors
		if res.FirstError == nil {
			res.FirstError = c.firstErr
		}
		res.Latency.Merge(&c.hist)
	}
	res.Decisions = res.Allowed + res.Rejected + res.Errors
	return res
}

// keySpace hands out keys by number: prebuilt strings for small key spaces,
// formatted on demand for large ones.
type keySpace struct {
	cfg      Config
	prebuilt []string
}

func newKeySpace(cfg Config) *keySpace {
	ks := &keySpace{cfg: cfg}
	if cfg.Keys <= maxPrebuiltKeys {
		ks.prebuilt = make([]string, cfg.Keys)
		for i := range ks.prebuilt {
			ks.prebuilt[i] = ks.format(uint64(i))
		}
	}
	return ks
}

func (ks *keySpace) format(i uint64) string {
	return ks.cfg.KeyPrefix + strconv.FormatUint(i, 10)
}

// picker returns a function choosing the next key; each goroutine gets its own.
func (ks *keySpace) picker(seed uint64) func() string {
	r := rand.New(rand.NewPCG(seed, seed^0xD1B54A32D192ED03))
	n := uint64(ks.cfg.Keys)
	var next func() uint64
	if ks.cfg.Zipf > 1 {
		z := rand.NewZipf(r, ks.cfg.Zipf, 1, n-1)
		next = z.Uint64
	} else {
		next = func() uint64 { return r.Uint64N(n) }
	}
	if ks.prebuilt != nil {
		return func() string { return ks.prebuilt[next()] }
	}
	return func() string { return ks.format(next()) }
}
