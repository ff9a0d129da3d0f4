// Package overload protects an upstream from more concurrent requests than it
// serves within its latency objective: an adaptive concurrency limit that
// follows the measured latency (a gradient controller in the spirit of Netflix
// concurrency-limits' Gradient2), and an admission by priority that sheds the
// lowest priority first and keeps a share of the limit for critical requests.
// It knows nothing of HTTP: the caller acquires before forwarding a request and
// reports when the response is over.
package overload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Defaults of Config. The gradient's come from Gradient2 (smoothing, queue
// size, long window, tolerance); the window from Envoy's adaptive concurrency
// filter, whose limit is recalculated every 100 ms.
const (
	DefaultMinLimit     = 20
	DefaultMaxLimit     = 1000
	DefaultInitialLimit = 20
	DefaultTolerance    = 1.5
	DefaultSmoothing    = 0.2
	DefaultQueueSize    = 4
	DefaultLongWindow   = 600
	DefaultWindow       = 100 * time.Millisecond
	DefaultMinSamples   = 10
	DefaultQuantile     = 0.99
	DefaultHeadroom     = 0.8
	DefaultReserve      = 0.2
	// DefaultCriticalWait lets a critical request ride out a stall of a
	// tenth of a second instead of being shed.
	DefaultCriticalWait = 100 * time.Millisecond
)

// warmupWindows are averaged plainly into the baseline before it becomes a
// moving average, as Gradient2's ExpAvgMeasurement warms up.
const warmupWindows = 10

// Config configures a Controller; a zero field takes its Default. It is a
// plain value. The koanf tags name its keys in a config file's
// server.overload block, which holds it as it is.
type Config struct {
	// Target is the latency objective on the Quantile of each window's
	// responses (the SLO's p99 threshold); zero: the baseline alone bounds
	// the limit.
	Target   time.Duration `koanf:"target"`
	Quantile float64       `koanf:"quantile"`
	// Headroom is the share of Target above which the limit shrinks, so that
	// the overshoot before a decrease takes effect stays under Target.
	Headroom float64 `koanf:"headroom"`
	// MinLimit, MaxLimit bound the limit; InitialLimit is where it starts.
	MinLimit     int `koanf:"min_limit"`
	MaxLimit     int `koanf:"max_limit"`
	InitialLimit int `koanf:"initial_limit"`
	// Tolerance is how far a window's mean latency may exceed the baseline
	// (the long-window average) before the limit shrinks.
	Tolerance float64 `koanf:"tolerance"`
	// Smoothing is the weight of each window's new estimate in the limit.
	Smoothing float64 `koanf:"smoothing"`
	// QueueSize is what the limit grows by in a window within both bounds.
	QueueSize int `koanf:"queue_size"`
	// LongWindow is the number of windows the baseline averages over.
	LongWindow int `koanf:"long_window"`
	// Window is the least time between two updates of the limit, and
	// MinSamples the least number of responses one is made from.
	Window     time.Duration `koanf:"window"`
	MinSamples int           `koanf:"min_samples"`
	// Reserve is the share of the limit each priority keeps from the ones
	// below it: critical is admitted up to the limit, default up to
	// limit·(1−Reserve), sheddable up to limit·(1−Reserve)².
	Reserve float64 `koanf:"critical_reserve"`
	// CriticalWait is how long a critical request that finds the whole limit
	// in use waits for a slot (AcquireWait), in arrival order, before it is
	// shed; at most Limit of them wait. Default DefaultCriticalWait; negative: none.
	CriticalWait time.Duration `koanf:"critical_wait"`
	// Now is the clock; default time.Now.
	Now func() time.Time `koanf:"-"`
}

// Defaults returns the Config a zero Config is filled into: every field
// that has a default set to it; Target none and Now nil (time.Now). A
// caller that shows the defaults (rl-exporter check --print-defaults)
// starts from it. Each call returns a fresh value.
func Defaults() Config {
	return Config{
		Quantile: DefaultQuantile, Headroom: DefaultHeadroom,
		MinLimit: DefaultMinLimit, MaxLimit: DefaultMaxLimit, InitialLimit: DefaultInitialLimit,
		Tolerance: DefaultTolerance, Smoothing: DefaultSmoothing, QueueSize: DefaultQueueSize,
		LongWindow: DefaultLongWindow, Window: DefaultWindow, MinSamples: DefaultMinSamples,
		Reserve: DefaultReserve, CriticalWait: DefaultCriticalWait,
	}
}

func (cfg *Config) fill() error {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.Quantile, DefaultQuantile)
	def(&cfg.Headroom, DefaultHeadroom)
	def(&cfg.Tolerance, DefaultTolerance)
	def(&cfg.Smoothing, DefaultSmoothing)
	def(&cfg.Reserve, DefaultReserve)
	defInt(&cfg.MinLimit, DefaultMinLimit)
	defInt(&cfg.MaxLimit, DefaultMaxLimit)
	defInt(&cfg.InitialLimit, min(max(DefaultInitialLimit, cfg.MinLimit), cfg.MaxLimit))
	defInt(&cfg.QueueSize, DefaultQueueSize)
	defInt(&cfg.LongWindow, DefaultLongWindow)
	defInt(&cfg.MinSamples, DefaultMinSamples)
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.CriticalWait == 0 {
		cfg.CriticalWait = DefaultCriticalWait
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg.Validate()
}

// Validate reports the first field out of its range as a
// *limiter.FieldError naming its config key.
func (cfg Config) Validate() error {
	switch {
	case cfg.Target < 0:
		return &limiter.FieldError{Field: "target", Err: errors.New("must not be negative")}
	case cfg.Quantile <= 0 || cfg.Quantile >= 1:
		return &limiter.FieldError{Field: "quantile", Err: errors.New("must be strictly between 0 and 1")}
	case cfg.Headroom <= 0 || cfg.Headroom > 1:
		return &limiter.FieldError{Field: "headroom", Err: errors.New("must be in (0, 1]")}
	case cfg.MinLimit < 1:
		return &limiter.FieldError{Field: "min_limit", Err: errors.New("must be at least 1")}
	case cfg.MaxLimit < cfg.MinLimit:
		return &limiter.FieldError{Field: "max_limit", Err: fmt.Errorf("%d is below min_limit %d", cfg.MaxLimit, cfg.MinLimit)}
	case cfg.InitialLimit < cfg.MinLimit || cfg.InitialLimit > cfg.MaxLimit:
		return &limiter.FieldError{Field: "initial_limit", Err: fmt.Errorf("%d is outside [min_limit %d, max_limit %d]", cfg.InitialLimit, cfg.MinLimit, cfg.MaxLimit)}
	case cfg.Tolerance < 1:
		return &limiter.FieldError{Field: "tolerance", Err: errors.New("must be at least 1")}
	case cfg.Smoothing <= 0 || cfg.Smoothing > 1:
		return &limiter.FieldError{Field: "smoothing", Err: errors.New("must be in (0, 1]")}
	case cfg.QueueSize < 0:
		return &limiter.FieldError{Field: "queue_size", Err: errors.New("must not be negative")}
	case cfg.LongWindow < 1:
		return &limiter.FieldError{Field: "long_window", Err: errors.New("must be at least 1")}
	case cfg.Window < 0:
		return &limiter.FieldError{Field: "window", Err: errors.New("must not be negative")}
	case cfg.MinSamples < 1:
		return &limiter.FieldError{Field: "min_samples", Err: errors.New("must be at least 1")}
	case cfg.Reserve < 0 || cfg.Reserve >= 1:
		return &limiter.FieldError{Field: "critical_reserve", Err: errors.New("must be in [0, 1)")}
	case cfg.CriticalWait > time.Minute:
		return &limiter.FieldError{Field: "critical_wait", Err: errors.New("must be at most 1m")}
	}
	return nil
}

// Controller is one upstream's adaptive concurrency limit and priority
// admission. It is safe for concurrent use.
type Controller struct {
	cfg Config

	mu          sync.Mutex
	limit       float64
	inFlight    int
	windowStart time.Time
	samples     []time.Duration // this window's latencies
	failed      int             // this window's failed responses
	peak        int             // this window's highest in-flight
	baseline    float64         // nanoseconds; 0 until the first window
	windows     int
	last        Stats
	waiters     []*waiter // critical requests waiting for a slot, oldest first
}

// waiter is a critical request waiting for a slot; granted under mu.
type waiter struct {
	ready   chan struct{}
	granted bool
	start   time.Time
}

// New returns a Controller at cfg.InitialLimit; errors name the field at fault.
func New(cfg Config) (*Controller, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, limit: float64(cfg.InitialLimit), windowStart: cfg.Now()}
	c.last = Stats{Limit: cfg.InitialLimit}
	return c, nil
}

// Config returns the controller's settings, defaults filled in.
func (c *Controller) Config() Config { return c.cfg }

// Ticket is one admitted request; call Done exactly once when its response is over.
type Ticket struct {
	c     *Controller
	start time.Time
}

// threshold is how many requests may be in flight when one of priority p is admitted.
func (c *Controller) threshold(p Priority) float64 {
	switch p {
	case Critical:
		return c.limit
	case Default:
		return c.limit * (1 - c.cfg.Reserve)
	}
	return c.limit * (1 - c.cfg.Reserve) * (1 - c.cfg.Reserve)
}

// Acquire admits a request of priority p, or sheds it and says why.
func (c *Controller) Acquire(p Priority) (Ticket, Reason, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The floor keeps at least one slot for every priority at the smallest limits.
	if n := float64(c.inFlight); n >= max(math.Floor(c.threshold(p)), 1) {
		if n >= math.Floor(c.limit) {
			return Ticket{}, ReasonLimit, false
		}
		return Ticket{}, ReasonReserved, false
	}
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	return Ticket{c: c, start: c.cfg.Now()}, "", true
}

// AcquireWait is Acquire, except that a critical request finding the whole
// limit in use waits up to Config.CriticalWait (or until ctx ends) for a slot.
func (c *Controller) AcquireWait(ctx context.Context, p Priority) (Ticket, Reason, bool) {
	t, reason, ok := c.Acquire(p)
	if ok || p != Critical || reason != ReasonLimit || c.cfg.CriticalWait < 0 {
		return t, reason, ok
	}
	c.mu.Lock()
	if len(c.waiters) >= max(int(c.limit), 1) {
		c.mu.Unlock()
		return Ticket{}, ReasonLimit, false
	}
	w := &waiter{ready: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	timer := time.NewTimer(c.cfg.CriticalWait)
	defer timer.Stop()
	select {
	case <-w.ready:
	case <-timer.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.granted {
		return Ticket{c: c, start: w.start}, "", true
	}
	for i, o := range c.waiters {
		if o == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			break
		}
	}
	return Ticket{}, ReasonLimit, false
}

// grant hands the slots free under the limit to the oldest waiters.
func (c *Controller) grant(now time.Time) {
	for len(c.waiters) > 0 && float64(c.inFlight) < math.Floor(c.limit) {
		w := c.waiters[0]
		c.waiters = c.waiters[1:]
		c.inFlight++
		c.peak = max(c.peak, c.inFlight)
		w.granted, w.start = true, now
		close(w.ready)
	}
}

// Done ends the request: its latency (from Acquire) and whether it failed
// (an upstream error or a 5xx) are a sample of the current window.
func (t Ticket) Done(failed bool) {
	c := t.c
	if c == nil {
		return
	}
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	c.samples = append(c.samples, now.Sub(t.start))
	if failed {
		c.failed++
	}
	if len(c.samples) >= c.cfg.MinSamples && now.Sub(c.windowStart) >= c.cfg.Window {
		c.update(now)
	}
	c.grant(now)
}

// update closes the window: the limit moves by the gradient of the window's
// latency against the baseline and against the target.
func (c *Controller) update(now time.Time) {
	slices.Sort(c.samples)
	var sum time.Duration
	for _, s := range c.samples {
		sum += s
	}
	short := max(float64(sum)/float64(len(c.samples)), 1)
	q := float64(c.samples[min(len(c.samples)-1, int(math.Ceil(c.cfg.Quantile*float64(len(c.samples))))-1)])
	c.windows++
	if c.windows <= warmupWindows {
		c.baseline += (short - c.baseline) / float64(c.windows)
	} else {
		c.baseline += (short - c.baseline) * 2 / float64(c.cfg.LongWindow+1)
	}
	// After a long overload the baseline lags far above the latency back to
	// normal; Gradient2 decays it rather than wait out the average.
	if c.baseline/short > 2 {
		c.baseline *= 0.9
	}
	gradient := min(max(c.cfg.Tolerance*c.baseline/short, 0.5), 1)
	if c.cfg.Target > 0 {
		gradient = min(gradient, max(c.cfg.Headroom*float64(c.cfg.Target)/max(q, 1), 0.5))
	}
	// A window where a tenth of the responses failed backs off as AIMD does.
	if c.failed*10 >= len(c.samples) {
		gradient = min(gradient, 0.9)
	}
	next := c.limit * gradient
	// Unlike Gradient2, the queue allowance is added only within both bounds,
	// so that the limit settles under the target instead of just above it;
	// and not while the upstream is given less than half the limit.
	if gradient >= 1 {
		if c.peak < int(c.limit/2) {
			next = c.limit
		} else {
			next += float64(c.cfg.QueueSize)
		}
	}
	next = c.limit*(1-c.cfg.Smoothing) + next*c.cfg.Smoothing
	c.limit = min(max(next, float64(c.cfg.MinLimit)), float64(c.cfg.MaxLimit))
	c.last = Stats{Limit: int(c.limit), Baseline: time.Duration(c.baseline), Mean: time.Duration(short), Quantile: time.Duration(q),
		Samples: len(c.samples), Failed: c.failed}
	c.samples = c.samples[:0]
	c.failed = 0
	c.peak = c.inFlight
	c.windowStart = now
}

// Stats is the controller's state as of the last window.
type Stats struct {
	Limit    int           // the concurrency limit now
	InFlight int           // requests admitted and not yet done
	Waiting  int           // critical requests waiting for a slot
	Baseline time.Duration // the long-window average latency
	Mean     time.Duration // the last window's mean latency
	Quantile time.Duration // the last window's Config.Quantile of latency
	Samples  int           // responses in the last window
	Failed   int           // failed responses in the last window
}

// Stats returns the state now.
func (c *Controller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.last
	s.Limit, s.InFlight, s.Waiting = int(c.limit), c.inFlight, len(c.waiters)
	return s
}

// Limit returns the concurrency limit now.
func (c *Controller) Limit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.limit)
}

// InFlight returns the requests admitted and not yet done.
func (c *Controller) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}
