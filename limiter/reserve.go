package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrReservationsNotSupported is returned, wrapped, when the store is no Reserver.
var ErrReservationsNotSupported = errors.New("store or algorithm does not support reservations")

// ErrInvalidActual is returned, wrapped, by Commit for an actual below 0.
var ErrInvalidActual = errors.New("actual cost must be at least 0")

// SupportsReservations reports whether a can settle a reservation: all six can.
func SupportsReservations(a Algorithm) bool { return SpecOf(a) != nil }

type reserveBinding interface {
	reserve(ctx context.Context, key string, r ReserveRequest, timeout time.Duration) (Decision, error)
	settle(ctx context.Context, key string, id string, actual int64, timeout time.Duration) (Settlement, error)
	charge(ctx context.Context, key string, cost int64, timeout time.Duration) (Settlement, error)
	renew(ctx context.Context, key string, id string, hold time.Duration, timeout time.Duration) (Renewal, error)
}

func bindReserver(st Store, bound boundStore, lim Limit) reserveBinding {
	if !SupportsReservations(lim.Algorithm) {
		return nil
	}
	if m, ok := bound.(*memoryBinding); ok {
		return m
	}
	if rs, ok := st.(Reserver); ok {
		return reserverBinding{store: rs, limit: lim}
	}
	return nil
}

type reserverBinding struct {
	store Reserver
	limit Limit
}

func (b reserverBinding) reserve(ctx context.Context, key string, r ReserveRequest, timeout time.Duration) (Decision, error) {
	return b.store.Reserve(ctx, key, b.limit, r, timeout)
}

func (b reserverBinding) settle(ctx context.Context, key string, id string, actual int64, timeout time.Duration) (Settlement, error) {
	return b.store.Settle(ctx, key, b.limit, id, actual, timeout)
}

func (b reserverBinding) renew(ctx context.Context, key string, id string, hold time.Duration, timeout time.Duration) (Renewal, error) {
	return b.store.Renew(ctx, key, b.limit, id, hold, timeout)
}

func (b reserverBinding) charge(ctx context.Context, key string, cost int64, timeout time.Duration) (Settlement, error) {
	return b.store.Charge(ctx, key, b.limit, cost, timeout)
}

// Reserves reports whether Reserve can hold reservations.
func (l *Limiter) Reserves() bool { return l.resv != nil }

// Reserve takes estimate units as AllowN does and, if admitted, opens a reservation for
// Config.Hold. A rejection or a fail policy's decision has ID "": settling it does nothing.
func (l *Limiter) Reserve(ctx context.Context, key string, estimate int64) (Reservation, Decision, error) {
	r := Reservation{Key: key, Estimate: estimate}
	if estimate < 1 || estimate > l.quota {
		return r, Decision{Limit: l.quota}, l.lim.CheckCost(estimate)
	}
	if l.resv == nil {
		return r, Decision{Limit: l.quota}, fmt.Errorf("%s store, %s: %w", l.storeName, l.lim.Algorithm, ErrReservationsNotSupported)
	}
	id, err := NewReservationID()
	if err != nil {
		return r, Decision{Limit: l.quota}, err
	}
	req := ReserveRequest{ID: id, Estimate: estimate, Hold: l.hold, OnExpiry: l.onExpiry}
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		d, err := l.fail(ctx, key, estimate, ModeConsume, ErrCircuitOpen)
		return r, d, err
	}
	start := l.startCall()
	d, err := l.resv.reserve(ctx, key, req, l.timeout)
	if err != nil {
		d, err = l.storeFailed(ctx, key, estimate, ModeConsume, breaker, start, err)
		return r, d, err
	}
	l.settle(ctx, breaker, start, nil)
	admitted := d.Allowed
	if admitted {
		d.Admitted = estimate
	}
	if l.local != nil {
		if d = l.local.afterStore(ctx, key, l.lim, ModeConsume, d); admitted && !d.Allowed {
			// Held to the local share after an outage: give the units back.
			_, err := l.resv.settle(ctx, key, id, -1, l.timeout)
			return r, d, err
		}
	}
	if !d.Allowed {
		return r, d, nil
	}
	r.ID, r.Expires = id, l.now().Add(l.hold)
	return r, d, nil
}

// Commit settles r at its actual cost (≥ 0); twice, ErrReservationUnknown, wrapped;
// after r expired, ErrReservationExpired, wrapped, with a Late Settlement. A store
// failure leaves r open until it expires by OnExpiry.
func (l *Limiter) Commit(ctx context.Context, r Reservation, actual int64) (Settlement, error) {
	if actual < 0 {
		return Settlement{}, fmt.Errorf("reservation %s: %w: got %d", r.ID, ErrInvalidActual, actual)
	}
	return l.settleReservation(ctx, r, actual)
}

// Renew extends r's hold to Config.Hold from now; ErrReservationUnknown, wrapped,
// when r is no longer open. Safe for concurrent use.
func (l *Limiter) Renew(ctx context.Context, r Reservation) (Renewal, error) {
	if r.ID == "" {
		return Renewal{}, nil
	}
	if l.resv == nil {
		return Renewal{}, fmt.Errorf("%s store, %s: %w", l.storeName, l.lim.Algorithm, ErrReservationsNotSupported)
	}
	var rn Renewal
	_, err := l.storeSettle(ctx, r.Key, "renew", r.ID, func() (Settlement, error) {
		var err error
		rn, err = l.resv.renew(ctx, r.Key, r.ID, l.hold, l.timeout)
		return Settlement{}, err
	})
	return rn, err
}

// Hold is how long a reservation stays open unless renewed (Config.Hold).
func (l *Limiter) Hold() time.Duration { return l.hold }

// Keep renews r every third of its hold until stop is called or r is no longer open,
// so the hold ends only when its holder has been gone (or the store unreachable) for
// two thirds of it. stop does not wait for a renewal in flight. Safe for concurrent use.
func (l *Limiter) Keep(r Reservation) (stop func()) {
	if r.ID == "" || l.resv == nil {
		return func() {}
	}
	return keepAlive(l.hold/3, func(ctx context.Context) bool {
		_, err := l.Renew(ctx, r)
		return !errors.Is(err, ErrReservationUnknown)
	})
}

// Charge takes cost (≥ 0) units unconditionally, even past the quota, so that the next
// admissions wait for the debt: for a cost known only after the request was served. It
// needs Reserves(); a store failure loses the charge. Safe for concurrent use.
func (l *Limiter) Charge(ctx context.Context, key string, cost int64) (Settlement, error) {
	if cost < 0 {
		return Settlement{}, fmt.Errorf("charge of %s: %w: got %d", key, ErrInvalidActual, cost)
	}
	if l.resv == nil {
		return Settlement{}, fmt.Errorf("%s store, %s: %w", l.storeName, l.lim.Algorithm, ErrReservationsNotSupported)
	}
	if cost == 0 {
		return Settlement{}, nil
	}
	return l.storeSettle(ctx, key, "charge of", key, func() (Settlement, error) {
		return l.resv.charge(ctx, key, cost, l.timeout)
	})
}

// Cancel settles r at nothing, as Commit otherwise.
func (l *Limiter) Cancel(ctx context.Context, r Reservation) (Settlement, error) {
	return l.settleReservation(ctx, r, -1)
}

// CommitAsync is Commit without waiting: on an AsyncSettler it returns at once and then
// (nil: none) gets Commit's result once, after the Observer, breaker and log heard of
// it, on a store goroutine, so it must not block; elsewhere it is Commit, then then.
// Safe for concurrent use.
func (l *Limiter) CommitAsync(ctx context.Context, r Reservation, actual int64, then func(Settlement, error)) {
	if then == nil {
		then = func(Settlement, error) {}
	}
	if actual < 0 {
		then(Settlement{}, fmt.Errorf("reservation %s: %w: got %d", r.ID, ErrInvalidActual, actual))
		return
	}
	l.settleAsync(ctx, r, actual, then)
}

// CancelAsync is CommitAsync at nothing, as Cancel is Commit's.
func (l *Limiter) CancelAsync(ctx context.Context, r Reservation, then func(Settlement, error)) {
	if then == nil {
		then = func(Settlement, error) {}
	}
	l.settleAsync(ctx, r, -1, then)
}

func (l *Limiter) settleAsync(ctx context.Context, r Reservation, actual int64, then func(Settlement, error)) {
	b, bound := l.resv.(reserverBinding)
	var as AsyncSettler
	if bound {
		as, bound = b.store.(AsyncSettler)
	}
	if r.ID == "" || !bound {
		then(l.settleReservation(ctx, r, actual))
		return
	}
	breaker := l.breakerFor(r.Key)
	if breaker != nil && !breaker.allow() {
		then(Settlement{}, fmt.Errorf("%s store: settle %s: %w", l.storeName, r.ID, ErrCircuitOpen))
		return
	}
	start := l.startCall()
	as.SettleAsync(ctx, r.Key, b.limit, r.ID, actual, l.timeout, func(s Settlement, err error) {
		then(l.settled(ctx, r.Key, breaker, start, s, err))
	})
}

func (l *Limiter) settleReservation(ctx context.Context, r Reservation, actual int64) (Settlement, error) {
	if r.ID == "" {
		return Settlement{}, nil
	}
	if l.resv == nil {
		return Settlement{}, fmt.Errorf("%s store, %s: %w", l.storeName, l.lim.Algorithm, ErrReservationsNotSupported)
	}
	return l.storeSettle(ctx, r.Key, "settle", r.ID, func() (Settlement, error) {
		return l.resv.settle(ctx, r.Key, r.ID, actual, l.timeout)
	})
}

// storeSettle joins verb and name only on error, so that a call allocates nothing for them.
func (l *Limiter) storeSettle(ctx context.Context, key, verb, name string, call func() (Settlement, error)) (Settlement, error) {
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		return Settlement{}, fmt.Errorf("%s store: %s %s: %w", l.storeName, verb, name, ErrCircuitOpen)
	}
	start := l.startCall()
	s, err := call()
	return l.settled(ctx, key, breaker, start, s, err)
}

func (l *Limiter) settled(ctx context.Context, key string, breaker *CircuitBreaker, start time.Time, s Settlement, err error) (Settlement, error) {
	if err != nil && errors.Is(err, ErrReservationUnknown) {
		l.settle(ctx, breaker, start, nil) // the store answered
		return s, err
	}
	if !l.settle(ctx, breaker, start, err) {
		return Settlement{}, fmt.Errorf("%s store: %w", l.storeName, context.Canceled)
	}
	if err != nil {
		err = fmt.Errorf("%s store: %w", l.storeName, err)
		if l.log != nil {
			l.log.failed(ctx, ErrorKind(err), l.shardOf(key), err)
		}
	}
	return s, err
}

func (l *Limiter) startCall() time.Time {
	if l.observer != nil {
		return time.Now()
	}
	return time.Time{}
}

func (l *Limiter) now() time.Time {
	if m, ok := l.store.(*memoryBinding); ok && m.store.now != nil {
		return m.store.now()
	}
	return time.Now()
}
