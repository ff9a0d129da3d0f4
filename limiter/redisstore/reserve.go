package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// reserveScripts are an algorithm's reserve and settle scripts and their batch (reserve_batch.go).
type reserveScripts struct {
	reserve, settle, batch, renew script
	ops                           opScripts
}

// bookSuffix follows the base key in its reservation book's key.
const bookSuffix = ":resv"

// Kinds of reservation call in a batch (lua/reservations_batch.lua).
const (
	kindReserve = 0
	kindSettle  = 1
	kindRenew   = 2
)

// loadReserveScripts returns a pointer, so that a call copies nothing.
var loadReserveScripts = sync.OnceValues(func() (*[limiter.NumAlgorithms]reserveScripts, error) {
	all := new([limiter.NumAlgorithms]reserveScripts)
	for _, spec := range limiter.AlgorithmSpecs() {
		sc := &all[spec.Index()]
		if err := readGenerated(spec.Algorithm(), reserveKinds[:], &sc.reserve, &sc.settle, &sc.batch, &sc.renew); err != nil {
			return nil, fmt.Errorf("reservation %w", err)
		}
		sc.ops = opScripts{single: [3]*script{kindReserve: &sc.reserve, kindSettle: &sc.settle, kindRenew: &sc.renew}, batch: &sc.batch}
	}
	return all, nil
})

// Reserve implements limiter.Reserver: the decision of r.Estimate and the record
// in one script call on Redis's clock. Safe for concurrent use.
func (s *Store) Reserve(ctx context.Context, key string, lim limiter.Limit, r limiter.ReserveRequest, timeout time.Duration) (limiter.Decision, error) {
	spec := limiter.SpecOf(lim.Algorithm)
	if err := checkCall(spec, lim, r.Estimate); err != nil {
		return limiter.Decision{}, err
	}
	if r.ID == "" {
		// The book's own field is "": no record has that id.
		return limiter.Decision{}, fmt.Errorf("redis store: reservation id is empty")
	}
	hold := r.Hold
	if hold <= 0 {
		hold = limiter.DefaultHold
	}
	keep := 2 * lim.Window().Milliseconds()
	ints, err := s.reservationCall(ctx, spec, key, lim, timeout, kindReserve, r.Estimate, r.ID,
		hold.Microseconds(), int64(r.OnExpiry), keep)
	if err != nil {
		return limiter.Decision{}, err
	}
	if len(ints) != 5 {
		return limiter.Decision{}, fmt.Errorf("redis %s reserve script: unexpected reply %v", lim.Algorithm, ints)
	}
	d, err := decodeInts(ints)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("redis %s reserve script: %w", lim.Algorithm, err)
	}
	if d.Allowed && d.Admitted != r.Estimate {
		return limiter.Decision{}, fmt.Errorf("redis %s reserve script: %d units admitted for an estimate of %d", lim.Algorithm, d.Admitted, r.Estimate)
	}
	d.Limit = lim.Quota()
	return d, nil
}

// Settle implements limiter.Reserver in one atomic script call, so a reservation
// settles once. Safe for concurrent use.
func (s *Store) Settle(ctx context.Context, key string, lim limiter.Limit, id string, actual int64, timeout time.Duration) (limiter.Settlement, error) {
	spec := limiter.SpecOf(lim.Algorithm)
	if err := checkCall(spec, lim, 1); err != nil {
		return limiter.Settlement{}, err
	}
	if id == "" {
		return limiter.Settlement{}, fmt.Errorf("redis store: reservation %q of %s: %w", id, key, limiter.ErrReservationUnknown)
	}
	ints, err := s.reservationCall(ctx, spec, key, lim, timeout, kindSettle, 1, id, actual, lim.Quota())
	if err != nil {
		return limiter.Settlement{}, err
	}
	return settlement(lim.Algorithm, key, id, actual, ints)
}

// SettleAsync implements limiter.AsyncSettler: Settle's call, queued in the store's next
// batch; then gets its result, or the error that kept it from Redis, once, on a sender
// goroutine (or the caller's), and must not block. Safe for concurrent use.
func (s *Store) SettleAsync(ctx context.Context, key string, lim limiter.Limit, id string, actual int64, timeout time.Duration, then func(limiter.Settlement, error)) {
	spec := limiter.SpecOf(lim.Algorithm)
	if err := checkCall(spec, lim, 1); err != nil {
		then(limiter.Settlement{}, err)
		return
	}
	if id == "" {
		then(limiter.Settlement{}, fmt.Errorf("redis store: reservation %q of %s: %w", id, key, limiter.ErrReservationUnknown))
		return
	}
	r := s.reservationOp(spec, key, lim, kindSettle, 1, id, actual, lim.Quota())
	r.onSettle = then
	s.postOp(ctx, r, timeout, settled)
}

func settled(r *request) {
	s, then := r.s, r.onSettle
	spec := s.algs[r.alg].spec
	book := r.keys[r.nkeys-1]
	var st limiter.Settlement
	err := r.err
	if err != nil {
		err = fmt.Errorf("redis %s settle script for %s: %w", spec.Algorithm(), book, err)
	} else {
		// The error names the book, which names the key.
		st, err = settlement(spec.Algorithm(), book, r.id, r.value, r.out[:r.nout])
	}
	s.recycle(r)
	then(st, err)
}

func settlement(a limiter.Algorithm, key, id string, actual int64, ints []int64) (limiter.Settlement, error) {
	if len(ints) < 4 || ints[0] < 0 || ints[0] > 2 || ints[1] < 0 || ints[2] < 0 || ints[3] < 0 {
		return limiter.Settlement{}, fmt.Errorf("redis %s settle script: unexpected reply %v", a, ints)
	}
	st := limiter.Settlement{Expired: ints[2]}
	switch ints[0] {
	case 0:
		return st, fmt.Errorf("redis store: reservation %s of %s: %w", id, key, limiter.ErrReservationUnknown)
	case 2:
		st.Estimate, st.Actual, st.Charged, st.Late = ints[1], max(actual, 0), ints[3], true
		return st, fmt.Errorf("redis store: reservation %s of %s: %w", id, key, limiter.ErrReservationExpired)
	}
	st.Estimate, st.Actual = ints[1], max(actual, 0)
	st.Refunded, st.Charged = max(st.Estimate-st.Actual, 0), max(st.Actual-st.Estimate, 0)
	return st, nil
}

// Renew implements limiter.Reserver in one script call: the record's expiry moves to
// hold from now on Redis's clock, the book's TTL with it. Safe for concurrent use.
func (s *Store) Renew(ctx context.Context, key string, lim limiter.Limit, id string, hold time.Duration, timeout time.Duration) (limiter.Renewal, error) {
	spec := limiter.SpecOf(lim.Algorithm)
	if err := checkCall(spec, lim, 1); err != nil {
		return limiter.Renewal{}, err
	}
	if id == "" {
		return limiter.Renewal{}, fmt.Errorf("redis store: reservation %q of %s: %w", id, key, limiter.ErrReservationUnknown)
	}
	if hold <= 0 {
		hold = limiter.DefaultHold
	}
	// A reserve's shared numbers (policy unread), so that renewals batch with reserves.
	ints, err := s.reservationCall(ctx, spec, key, lim, timeout, kindRenew, 1, id,
		hold.Microseconds(), 0, 2*lim.Window().Milliseconds())
	if err != nil {
		return limiter.Renewal{}, err
	}
	if len(ints) < 4 || ints[2] < 0 {
		return limiter.Renewal{}, fmt.Errorf("redis %s renew script: unexpected reply %v", lim.Algorithm, ints)
	}
	rn := limiter.Renewal{Expired: ints[2]}
	if ints[0] != 1 {
		return rn, fmt.Errorf("redis store: reservation %s of %s: %w", id, key, limiter.ErrReservationUnknown)
	}
	rn.Expires = time.UnixMicro(ints[3])
	return rn, nil
}

// Charge implements limiter.Reserver as a settle of id "" (the book's own field): cost
// is the excess of a reservation of 0, taken even past the quota. Safe for concurrent use.
func (s *Store) Charge(ctx context.Context, key string, lim limiter.Limit, cost int64, timeout time.Duration) (limiter.Settlement, error) {
	spec := limiter.SpecOf(lim.Algorithm)
	if err := checkCall(spec, lim, 1); err != nil {
		return limiter.Settlement{}, err
	}
	if cost < 1 {
		return limiter.Settlement{}, fmt.Errorf("redis store: charge of %s: %w: got %d", key, limiter.ErrInvalidActual, cost)
	}
	ints, err := s.reservationCall(ctx, spec, key, lim, timeout, kindSettle, 1, "", cost, lim.Quota())
	if err != nil {
		return limiter.Settlement{}, err
	}
	if len(ints) < 3 || ints[0] != 1 || ints[1] != 0 || ints[2] < 0 {
		return limiter.Settlement{}, fmt.Errorf("redis %s settle script: unexpected reply %v to a charge", lim.Algorithm, ints)
	}
	return limiter.Settlement{Actual: cost, Charged: cost, Expired: ints[2]}, nil
}

// reservationCall runs a reservation script alone or batched with the calls in progress.
func (s *Store) reservationCall(ctx context.Context, spec *limiter.AlgorithmSpec, key string, lim limiter.Limit, timeout time.Duration, kind int64, cost int64, id string, extra ...int64) ([]int64, error) {
	r := s.reservationOp(spec, key, lim, kind, cost, id, extra...)
	book := r.keys[r.nkeys-1]
	ints, n, err := s.op(ctx, r, timeout)
	if err != nil {
		name := [...]string{kindReserve: "reserve", kindSettle: "settle", kindRenew: "renew"}[kind]
		return nil, fmt.Errorf("redis %s %s script for %s: %w", lim.Algorithm, name, book, err)
	}
	return ints[:n], nil
}

func (s *Store) reservationOp(spec *limiter.AlgorithmSpec, key string, lim limiter.Limit, kind int64, cost int64, id string, extra ...int64) *request {
	r := s.newOp(famReserve+spec.Index(), kind)
	r.alg = spec.Index()
	base := s.baseKey(key, lim.Algorithm)
	for _, suffix := range s.algs[spec.Index()].keySuffixes {
		r.addKey(base + suffix)
	}
	r.addKey(base + bookSuffix)
	r.nargs = len(argsInto(r.args[:0], spec, key, lim, cost, limiter.ModeConsume))
	r.idAt, r.id = r.nargs, id
	r.addNums(extra...)
	r.limit, r.cost, r.mode = lim.Quota(), cost, limiter.ModeConsume
	// In a batch all but the estimate or actual cost is shared (lua/reservations_batch.lua).
	r.addSet(r.args[:spec.NumParams()]...)
	switch kind {
	case kindReserve:
		r.addSet(extra...)
		r.value = cost
	case kindRenew:
		r.addSet(extra...)
		r.value = 0
	default:
		r.addSet(0, extra[1]) // the actual cost's place, then the quota
		r.value = extra[0]
	}
	s.slotted(r)
	return r
}
