package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrReservationsNotSupported is returned, wrapped, by Reserve, Commit and
// Cancel when the store is no Reserver or the algorithm cannot settle.
var ErrReservationsNotSupported = errors.New("store or algorithm does not support reservations")

// ErrInvalidActual is returned, wrapped, by Commit for an actual below 0.
var ErrInvalidActual = errors.New("actual cost must be at least 0")

// SupportsReservations reports whether a's arithmetic can settle a
// reservation (all six can; the package doc says how); unknown names cannot.
func SupportsReservations(a Algorithm) bool { return SpecOf(a) != nil }

// reserveBinding is a store bound to one Limit that holds reservations.
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

// Reserves reports whether Reserve can hold reservations: the store is a
// Reserver and the algorithm supports them.
func (l *Limiter) Reserves() bool { return l.resv != nil }

// Reserve takes estimate units from key's budget as AllowN does and, when
// admitted, opens a reservation for Config.Hold. A rejection, or the fail
// policy's decision, has a Reservation with ID "": settling it does nothing.
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

// Commit settles r at its actual cost (≥ 0), giving back or taking the
// difference; twice it returns
// ErrReservationUnknown, wrapped. After r expired it returns
// ErrReservationExpired, wrapped, beside a Settlement whose Late and
// Charged say what the actual cost took beyond what the expiry did. A
// store failure leaves r open until it expires by OnExpiry.
func (l *Limiter) Commit(ctx context.Context, r Reservation, actual int64) (Settlement, error) {
	if actual < 0 {
		return Settlement{}, fmt.Errorf("reservation %s: %w: got %d", r.ID, ErrInvalidActual, actual)
	}
	return l.settleReservation(ctx, r, actual)
}

// Renew extends r's hold to Config.Hold from now, so that a request still
// being served keeps its reservation; ErrReservationUnknown, wrapped, when
// r is no longer open (settled, or expired already). ID "" renews nothing.
// Keep calls it on a schedule. Safe for concurrent use.
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

// Keep renews r every third of its hold until the returned stop is called
// (the holder's request is over) or r is found no longer open; a failed
// renewal is tried again at the next tick, so the hold ends only when its
// holder has been gone (or the store unreachable) for two thirds of it.
// Renewals of many requests travel together through the store's batch.
// stop does not wait for a renewal in flight: one that lands after the
// settle finds nothing open. Safe for concurrent use.
func (l *Limiter) Keep(r Reservation) (stop func()) {
	if r.ID == "" || l.resv == nil {
		return func() {}
	}
	return keepAlive(l.hold/3, func(ctx context.Context) bool {
		_, err := l.Renew(ctx, r)
		return !errors.Is(err, ErrReservationUnknown)
	})
}

// Charge takes cost (≥ 0) units from key unconditionally, even past the
// quota, so that the next admissions wait for the debt: the settle of a
// reservation of 0 at cost, in one atomic store call that opens none. It
// suits a cost known only after the request was served, whatever the
// budget then holds. Its Settlement has Actual and Charged = cost. It needs
// Reserves(), else ErrReservationsNotSupported, wrapped; a store failure
// loses the charge and is returned. Safe for concurrent use.
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

// CommitAsync is Commit for a caller that does not wait for the answer
// (a proxy settling after its response): on a store that settles without
// waiting (an AsyncSettler, such as the Redis store) the settle joins the
// store's next batch and CommitAsync returns at once. then (nil: none)
// gets what Commit would have returned, once, after the Observer, the
// breaker and the failure log were told of the call as Commit tells them,
// so that a lost settle is counted and logged, never silent. It runs on a
// goroutine of the store's and must not block; on other stores CommitAsync
// is Commit and then runs on the caller's goroutine. Safe for concurrent use.
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

// storeSettle makes a settling call on key through its breaker, observed and
// logged as the store's other calls are; verb and name say what it was in
// errors, joined only then so that a call allocates nothing for them.
func (l *Limiter) storeSettle(ctx context.Context, key, verb, name string, call func() (Settlement, error)) (Settlement, error) {
	breaker := l.breakerFor(key)
	if breaker != nil && !breaker.allow() {
		return Settlement{}, fmt.Errorf("%s store: %s %s: %w", l.storeName, verb, name, ErrCircuitOpen)
	}
	start := l.startCall()
	s, err := call()
	return l.settled(ctx, key, breaker, start, s, err)
}

// settled tells the Observer, the breaker and the log how a settling
// call on key that started at start ended.
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
