package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ReservationCounter is a Reserver that can count a key's open reservations.
// Implementations are safe for concurrent use.
type ReservationCounter interface {
	Reserver
	// OpenReservations counts key's reservations under lim neither settled
	// nor past their hold, in one atomic read that writes nothing, not even
	// a settle. A timeout > 0 bounds the call as well as ctx.
	OpenReservations(ctx context.Context, key string, lim Limit, timeout time.Duration) (int64, error)
}

// ErrOpenReservationsNotSupported is returned, wrapped, by Limiter.OpenReservations
// when the store is no ReservationCounter or the algorithm holds no reservations.
var ErrOpenReservationsNotSupported = errors.New("store or algorithm keeps no count of open reservations")

// OpenReservations implements ReservationCounter. Like Decide it never waits.
func (s *MemoryStore) OpenReservations(_ context.Context, key string, lim Limit, _ time.Duration) (int64, error) {
	if err := lim.Validate(); err != nil {
		return 0, fmt.Errorf("memory store: limit: %w", err)
	}
	b := memoryBinding{store: s, limit: compileLimit(lim)}
	return b.openReservations(key), nil
}

func (b *memoryBinding) openReservations(key string) int64 {
	s, alg := b.store, b.limit.alg
	sh := &s.shards[s.hash(key)&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	book := sh.books[bookKey{alg, key}]
	if book == nil {
		return 0
	}
	now := s.nowUS()
	var n int64
	for _, rec := range book.open {
		if rec.expires > now { // expireBook's test, without its writes
			n++
		}
	}
	return n
}

type counterFunc func(ctx context.Context, key string, timeout time.Duration) (int64, error)

func bindCounter(st Store, bound boundStore, lim Limit) counterFunc {
	if !SupportsReservations(lim.Algorithm) {
		return nil
	}
	if m, ok := bound.(*memoryBinding); ok {
		return func(_ context.Context, key string, _ time.Duration) (int64, error) {
			return m.openReservations(key), nil
		}
	}
	if rc, ok := st.(ReservationCounter); ok {
		return func(ctx context.Context, key string, timeout time.Duration) (int64, error) {
			return rc.OpenReservations(ctx, key, lim, timeout)
		}
	}
	return nil
}

// OpenReservations counts key's reservations neither settled nor past their
// hold, changing nothing: as Reset, through the breaker and the timeout,
// with no fail policy. Safe for concurrent use.
func (l *Limiter) OpenReservations(ctx context.Context, key string) (int64, error) {
	if l.count == nil {
		return 0, fmt.Errorf("%s store, %s: %w", l.storeName, l.lim.Algorithm, ErrOpenReservationsNotSupported)
	}
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		return 0, fmt.Errorf("%s store: open reservations: %w", l.storeName, ErrCircuitOpen)
	}
	start := l.startCall()
	n, err := l.count(ctx, key, l.timeout)
	if !l.settle(ctx, breaker, start, err) {
		return 0, fmt.Errorf("%s store: open reservations: %w", l.storeName, context.Canceled)
	}
	if err != nil {
		err = fmt.Errorf("%s store: open reservations: %w", l.storeName, err)
		if l.log != nil {
			l.log.failed(ctx, ErrorKind(err), l.shardOf(key), err)
		}
		return 0, err
	}
	return n, nil
}
