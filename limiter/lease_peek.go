package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// MaxPeekedLeases bounds the expiries a lease peek lists: the count is exact however many are
// held, the list is of the earliest ones.
const MaxPeekedLeases = 100

// LeaseUsage is what a key holds under a concurrency limit now. It is a plain value.
type LeaseUsage struct {
	InFlight int64 // leases held and not past their expiry
	// ExpiresIn is how long each held lease has left before the store drops it unreleased,
	// earliest first, at most MaxPeekedLeases of them.
	ExpiresIn []time.Duration
}

// LeasePeeker is a Leaser that can read a key's leases without changing them. Implementations
// are safe for concurrent use.
type LeasePeeker interface {
	Leaser
	// PeekLeases counts key's leases not past their expiry and lists the earliest max of their
	// expiries, in one atomic read that writes nothing, not even by dropping the expired ones
	// (the next acquire or release counts those). A timeout > 0 bounds the call as well as ctx.
	PeekLeases(ctx context.Context, key string, max int, timeout time.Duration) (LeaseUsage, error)
}

// PeekLeases implements LeasePeeker. Like AcquireLease it never waits.
func (s *MemoryStore) PeekLeases(_ context.Context, key string, most int, _ time.Duration) (LeaseUsage, error) {
	now := s.nowUS()
	t := &s.leases
	t.mu.Lock()
	var exps []int64
	for _, exp := range t.keys[key] {
		if exp > now { // dropExpired's test, without its writes
			exps = append(exps, exp)
		}
	}
	t.mu.Unlock()
	slices.Sort(exps)
	u := LeaseUsage{InFlight: int64(len(exps))}
	for _, exp := range exps[:min(len(exps), max(most, 0))] {
		u.ExpiresIn = append(u.ExpiresIn, fromUS(exp-now))
	}
	return u, nil
}

// Peek reads what key holds, changing nothing: as Limiter.OpenReservations, through the breaker
// and the timeout, with no fail policy, whose answer would be no reading. A store that is no
// LeasePeeker fails it with ErrNotSupported, wrapped. Safe for concurrent use.
func (l *Leases) Peek(ctx context.Context, key string) (LeaseUsage, error) {
	st, ok := l.store.(LeasePeeker)
	if !ok {
		return LeaseUsage{}, fmt.Errorf("%s store: concurrency: %w", l.storeName, ErrNotSupported)
	}
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		return LeaseUsage{}, fmt.Errorf("%s store: concurrency: %w", l.storeName, ErrCircuitOpen)
	}
	start := time.Now()
	u, err := st.PeekLeases(ctx, key, MaxPeekedLeases, l.timeout)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		if breaker != nil {
			breaker.release()
		}
		return LeaseUsage{}, fmt.Errorf("%s store: concurrency: %w", l.storeName, context.Canceled)
	}
	l.observe(ctx, start, err)
	if breaker != nil {
		breaker.record(err == nil)
	}
	if err != nil {
		err = fmt.Errorf("%s store: concurrency: %w", l.storeName, err)
		if l.guard != nil && l.guard.log != nil {
			shard := ""
			if l.sharded != nil {
				shard = l.sharded.Shard(key)
			}
			l.guard.log.failed(ctx, ErrorKind(err), shard, err)
		}
		return LeaseUsage{}, err
	}
	return u, nil
}
