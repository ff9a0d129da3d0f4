package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Concurrency names a cap on requests in flight (LeaseLimit, Leases), not one of the six Algorithms.
const Concurrency Algorithm = "concurrency"

// DefaultLeaseTTL is LeaseLimit.TTL's default.
const DefaultLeaseTTL = 30 * time.Second

// LeaseRetryAfter bounds a refused lease's RetryAfter: a slot frees when a request ends, which
// nothing predicts; the earliest expiry is only when one frees without a release.
const LeaseRetryAfter = time.Second

// LeaseLimit caps the leases a key holds at once. It is a plain value.
type LeaseLimit struct {
	Limit int64         // leases in flight per key, ≥ 1
	TTL   time.Duration // a lease never released is dropped after it, ≥ 1ms
}

// Validate reports whether the limit is usable; the error is a *FieldError.
func (l LeaseLimit) Validate() error {
	if l.Limit < 1 {
		return fieldErrorf("limit", "must be >= 1, got %d", l.Limit)
	}
	if l.Limit > maxExactInteger {
		return fieldErrorf("limit", "must be at most 2^53, got %d", l.Limit)
	}
	if l.TTL < time.Millisecond {
		return fieldErrorf("lease_ttl", "must be at least 1ms, got %s", l.TTL)
	}
	if l.TTL > maxWindow {
		return fieldErrorf("lease_ttl", "%s is longer than %s (100 years)", l.TTL, maxWindow)
	}
	return nil
}

// Lease is a slot AcquireLease took; release it once. A plain value.
type Lease struct {
	ID      string // 128 random bits in hex; "" when the fail policy admitted
	Key     string
	Expires time.Time // when the store drops it unreleased
	local   bool      // taken from the local fallback during a store failure
}

// LeaseDecision is the answer to one AcquireLease. It is a plain value.
type LeaseDecision struct {
	Allowed    bool
	Limit      int64         // LeaseLimit.Limit
	InFlight   int64         // leases the key holds after the call
	RetryAfter time.Duration // refused: min(LeaseRetryAfter, the earliest expiry)
	// Expired counts the key's leases dropped past their TTL in the call: leaked slots.
	Expired int64
	Failure Failure
}

// Remaining is the leases still free after the call.
func (d LeaseDecision) Remaining() int64 { return max(0, d.Limit-d.InFlight) }

// Leaser is a Store that holds concurrency leases, safe for concurrent use, each call atomic; a
// timeout > 0 bounds a call as well as ctx.
type Leaser interface {
	Store
	// AcquireLease drops expired leases and, below lim.Limit, holds id until now + lim.TTL.
	AcquireLease(ctx context.Context, key string, lim LeaseLimit, id string, timeout time.Duration) (LeaseDecision, error)
	// ReleaseLease drops id and key's expired leases; ErrLeaseUnknown, wrapped, when id is not held.
	ReleaseLease(ctx context.Context, key string, id string, timeout time.Duration) (expired int64, err error)
	// RenewLease drops expired leases and extends id to now + lim.TTL; ErrLeaseUnknown, wrapped,
	// when id is not held.
	RenewLease(ctx context.Context, key string, lim LeaseLimit, id string, timeout time.Duration) (Renewal, error)
}

// AsyncReleaser is a Leaser that can release without its caller waiting
// (Leases.ReleaseAsync). Implementations are safe for concurrent use.
type AsyncReleaser interface {
	Leaser
	// ReleaseLeaseAsync returns at once; then gets ReleaseLease's result exactly once,
	// on a store goroutine (or the caller's), and must not block.
	ReleaseLeaseAsync(ctx context.Context, key string, id string, timeout time.Duration, then func(expired int64, err error))
}

// ErrLeaseUnknown is returned, wrapped, when no lease has the id.
var ErrLeaseUnknown = errors.New("lease unknown: already released or expired")

// ErrLeasesNotSupported is returned, wrapped, by NewLeases for a store that is no Leaser.
var ErrLeasesNotSupported = errors.New("store does not hold concurrency leases")

// LeasesConfig configures a Leases; zero values are defaults as in Config.
type LeasesConfig struct {
	Limit      LeaseLimit // required; TTL 0 is DefaultLeaseTTL
	Store      Store      // required, a Leaser
	FailPolicy FailPolicy
	Timeout    time.Duration
	Observer   Observer // told of every store call, operation "concurrency"
	// Guard, when set, is the Limiters' on the same store. FailLocal still holds leases on a
	// MemoryStore of its own.
	Guard *Guard
}

// Leases enforces a LeaseLimit on a Leaser, safe for concurrent use. When the store fails,
// FailOpen admits with a Lease of ID "", FailClosed refuses, FailLocal holds the lease on this
// process's MemoryStore (a limit per instance until the store is back).
type Leases struct {
	lim        LeaseLimit
	store      Leaser
	storeName  string
	failPolicy FailPolicy
	timeout    time.Duration
	observer   Observer
	local      *MemoryStore
	guard      *Guard
	sharded    ShardedStore
}

// NewLeases validates cfg.
func NewLeases(cfg LeasesConfig) (*Leases, error) {
	if cfg.Store == nil {
		return nil, errors.New("limiter: Store is required")
	}
	st, ok := cfg.Store.(Leaser)
	if !ok {
		return nil, fmt.Errorf("limiter: %s store: %w", cfg.Store.Name(), ErrLeasesNotSupported)
	}
	if cfg.Limit.TTL == 0 {
		cfg.Limit.TTL = DefaultLeaseTTL
	}
	if err := cfg.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("limiter: concurrency: %w", err)
	}
	var err error
	if cfg.FailPolicy, cfg.Timeout, err = engineDefaults(cfg.FailPolicy, cfg.Timeout); err != nil {
		return nil, err
	}
	l := &Leases{lim: cfg.Limit, store: st, storeName: st.Name(), failPolicy: cfg.FailPolicy,
		timeout: max(cfg.Timeout, 0), observer: cfg.Observer, guard: cfg.Guard}
	if sh, ok := cfg.Store.(ShardedStore); ok && cfg.Guard != nil {
		l.sharded = sh
	}
	if cfg.FailPolicy == FailLocal {
		l.local = NewMemoryStore(MemoryConfig{})
	}
	return l, nil
}

// Limit returns the limit enforced.
func (l *Leases) Limit() LeaseLimit { return l.lim }

// Acquire takes a lease on key when one is free. When the store fails, the decision is the fail
// policy's and the error is returned beside it; a cancelled ctx refuses with FailureCanceled.
func (l *Leases) Acquire(ctx context.Context, key string) (Lease, LeaseDecision, error) {
	id, err := NewReservationID()
	if err != nil {
		return Lease{}, LeaseDecision{Limit: l.lim.Limit, Failure: FailureClosed, RetryAfter: time.Second}, err
	}
	start := time.Now()
	lease := Lease{ID: id, Key: key, Expires: start.Add(l.lim.TTL)}
	breaker := l.breakerFor(key)
	var d LeaseDecision
	if breaker != nil && !breaker.allow() {
		err = fmt.Errorf("%s store: %w", l.storeName, ErrCircuitOpen)
	} else {
		d, err = l.store.AcquireLease(ctx, key, l.lim, id, l.timeout)
		if err != nil && errors.Is(ctx.Err(), context.Canceled) {
			if breaker != nil {
				breaker.release()
			}
			return Lease{}, LeaseDecision{Limit: l.lim.Limit, Failure: FailureCanceled}, fmt.Errorf("%s store: %w", l.storeName, err)
		}
		l.observe(ctx, start, err)
		if breaker != nil {
			breaker.record(err == nil)
		}
		if err == nil {
			if !d.Allowed {
				lease = Lease{}
			}
			return lease, d, nil
		}
		err = fmt.Errorf("%s store: %w", l.storeName, err)
	}
	if l.guard != nil && l.guard.log != nil {
		shard := ""
		if l.sharded != nil {
			shard = l.sharded.Shard(key)
		}
		l.guard.log.failed(ctx, ErrorKind(err), shard, err)
	}
	switch l.failPolicy {
	case FailClosed:
		return Lease{}, LeaseDecision{Limit: l.lim.Limit, RetryAfter: time.Second, Failure: FailureClosed}, err
	case FailLocal:
		d, _ = l.local.AcquireLease(ctx, key, l.lim, id, 0)
		d.Failure = FailureLocal
		if !d.Allowed {
			return Lease{}, d, err
		}
		lease.local = true
		return lease, d, err
	}
	return Lease{Key: key}, LeaseDecision{Allowed: true, Limit: l.lim.Limit, Failure: FailureOpen}, err
}

// Release gives lease back and returns the key's leases found expired; twice or after the TTL,
// ErrLeaseUnknown, wrapped. Use a context that outlives the request: a client gone must still release.
func (l *Leases) Release(ctx context.Context, lease Lease) (int64, error) {
	if lease.ID == "" {
		return 0, nil
	}
	if lease.local {
		return l.local.ReleaseLease(ctx, lease.Key, lease.ID, 0)
	}
	breaker := l.breakerFor(lease.Key)
	if breaker != nil && !breaker.allow() {
		return 0, fmt.Errorf("%s store: %w", l.storeName, ErrCircuitOpen) // the lease expires at its TTL
	}
	start := time.Now()
	n, err := l.store.ReleaseLease(ctx, lease.Key, lease.ID, l.timeout)
	return l.released(ctx, breaker, start, n, err)
}

// ReleaseAsync is Release without waiting: on an AsyncReleaser it returns at once and
// then (nil: none) gets Release's result once, on a store goroutine, so it must not
// block; elsewhere it is Release, then then. Safe for concurrent use.
func (l *Leases) ReleaseAsync(ctx context.Context, lease Lease, then func(int64, error)) {
	if then == nil {
		then = func(int64, error) {}
	}
	as, ok := l.store.(AsyncReleaser)
	if lease.ID == "" || lease.local || !ok {
		then(l.Release(ctx, lease))
		return
	}
	breaker := l.breakerFor(lease.Key)
	if breaker != nil && !breaker.allow() {
		then(0, fmt.Errorf("%s store: %w", l.storeName, ErrCircuitOpen)) // the lease expires at its TTL
		return
	}
	start := time.Now()
	as.ReleaseLeaseAsync(ctx, lease.Key, lease.ID, l.timeout, func(n int64, err error) {
		then(l.released(ctx, breaker, start, n, err))
	})
}

func (l *Leases) released(ctx context.Context, breaker *CircuitBreaker, start time.Time, n int64, err error) (int64, error) {
	if !errors.Is(err, ErrLeaseUnknown) {
		l.observe(ctx, start, err)
	}
	if breaker != nil {
		breaker.record(err == nil || errors.Is(err, ErrLeaseUnknown))
	}
	if err != nil {
		return n, fmt.Errorf("%s store: %w", l.storeName, err)
	}
	return n, nil
}

// Renew extends lease to the TTL from now, so that a request still being served keeps its slot;
// ErrLeaseUnknown, wrapped, when it is no longer held. Safe for concurrent use.
func (l *Leases) Renew(ctx context.Context, lease Lease) (Renewal, error) {
	if lease.ID == "" {
		return Renewal{}, nil
	}
	if lease.local {
		return l.local.RenewLease(ctx, lease.Key, l.lim, lease.ID, 0)
	}
	breaker := l.breakerFor(lease.Key)
	if breaker != nil && !breaker.allow() {
		return Renewal{}, fmt.Errorf("%s store: %w", l.storeName, ErrCircuitOpen)
	}
	start := time.Now()
	rn, err := l.store.RenewLease(ctx, lease.Key, l.lim, lease.ID, l.timeout)
	if !errors.Is(err, ErrLeaseUnknown) {
		l.observe(ctx, start, err)
	}
	if breaker != nil {
		breaker.record(err == nil || errors.Is(err, ErrLeaseUnknown))
	}
	if err != nil {
		return rn, fmt.Errorf("%s store: %w", l.storeName, err)
	}
	return rn, nil
}

// Keep renews lease every third of the TTL until stop is called or the lease is no longer
// held: it outlives its TTL only while its holder is alive. Safe for concurrent use.
func (l *Leases) Keep(lease Lease) (stop func()) {
	if lease.ID == "" {
		return func() {}
	}
	return keepAlive(l.lim.TTL/3, func(ctx context.Context) bool {
		_, err := l.Renew(ctx, lease)
		return !errors.Is(err, ErrLeaseUnknown)
	})
}

func (l *Leases) breakerFor(key string) *CircuitBreaker {
	switch {
	case l.guard == nil:
		return nil
	case l.sharded != nil:
		return l.guard.breakerFor(l.sharded.Shard(key))
	}
	return l.guard.breaker
}

func (l *Leases) observe(ctx context.Context, start time.Time, err error) {
	if l.observer != nil {
		l.observer.ObserveStore(ctx, string(Concurrency), time.Since(start), err)
	}
}

// SupportsLeases reports whether st holds concurrency leases.
func SupportsLeases(st Store) bool {
	_, ok := st.(Leaser)
	return ok
}

// LeaseRecorder is told of leases taken (+1) and given back (−1) on an endpoint and tier, and of
// the expired ones a call found; safe for concurrent use and cheap.
type LeaseRecorder interface {
	RecordLeases(ctx context.Context, endpoint, planTier string, inFlight, expired int64)
}
