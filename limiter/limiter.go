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
	// disables. A MemoryStore never waits and is given no deadline.
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
type Limiter struct {
	cfg     Config
	breaker *CircuitBreaker // nil: no breaker
	// guard and sharded are set when the store is a ShardedStore behind a
	// Guard with a breaker: each shard then has a breaker of its own.
	guard   *Guard
	sharded ShardedStore
	local   *LocalFallback // under FailLocal
	log     *failureLog    // nil: failures are not logged
	// inProcess: the store never waits, so it gets no deadline.
	inProcess bool
	// timeouts is the store when it applies Config.Timeout itself.
	timeouts TimeoutStore
	// memory is the store when it is a MemoryStore, called directly with
	// the limit compiled once.
	memory   *MemoryStore
	compiled compiledLimit
	// inspector is the store when it is an Inspector (PeekN, AllowAtMost,
	// Reset), else nil.
	inspector Inspector
	// direct: the store is a MemoryStore with no breaker, Observer or
	// local fallback around it, so decisions go straight to it.
	direct bool
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
	l := &Limiter{cfg: cfg}
	switch {
	case cfg.Guard != nil:
		l.breaker, l.local, l.log = cfg.Guard.breaker, cfg.Guard.local, cfg.Guard.log
		if sh, ok := cfg.Store.(ShardedStore); ok && l.breaker != nil {
			l.guard, l.sharded = cfg.Guard, sh
		}
	default:
		l.breaker = NewCircuitBreaker(cfg.Breaker)
		if cfg.FailPolicy == FailLocal {
			l.local = NewLocalFallback(LocalConfig{Store: cfg.Local})
		}
	}
	if cfg.FailPolicy != FailLocal {
		l.local = nil
	}
	_, l.inProcess = cfg.Store.(inProcessStore)
	l.timeouts, _ = cfg.Store.(TimeoutStore)
	l.memory, _ = cfg.Store.(*MemoryStore)
	l.inspector, _ = cfg.Store.(Inspector)
	l.direct = l.memory != nil && l.breaker == nil && cfg.Observer == nil && l.local == nil
	l.compiled = compileLimit(cfg.Limit)
	return l, nil
}

// Limit returns the limit this Limiter enforces.
func (l *Limiter) Limit() Limit { return l.cfg.Limit }

// Allow is AllowN with a cost of 1.
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
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
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (Decision, error) {
	if cost < 1 || cost > l.compiled.quota {
		return Decision{Limit: l.compiled.quota}, l.cfg.Limit.CheckCost(cost)
	}
	if l.direct {
		// The limit and cost are valid, and the memory store cannot fail.
		return l.memory.decide(key, &l.compiled, cost, ModeConsume), nil
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

// decide is the one path of AllowN, PeekN and AllowAtMost: the store call
// in the given mode, with the deadline, breaker, Observer and fail policy
// around it. cost has been checked.
func (l *Limiter) decide(ctx context.Context, key string, cost int64, mode Mode) (Decision, error) {
	if l.direct {
		return l.memory.decide(key, &l.compiled, cost, mode), nil
	}
	if mode != ModeConsume && l.inspector == nil {
		return Decision{Limit: l.compiled.quota}, fmt.Errorf("%s store: %w", l.cfg.Store.Name(), ErrNotSupported)
	}
	lim := l.cfg.Limit
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		return l.fail(ctx, key, cost, mode, ErrCircuitOpen)
	}
	var start time.Time
	if l.cfg.Observer != nil {
		start = time.Now()
	}
	var d Decision
	var err error
	switch {
	case l.memory != nil:
		d = l.memory.decide(key, &l.compiled, cost, mode)
	case mode != ModeConsume:
		d, err = l.inspector.DecideMode(ctx, key, lim, cost, mode, l.storeTimeout())
	case l.cfg.Timeout <= 0 || l.inProcess:
		d, err = l.cfg.Store.Decide(ctx, key, lim, cost)
	case l.timeouts != nil:
		d, err = l.timeouts.DecideTimeout(ctx, key, lim, cost, l.cfg.Timeout)
	default:
		callCtx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		d, err = l.cfg.Store.Decide(callCtx, key, lim, cost)
		cancel()
	}
	if err != nil && ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		// The caller went away: the store is not to blame.
		if breaker != nil {
			breaker.release()
		}
		return Decision{Limit: lim.Quota(), Failure: FailureCanceled},
			fmt.Errorf("%s store: %w", l.cfg.Store.Name(), context.Canceled)
	}
	if l.cfg.Observer != nil {
		l.cfg.Observer.ObserveStore(ctx, string(lim.Algorithm), time.Since(start), err)
	}
	if breaker != nil {
		breaker.record(err == nil)
	}
	if err != nil {
		return l.fail(ctx, key, cost, mode, fmt.Errorf("%s store: %w", l.cfg.Store.Name(), err))
	}
	if mode == ModeConsume && d.Allowed {
		d.Admitted = cost // whatever the store says: AllowN takes all or nothing
	}
	if l.local != nil {
		d = l.local.afterStore(ctx, key, lim, mode, d)
	}
	return d, nil
}

func (l *Limiter) fail(ctx context.Context, key string, cost int64, mode Mode, err error) (Decision, error) {
	if l.log != nil {
		l.log.failed(ctx, ErrorKind(err), err)
	}
	lim := l.cfg.Limit
	switch l.cfg.FailPolicy {
	case FailClosed:
		return Decision{Limit: lim.Quota(), RetryAfter: time.Second, Failure: FailureClosed}, err
	case FailLocal:
		d, lerr := l.local.decide(ctx, key, lim, cost, mode)
		if lerr == nil {
			d.Failure = FailureLocal
			return d, err
		}
	}
	d := Decision{Allowed: true, Limit: lim.Quota(), Remaining: lim.Quota(), Admitted: cost, Failure: FailureOpen}
	if mode == ModePeek {
		d.Admitted = 0
	}
	return d, err
}

// inProcessStore is a Store that decides without waiting (MemoryStore): the
// Limiter gives it no deadline, which keeps its decisions free of
// allocations.
type inProcessStore interface{ decidesInProcess() }

// TimeoutStore is a Store that bounds a call by a timeout itself. The
// Limiter calls DecideTimeout with Config.Timeout instead of wrapping ctx in
// context.WithTimeout, whose timer and allocations cost more than some
// stores' whole decision (the Redis store keeps one reusable timer per
// waiting call instead). Implementations are safe for concurrent use.
type TimeoutStore interface {
	Store
	// DecideTimeout is Decide bounded by ctx and by timeout, whichever ends
	// first: once timeout has passed it returns an error wrapping
	// context.DeadlineExceeded, and it bounds its network I/O by the same
	// deadline.
	DecideTimeout(ctx context.Context, key string, lim Limit, cost int64, timeout time.Duration) (Decision, error)
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
