package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Mode says what a store call does with the cost.
type Mode uint8

const (
	ModeConsume Mode = iota // take all of it or nothing (AllowN)
	// ModePeek answers as for the cost and changes nothing, not even by
	// creating an unknown key: Remaining and ResetAfter are the key as it
	// is, and Admitted is 0 (PeekN).
	ModePeek
	// ModeAtMost takes the cost or, in the same atomic step, as many units
	// as fit; rejected only when not one fits, with the RetryAfter of one
	// (AllowAtMost).
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

// Inspector is a Store that can also peek, admit at most, and reset, as
// Limiter.PeekN, AllowAtMost and Reset need; on a plain Store those return
// ErrNotSupported. Implementations are safe for concurrent use.
type Inspector interface {
	Store
	// DecideMode is Decide in mode, as atomically; ModeConsume is Decide.
	// A timeout > 0 bounds the call as well as ctx (a Limiter passes its
	// Config.Timeout); a store that never waits ignores it.
	DecideMode(ctx context.Context, key string, lim Limit, cost int64, mode Mode, timeout time.Duration) (Decision, error)
	// Reset forgets all state lim's algorithm keeps for key; an unknown key
	// is no error.
	Reset(ctx context.Context, key string, lim Limit, timeout time.Duration) error
}

// ErrNotSupported is returned, wrapped, by PeekN, AllowAtMost and Reset on
// a store that is not an Inspector.
var ErrNotSupported = errors.New("store does not support peek, reset or allow-at-most")

// DecideMode implements Inspector; like Decide it never waits.
func (s *MemoryStore) DecideMode(ctx context.Context, key string, lim Limit, cost int64, mode Mode, _ time.Duration) (Decision, error) {
	if err := lim.Validate(); err != nil {
		return Decision{}, fmt.Errorf("memory store: limit: %w", err)
	}
	if err := lim.CheckCost(cost); err != nil {
		return Decision{Limit: lim.Quota()}, fmt.Errorf("memory store: %w", err)
	}
	b := memoryBinding{store: s, limit: compileLimit(lim)}
	return b.decide(ctx, key, cost, mode, 0)
}

// Reset implements Inspector.
func (s *MemoryStore) Reset(_ context.Context, key string, lim Limit, _ time.Duration) error {
	a := indexOf(lim.Algorithm)
	if a == algorithmCount {
		return fmt.Errorf("memory store: limit: %w", lim.Validate())
	}
	s.reset(key, a)
	return nil
}

// Peek is PeekN with a cost of 1.
func (l *Limiter) Peek(ctx context.Context, key string) (Decision, error) {
	return l.PeekN(ctx, key, 1)
}

// PeekN says what AllowN would answer now, taking nothing (ModePeek). The
// deadline, breaker, Observer and fail policy apply as for AllowN (FailLocal
// peeks at the local share), so a caller that needs the real state treats a
// Decision with a Failure as unknown.
func (l *Limiter) PeekN(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.decide(ctx, key, cost, ModePeek)
}

// AllowAtMost atomically admits as many of n units as fit now, at most the
// quota (ModeAtMost); Decision.Admitted says how many. An n below 1 is an
// error wrapping ErrInvalidCost. The fail policy applies as for AllowN:
// FailOpen admits them all, FailLocal as many as the local share holds.
func (l *Limiter) AllowAtMost(ctx context.Context, key string, n int64) (Decision, error) {
	return l.decide(ctx, key, min(n, l.quota), ModeAtMost)
}

// Reset forgets key's state under the Limiter's algorithm, in the store
// and in the local share, for every Limiter sharing them. The deadline,
// breaker and Observer apply; a failure (ErrCircuitOpen too) is returned,
// as there is no decision for a fail policy to make.
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
