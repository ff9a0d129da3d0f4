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
	// FailOpen lets the request through (the default): an outage of the
	// store must not become an outage of the API.
	FailOpen FailPolicy = "open"
	// FailClosed refuses the request.
	FailClosed FailPolicy = "closed"
	// FailLocal decides with an in-process MemoryStore, so each instance
	// still enforces the limit on its own traffic while the store is down.
	FailLocal FailPolicy = "local"
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

// Config configures a Limiter. The zero value of every optional field is a
// usable default.
type Config struct {
	// Limit is what is enforced. Required.
	Limit Limit
	// Store decides. Required.
	Store Store
	// FailPolicy applies when Store returns an error. Default FailOpen.
	FailPolicy FailPolicy
	// Timeout bounds each store call. Default DefaultTimeout; negative
	// disables. Every store call is given it; a MemoryStore never waits and
	// ignores it.
	Timeout time.Duration
	// Observer, when set, is told the duration and outcome of every store call.
	Observer Observer
	// Local is the store used under FailLocal when Guard is nil. Default: a
	// new MemoryStore.
	Local Store
	// Breaker, when its Threshold is > 0 and Guard is nil, stops calling a
	// failing store for a while (see CircuitBreaker).
	Breaker BreakerConfig
	// Guard, when set, is the circuit breaker, failure log and local
	// fallback shared with the other Limiters on the same store; Breaker
	// and Local are then ignored.
	Guard *Guard
}

// Limiter enforces one Limit on a Store. It is safe for concurrent use; its
// configuration is immutable after New.
//
// Everything that does not change from one decision to the next is settled
// by New: the limit is validated and bound to the store, the deadline of a
// store call worked out, the breaker, fail policy and Observer chosen. A
// decision then checks its cost and takes one path (decide): breaker, the
// store through one interface, Observer, fail policy. One exception: on
// a MemoryStore with none of breaker, Observer and FailLocal, a decision
// calls the store directly, as nothing else would see the call.
type Limiter struct {
	lim        Limit
	quota      int64 // lim.Quota()
	failPolicy FailPolicy
	storeName  string
	// store is Config.Store bound to lim: the way a Limiter calls its
	// store (but for mem below).
	store boundStore
	// inspects: the store can peek, admit at most and reset (it is an
	// Inspector); otherwise those calls return ErrNotSupported.
	inspects bool
	// timeout bounds each store call; 0: only ctx does. Every store is
	// given it; one that never waits (MemoryStore) ignores it.
	timeout  time.Duration
	observer Observer        // nil: none
	breaker  *CircuitBreaker // nil: no breaker
	// guard and sharded are set when the store is a ShardedStore behind a
	// Guard with a breaker: each shard then has a breaker of its own.
	guard   *Guard
	sharded ShardedStore
	local   *LocalFallback // under FailLocal, else nil
	log     *failureLog    // nil: failures are not logged
	// failedShard names the shard of a failed call in the log; nil when
	// the store is not sharded.
	failedShard ShardedStore
	// mem is store when it is a MemoryStore and a decision has nothing
	// else to do (no breaker, Observer or local fallback): decide then
	// calls it directly instead of through the interface. Else nil.
	mem *memoryBinding
}

// New validates cfg and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Store == nil {
		return nil, errors.New("limiter: Store is required")
	}
	if err := cfg.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("limiter: limit: %w", err)
	}
	if cfg.FailPolicy == "" {
		cfg.FailPolicy = FailOpen
	}
	if _, err := ParseFailPolicy(string(cfg.FailPolicy)); err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
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
	}
	if cfg.Guard != nil {
		l.breaker, l.local, l.log = cfg.Guard.breaker, cfg.Guard.local, cfg.Guard.log
		if sh, ok := cfg.Store.(ShardedStore); ok {
			l.failedShard = sh
			if l.breaker != nil {
				l.guard, l.sharded = cfg.Guard, sh
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

// Limit returns the limit this Limiter enforces.
func (l *Limiter) Limit() Limit { return l.lim }

// Allow is AllowN with a cost of 1.
func (l *Limiter) Allow(ctx context.Context, key string) (d Decision, err error) {
	if l.mem != nil { // the quota is at least 1
		// The memory store alone, called directly (see Limiter.mem),
		// writes the Decision where it is returned from (see
		// memoryBinding.consume).
		l.mem.consume(&d, key, 1)
		return d, nil
	}
	return l.decide(ctx, key, 1, ModeConsume)
}

// AllowN decides whether cost units for key may pass now.
//
// A cost below 1 or above the limit's quota returns an error wrapping
// ErrInvalidCost or ErrCostExceedsLimit and a rejected Decision, without
// calling the store. When the store fails, the returned Decision follows the
// FailPolicy, its Failure field says so, and the store's error is returned
// beside it (wrapped): callers let the Decision decide and count the error.
//
// When ctx is cancelled by the caller while the store decides, the caller
// is gone: that is not a store failure. The Decision is then a refusal
// with Failure FailureCanceled and the error wraps context.Canceled; the
// breaker and the Observer are not told, and no fail policy applies.
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (d Decision, err error) {
	if l.mem != nil && cost >= 1 && cost <= l.quota {
		l.mem.consume(&d, key, cost) // as in Allow
		return d, nil
	}
	return l.decide(ctx, key, cost, ModeConsume)
}

// breakerFor returns the circuit breaker guarding key's calls, nil when
// there is none.
func (l *Limiter) breakerFor(key string) *CircuitBreaker {
	if l.sharded != nil {
		return l.guard.breakerFor(l.sharded.Shard(key))
	}
	return l.breaker
}

// shardOf names the shard deciding key in the failure log, "" when the
// store is not sharded.
func (l *Limiter) shardOf(key string) string {
	if l.failedShard != nil {
		return l.failedShard.Shard(key)
	}
	return ""
}

// decide is the one path of AllowN, PeekN and AllowAtMost: the check of
// the cost (the only thing about a call that New could not check), the
// breaker, the store call in the given mode with the deadline, the
// Observer, then FailLocal's hold on a success, or the fail policy on a
// failure (storeFailed).
func (l *Limiter) decide(ctx context.Context, key string, cost int64, mode Mode) (Decision, error) {
	if cost < 1 || cost > l.quota {
		return Decision{Limit: l.quota}, l.lim.CheckCost(cost)
	}
	if l.mem != nil {
		// The memory store never fails and admits all or nothing in
		// ModeConsume: its Decision is the answer as it is.
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
	d, err := l.store.decide(ctx, key, cost, mode, l.timeout)
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
		d.Admitted = cost // whatever the store says: AllowN takes all or nothing
	}
	if l.local != nil {
		d = l.local.afterStore(ctx, key, l.lim, mode, d)
	}
	return d, nil
}

// storeFailed is decide's answer when the store call started at start
// ended with err: a refusal with FailureCanceled when the caller went
// away, else the fail policy's Decision.
func (l *Limiter) storeFailed(ctx context.Context, key string, cost int64, mode Mode, breaker *CircuitBreaker, start time.Time, err error) (Decision, error) {
	if !l.settle(ctx, breaker, start, err) {
		return Decision{Limit: l.quota, Failure: FailureCanceled},
			fmt.Errorf("%s store: %w", l.storeName, context.Canceled)
	}
	return l.fail(ctx, key, cost, mode, fmt.Errorf("%s store: %w", l.storeName, err))
}

// settle tells the Observer and the breaker how a store call started at
// start ended. When it failed because the caller cancelled ctx, the caller
// went away and the store is not to blame: neither is told (the breaker's
// probe, if this call was one, is released) and settle returns false.
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

// fail is the Decision of the fail policy when the store could not decide
// (err says why).
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

// ErrCircuitOpen is returned, wrapped, when the circuit breaker has stopped
// calling a failing store.
var ErrCircuitOpen = errors.New("circuit breaker open: store not called")

// ErrorKind classifies a store error for metrics by its root cause:
// "circuit_open" when the breaker skipped the store; "canceled" when the
// caller cancelled (context.Canceled: not a store failure); "error" for a
// connection refused or reset, even when a deadline was also reached while
// dialling; "timeout" for deadlines and network timeouts; "error"
// otherwise; "" for nil.
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
