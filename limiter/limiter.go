package limiter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// FailPolicy says what a Limiter decides when its store fails.
type FailPolicy string

const (
	FailOpen   FailPolicy = "open"   // let through: a store outage is no API outage
	FailClosed FailPolicy = "closed" // refuse
	FailLocal  FailPolicy = "local"  // each instance enforces its share (LocalFallback)
)

// ParseFailPolicy returns the FailPolicy named s ("open", "closed", "local").
func ParseFailPolicy(s string) (FailPolicy, error) {
	switch p := FailPolicy(s); p {
	case FailOpen, FailClosed, FailLocal:
		return p, nil
	}
	return "", fmt.Errorf("unknown fail policy %q (want open, closed or local)", s)
}

// DefaultTimeout is the default deadline of one store call.
const DefaultTimeout = 100 * time.Millisecond

// Config configures a Limiter; optional fields' zero values are defaults.
type Config struct {
	Limit      Limit         // required
	Store      Store         // required
	FailPolicy FailPolicy    // when Store fails; default FailOpen
	Timeout    time.Duration // bounds each store call; default DefaultTimeout, < 0: none
	Observer   Observer      // told of every store call
	Local      Store         // FailLocal's store without a Guard; default a MemoryStore
	Breaker    BreakerConfig // without a Guard
	// Guard is shared by the Limiters on one store; Breaker and Local are then ignored.
	Guard *Guard
	// Hold is how long a Reserve's reservation stays open; default DefaultHold.
	Hold time.Duration
	// OnExpiry settles a reservation never committed; default ExpireCharge.
	OnExpiry ExpiryPolicy
}

// Limiter enforces one Limit on a Store. It is safe for concurrent use.
type Limiter struct {
	lim         Limit
	quota       int64
	failPolicy  FailPolicy
	storeName   string
	store       boundStore
	inspects    bool          // the store is an Inspector
	timeout     time.Duration // 0: only ctx bounds a call
	observer    Observer
	breaker     *CircuitBreaker
	guard       *Guard // with sharded, for a breaker per shard
	sharded     ShardedStore
	local       *LocalFallback // nil unless FailLocal
	log         *failureLog
	failedShard ShardedStore   // names the failed shard in the log
	mem         *memoryBinding // called directly when nothing else happens around a call
	resv        reserveBinding // nil when the store cannot hold reservations
	hold        time.Duration
	onExpiry    ExpiryPolicy
	count       counterFunc // nil when the store keeps no count of reservations
}

// New validates cfg and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Store == nil {
		return nil, errors.New("limiter: Store is required")
	}
	if err := cfg.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("limiter: limit: %w", err)
	}
	var err error
	if cfg.FailPolicy, cfg.Timeout, err = engineDefaults(cfg.FailPolicy, cfg.Timeout); err != nil {
		return nil, err
	}
	if cfg.Hold < 0 {
		return nil, fmt.Errorf("limiter: hold: must be >= 0, got %s", cfg.Hold)
	}
	if cfg.Hold == 0 {
		cfg.Hold = DefaultHold
	}
	if cfg.OnExpiry > ExpireRefund {
		return nil, fmt.Errorf("limiter: on_expiry: unknown policy %d", cfg.OnExpiry)
	}
	_, inspects := cfg.Store.(Inspector)
	l := &Limiter{
		lim:        cfg.Limit,
		quota:      cfg.Limit.Quota(),
		failPolicy: cfg.FailPolicy,
		storeName:  cfg.Store.Name(),
		store:      bind(cfg.Store, cfg.Limit),
		inspects:   inspects,
		timeout:    max(cfg.Timeout, 0),
		observer:   cfg.Observer,
		hold:       cfg.Hold,
		onExpiry:   cfg.OnExpiry,
	}
	l.resv = bindReserver(cfg.Store, l.store, cfg.Limit)
	l.count = bindCounter(cfg.Store, l.store, cfg.Limit)
	if cfg.Guard != nil {
		l.breaker, l.local, l.log = cfg.Guard.breaker, cfg.Guard.local, cfg.Guard.log
		if sh, ok := cfg.Store.(ShardedStore); ok {
			l.failedShard = sh
			if l.breaker != nil {
				l.guard, l.sharded = cfg.Guard, sh
				cfg.Guard.useStore(sh)
			}
		}
	} else {
		l.breaker = NewCircuitBreaker(cfg.Breaker)
		if cfg.FailPolicy == FailLocal {
			l.local = NewLocalFallback(LocalConfig{Store: cfg.Local})
		}
	}
	if cfg.FailPolicy != FailLocal {
		l.local = nil
	}
	if m, ok := l.store.(*memoryBinding); ok && l.breaker == nil && l.sharded == nil && l.observer == nil && l.local == nil {
		l.mem = m
	}
	return l, nil
}

func engineDefaults(fp FailPolicy, timeout time.Duration) (FailPolicy, time.Duration, error) {
	if fp == "" {
		fp = FailOpen
	}
	if _, err := ParseFailPolicy(string(fp)); err != nil {
		return "", 0, fmt.Errorf("limiter: %w", err)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return fp, timeout, nil
}

// Limit returns the limit enforced.
func (l *Limiter) Limit() Limit { return l.lim }

// Allow is AllowN with a cost of 1.
func (l *Limiter) Allow(ctx context.Context, key string) (d Decision, err error) {
	if l.mem != nil { // a cost of 1 is always within the quota
		l.mem.consume(&d, key, 1)
		return d, nil
	}
	return l.decide(ctx, key, 1, ModeConsume)
}

// AllowN decides whether cost units for key may pass now.
//
// A cost below 1 or above the quota is refused with ErrInvalidCost or
// ErrCostExceedsLimit. When the store fails, the Decision is the policy's and
// the error is returned beside it: follow the Decision, count the error. A
// cancelled ctx refuses with FailureCanceled, no store failure.
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (d Decision, err error) {
	if l.mem != nil && cost >= 1 && cost <= l.quota {
		l.mem.consume(&d, key, cost)
		return d, nil
	}
	return l.decide(ctx, key, cost, ModeConsume)
}

func (l *Limiter) breakerFor(key string) *CircuitBreaker {
	if l.sharded != nil {
		return l.guard.breakerFor(l.sharded.Shard(key))
	}
	return l.breaker
}

func (l *Limiter) shardOf(key string) string {
	if l.failedShard != nil {
		return l.failedShard.Shard(key)
	}
	return ""
}

// decide is the one path of AllowN, PeekN and AllowAtMost.
func (l *Limiter) decide(ctx context.Context, key string, cost int64, mode Mode) (Decision, error) {
	if cost < 1 || cost > l.quota {
		return Decision{Limit: l.quota}, l.lim.CheckCost(cost)
	}
	if l.mem != nil {
		return l.mem.decide(ctx, key, cost, mode, 0)
	}
	if mode != ModeConsume && !l.inspects {
		return Decision{Limit: l.quota}, fmt.Errorf("%s store: %w", l.storeName, ErrNotSupported)
	}
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		return l.fail(ctx, key, cost, mode, ErrCircuitOpen)
	}
	var start time.Time
	if l.observer != nil {
		start = time.Now()
	}
	var d Decision
	var err error
	if ib, ok := l.store.(inspectorBinding); ok {
		// Straight to the store, not through the binding: one hop fewer per request.
		d, err = ib.store.DecideMode(ctx, key, ib.limit, cost, mode, l.timeout)
	} else {
		d, err = l.store.decide(ctx, key, cost, mode, l.timeout)
	}
	if err != nil {
		return l.storeFailed(ctx, key, cost, mode, breaker, start, err)
	}
	if l.observer != nil {
		l.observer.ObserveStore(ctx, string(l.lim.Algorithm), time.Since(start), nil)
	}
	if breaker != nil {
		breaker.record(true)
	}
	if mode == ModeConsume && d.Allowed {
		d.Admitted = cost // AllowN takes all or nothing, whatever the store says
	}
	if l.local != nil {
		d = l.local.afterStore(ctx, key, l.lim, mode, d)
	}
	return d, nil
}

func (l *Limiter) storeFailed(ctx context.Context, key string, cost int64, mode Mode, breaker *CircuitBreaker, start time.Time, err error) (Decision, error) {
	if !l.settle(ctx, breaker, start, err) {
		return Decision{Limit: l.quota, Failure: FailureCanceled},
			fmt.Errorf("%s store: %w", l.storeName, context.Canceled)
	}
	return l.fail(ctx, key, cost, mode, fmt.Errorf("%s store: %w", l.storeName, err))
}

// settle tells the Observer and the breaker how a call ended; false when the caller cancelled it.
func (l *Limiter) settle(ctx context.Context, breaker *CircuitBreaker, start time.Time, err error) bool {
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		if breaker != nil {
			breaker.release()
		}
		return false
	}
	if l.observer != nil {
		l.observer.ObserveStore(ctx, string(l.lim.Algorithm), time.Since(start), err)
	}
	if breaker != nil {
		breaker.record(err == nil)
	}
	return true
}

func (l *Limiter) fail(ctx context.Context, key string, cost int64, mode Mode, err error) (Decision, error) {
	if l.log != nil {
		l.log.failed(ctx, ErrorKind(err), l.shardOf(key), err)
	}
	switch l.failPolicy {
	case FailClosed:
		return Decision{Limit: l.quota, RetryAfter: time.Second, Failure: FailureClosed}, err
	case FailLocal:
		d, lerr := l.local.decide(ctx, key, l.lim, cost, mode)
		if lerr == nil {
			d.Failure = FailureLocal
			return d, err
		}
	}
	d := Decision{Allowed: true, Limit: l.quota, Remaining: l.quota, Admitted: cost, Failure: FailureOpen}
	if mode == ModePeek {
		d.Admitted = 0
	}
	return d, err
}

// ErrCircuitOpen is returned, wrapped, when the breaker skipped the store.
var ErrCircuitOpen = errors.New("circuit breaker open: store not called")

// ErrorKind classifies a store error by root cause, for metrics:
// "circuit_open", "error" for a refused, reset or broken connection (even
// past a deadline), "canceled", "timeout", else "error"; "" for nil.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, ErrCircuitOpen) {
		return "circuit_open"
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return "error"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return "timeout"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "error"
}
