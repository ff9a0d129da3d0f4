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
// reservation: give back what was reserved beyond the actual cost, or take
// the excess. All six algorithms can (see the package doc for what a
// refund means to each); an unknown name cannot.
func SupportsReservations(a Algorithm) bool { return SpecOf(a) != nil }

// reserveBinding is a store bound to one Limit that holds reservations.
type reserveBinding interface {
	reserve(ctx context.Context, key string, r ReserveRequest, timeout time.Duration) (Decision, error)
	settle(ctx context.Context, key string, id string, actual int64, timeout time.Duration) (Settlement, error)
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

// Reserves reports whether Reserve can hold reservations: the store is a
// Reserver and the algorithm supports them.
func (l *Limiter) Reserves() bool { return l.resv != nil }

// Reserve takes estimate units from key's budget as AllowN does and, when
// they are admitted, opens a reservation for Config.Hold that Commit or
// Cancel settles. When the store fails, the Decision is the fail policy's
// and the Reservation's ID is "": settling it does nothing. A rejected
// request gets a Reservation with ID "" too.
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
	if !d.Allowed {
		return r, d, nil
	}
	d.Admitted = estimate
	r.ID, r.Expires = id, l.now().Add(l.hold)
	if l.local != nil {
		d = l.local.afterStore(ctx, key, l.lim, ModeConsume, d)
	}
	return r, d, nil
}

// Commit settles r at its actual cost (≥ 0): what was reserved beyond it is
// given back, an excess is taken even past the quota. A Reservation with ID
// "" settles as nothing; one settled before, or expired, returns
// ErrReservationUnknown, wrapped, and changes nothing. A store failure
// leaves r open until it expires by Config.OnExpiry.
func (l *Limiter) Commit(ctx context.Context, r Reservation, actual int64) (Settlement, error) {
	if actual < 0 {
		return Settlement{}, fmt.Errorf("reservation %s: %w: got %d", r.ID, ErrInvalidActual, actual)
	}
	return l.settleReservation(ctx, r, actual)
}

// Cancel settles r at nothing: the whole estimate is given back. As Commit
// for an ID "", twice, or after expiry.
func (l *Limiter) Cancel(ctx context.Context, r Reservation) (Settlement, error) {
	return l.settleReservation(ctx, r, -1)
}

func (l *Limiter) settleReservation(ctx context.Context, r Reservation, actual int64) (Settlement, error) {
	if r.ID == "" {
		return Settlement{}, nil
	}
	if l.resv == nil {
		return Settlement{}, fmt.Errorf("%s store, %s: %w", l.storeName, l.lim.Algorithm, ErrReservationsNotSupported)
	}
	breaker := l.breakerFor(r.Key)
	if breaker != nil && !breaker.allow() {
		return Settlement{}, fmt.Errorf("%s store: settle %s: %w", l.storeName, r.ID, ErrCircuitOpen)
	}
	start := l.startCall()
	s, err := l.resv.settle(ctx, r.Key, r.ID, actual, l.timeout)
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
			l.log.failed(ctx, ErrorKind(err), l.shardOf(r.Key), err)
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
