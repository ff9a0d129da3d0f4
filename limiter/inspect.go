package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Mode says what a store call does with a decision: take the cost
// (AllowN), only look (PeekN), or take as much of it as fits (AllowAtMost).
type Mode uint8

const (
	// ModeConsume admits the whole cost or nothing: AllowN.
	ModeConsume Mode = iota
	// ModePeek answers as for the cost and changes nothing: Allowed says
	// whether the cost would be admitted now, RetryAfter when it would be,
	// Delay the leaky_bucket delay it would get, and Remaining and
	// ResetAfter are the key's state as it is (nothing is taken). Admitted
	// is 0. A peek at an unknown key creates no state.
	ModePeek
	// ModeAtMost admits the cost, or, when it does not fit, as many units
	// as fit now (Remaining of the rejection) when that is at least one,
	// in the same atomic step; Admitted says how many. Rejected only when
	// not one unit fits, and then answered as a request of one unit
	// (RetryAfter is when one will fit).
	ModeAtMost
)

// String returns "consume", "peek" or "at_most".
func (m Mode) String() string {
	switch m {
	case ModePeek:
		return "peek"
	case ModeAtMost:
		return "at_most"
	}
	return "consume"
}

// Inspector is a Store that can also peek at a key, admit at most a cost,
// and forget a key: what Limiter.PeekN, Limiter.AllowAtMost and
// Limiter.Reset need. MemoryStore and the Redis store implement it; a
// Store that does not still serves AllowN, and the three calls then
// return ErrNotSupported. Implementations are safe for concurrent use.
type Inspector interface {
	Store
	// DecideMode is Decide in the given mode (see Mode), as atomic as
	// Decide. ModeConsume is exactly Decide. lim has been validated and
	// cost checked against it by the caller. When timeout is > 0 the call
	// is bounded by it as well as by ctx: the Limiter gives every call its
	// Config.Timeout this way (a store that never waits ignores it).
	DecideMode(ctx context.Context, key string, lim Limit, cost int64, mode Mode, timeout time.Duration) (Decision, error)
	// Reset forgets key's state under lim's algorithm (every piece of
	// state that algorithm keeps for key), so that its next decision
	// finds a fresh key. Resetting an unknown key is not an error.
	Reset(ctx context.Context, key string, lim Limit, timeout time.Duration) error
}

// ErrNotSupported is returned, wrapped, by PeekN, AllowAtMost and Reset
// when the Limiter's store is not an Inspector.
var ErrNotSupported = errors.New("store does not support peek, reset or allow-at-most")

// DecideMode implements Inspector. Like Decide it never waits: ctx and
// timeout are not consulted.
func (s *MemoryStore) DecideMode(ctx context.Context, key string, lim Limit, cost int64, mode Mode, _ time.Duration) (Decision, error) {
	if err := lim.Validate(); err != nil {
		return Decision{}, fmt.Errorf("memory store: limit: %w", err)
	}
	if err := lim.CheckCost(cost); err != nil {
		return Decision{Limit: lim.Quota()}, fmt.Errorf("memory store: %w", err)
	}
	b := memoryBinding{store: s, limit: compileLimit(lim)}
	return b.decide(ctx, key, cost, mode, 0) // never fails
}

// Reset implements Inspector: it drops key's entry for lim's algorithm.
func (s *MemoryStore) Reset(_ context.Context, key string, lim Limit, _ time.Duration) error {
	a := indexOf(lim.Algorithm)
	if a == algorithmCount {
		return fmt.Errorf("memory store: limit: %w", lim.Validate())
	}
	s.reset(key, a)
	return nil
}

// Peek is PeekN with a cost of 1: the key's state now — how many units
// remain, when the full quota is back, and whether (or after how long) one
// more request would pass — without taking anything. It is redis_rate's
// AllowN with n = 0 and ulule/limiter's Peek.
func (l *Limiter) Peek(ctx context.Context, key string) (Decision, error) {
	return l.PeekN(ctx, key, 1)
}

// PeekN says what AllowN(ctx, key, cost) would answer now, without taking
// anything (see ModePeek): Allowed and RetryAfter are for cost, Remaining
// and ResetAfter describe the key as it is. On Redis it is one script call
// that writes nothing.
//
// It is a store call like AllowN: the deadline, the circuit breaker and
// the Observer apply, and when the store fails the Decision is the one the
// FailPolicy would give AllowN (FailOpen: allowed with the full quota
// remaining; FailClosed: refused; FailLocal: a peek at the local share,
// which takes nothing from it either), with Failure set and the error
// returned beside it. A caller that must know the real state treats any
// Decision with Failure != FailureNone as unknown.
func (l *Limiter) PeekN(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.decide(ctx, key, cost, ModePeek)
}

// AllowAtMost admits up to n units for key at once: all n when they fit,
// else as many as fit now (at least 1), else none. Decision.Admitted says
// how many were taken, Allowed whether any were; on rejection RetryAfter
// is when one unit will fit. It is atomic like AllowN (one script call on
// Redis), so concurrent callers never admit more than the limit between
// them. It is redis_rate's AllowAtMost. An n above the quota is treated as
// the quota; an n below 1 is an error wrapping ErrInvalidCost.
//
// The fail policy applies as for AllowN: FailOpen admits all n, FailClosed
// none, FailLocal up to n from the local share.
func (l *Limiter) AllowAtMost(ctx context.Context, key string, n int64) (Decision, error) {
	return l.decide(ctx, key, min(n, l.quota), ModeAtMost) // n < 1 is refused there
}

// Reset forgets key's state under this Limiter's algorithm: its next
// request finds the full quota. On Redis it deletes every key the
// algorithm keeps for it; under FailLocal the local share's state of key
// is forgotten too. Other Limiters sharing the store and algorithm share
// key's state (see MemoryStore) and are reset with it.
//
// A Reset is a store call: the deadline, the circuit breaker and the
// Observer apply; a failure is returned as an error (there is no decision
// for a fail policy to make), ErrCircuitOpen when the breaker is open.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l.local != nil {
		l.local.reset(ctx, key, l.lim)
	}
	if !l.inspects {
		return fmt.Errorf("%s store: %w", l.storeName, ErrNotSupported)
	}
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		return fmt.Errorf("%s store: reset: %w", l.storeName, ErrCircuitOpen)
	}
	var start time.Time
	if l.observer != nil {
		start = time.Now()
	}
	err := l.store.reset(ctx, key, l.timeout)
	if !l.settle(ctx, breaker, start, err) {
		return fmt.Errorf("%s store: reset: %w", l.storeName, context.Canceled)
	}
	if err != nil {
		err = fmt.Errorf("%s store: reset: %w", l.storeName, err)
		if l.log != nil {
			l.log.failed(ctx, ErrorKind(err), l.shardOf(key), err)
		}
	}
	return err
}
