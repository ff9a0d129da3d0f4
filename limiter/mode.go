package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Mode says what a decision takes of its cost; store calls take only the first three.
type Mode uint8

const (
	ModeConsume Mode = iota // take all of it or nothing (AllowN)
	// ModePeek answers as for the cost and changes nothing, not even by creating a key.
	ModePeek
	// ModeAtMost takes the cost or as many units as fit, rejecting only when none does.
	ModeAtMost
	// ModeReserve holds an estimate in a Reservation settled later (Reserve).
	ModeReserve
	// ModeLease holds one slot of a concurrency limit until released (Leases.Acquire).
	ModeLease
)

// String returns "consume", "peek", "at_most", "reserve" or "lease".
func (m Mode) String() string {
	switch m {
	case ModePeek:
		return "peek"
	case ModeAtMost:
		return "at_most"
	case ModeReserve:
		return "reserve"
	case ModeLease:
		return "lease"
	}
	return "consume"
}

// Inspector is a Store that can also peek, admit at most, and reset; safe for concurrent use.
type Inspector interface {
	Store
	// DecideMode is Decide in ModeConsume, ModePeek or ModeAtMost. A timeout > 0
	// bounds the call as well as ctx.
	DecideMode(ctx context.Context, key string, lim Limit, cost int64, mode Mode, timeout time.Duration) (Decision, error)
	// Reset forgets key's state under lim's algorithm; unknown is no error.
	Reset(ctx context.Context, key string, lim Limit, timeout time.Duration) error
}

// ErrNotSupported is returned, wrapped, on a store that is not an Inspector.
var ErrNotSupported = errors.New("store does not support peek, reset or allow-at-most")

// DecideMode implements Inspector; like Decide it never waits.
func (s *MemoryStore) DecideMode(ctx context.Context, key string, lim Limit, cost int64, mode Mode, _ time.Duration) (Decision, error) {
	if err := lim.Validate(); err != nil {
		return Decision{}, fmt.Errorf("memory store: limit: %w", err)
	}
	if err := lim.CheckCost(cost); err != nil {
		return Decision{Limit: lim.Quota()}, fmt.Errorf("memory store: %w", err)
	}
	if mode > ModeAtMost {
		return Decision{}, fmt.Errorf("memory store: mode %s is no store call's: %w", mode, ErrNotSupported)
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

// PeekN says what AllowN would answer now, taking nothing. The fail policy applies:
// a Decision with a Failure is no reading of the store.
func (l *Limiter) PeekN(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.decide(ctx, key, cost, ModePeek)
}

// AllowAtMost admits as many of n units as fit now (Decision.Admitted); FailOpen
// admits them all.
func (l *Limiter) AllowAtMost(ctx context.Context, key string, n int64) (Decision, error) {
	return l.decide(ctx, key, min(n, l.quota), ModeAtMost)
}

// Reset forgets key's state in the store and the local share; no fail policy applies.
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
