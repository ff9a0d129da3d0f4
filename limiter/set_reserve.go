package limiter

import (
	"context"
	"fmt"
	"time"
)

// SetReserver is a SetStore that can also hold, in a set it admits, a
// reservation on chosen parts: tokens per minute and per month settled at
// the response's count beside requests per minute that keep their 1.
// Implementations are safe for concurrent use.
type SetReserver interface {
	SetStore
	Reserver
	// ReserveSet decides parts as DecideSet does in ModeConsume and, when
	// every part admits, opens in the same atomic step, beside each part i
	// whose holds[i].ID is set, that reservation (estimate the part's Cost;
	// holds[i].Estimate unread): Settle, Renew and expiry of (parts[i].Key,
	// parts[i].Limit, holds[i].ID) then act on it as on a Reserve's.
	// len(holds) == len(parts). A set refused or failed opens none (a
	// cross-slot set gives back what earlier slots took and opened).
	ReserveSet(ctx context.Context, parts []Part, holds []ReserveRequest, timeout time.Duration, out []Decision) (allowed bool, err error)
}

// Reserves reports whether Reserve can hold reservations: the set's store
// is a SetReserver (each held Limiter must also Reserves()).
func (s *Set) Reserves() bool { return s.reserver != nil }

// Limiter returns the set's Limiter i, in NewSet's order.
func (s *Set) Limiter(i int) *Limiter { return s.limiters[i] }

// Reserve is AllowN that also holds the cost of each Limiter i with
// held[i] in a reservation (Limiter.Reserve's, estimate costs[i]), opened
// with the take when the set is admitted and written to res[i] (len(res) ≥
// Len; ID "" for the others, and for all when the set is refused or
// decided by a fail policy). Each is settled on its own Limiter like any
// reservation, so a charge after the response never refuses and a
// give-back returns to the window the estimate was taken from. One id
// names the request's reservations on every Limiter, each on its own key.
// It needs a SetReserver store and Limiters that Reserves(); otherwise it
// is an error, with nothing decided.
func (s *Set) Reserve(ctx context.Context, keys []string, costs []int64, held []bool, out []Decision, res []Reservation) (bool, error) {
	n := len(s.limiters)
	if len(held) != n || len(res) < n {
		return false, fmt.Errorf("limiter: set of %d: %d held, %d reservations", n, len(held), len(res))
	}
	clear(res[:n])
	var hbuf [8]ReserveRequest
	holds := hbuf[:0]
	if n > len(hbuf) {
		holds = make([]ReserveRequest, 0, n)
	}
	id := ""
	for i, l := range s.limiters {
		if !held[i] {
			holds = append(holds, ReserveRequest{})
			continue
		}
		if l.resv == nil || s.reserver == nil {
			return false, fmt.Errorf("limiter: set: part %d: %s store, %s: %w", i, l.storeName, l.lim.Algorithm, ErrReservationsNotSupported)
		}
		if id == "" {
			var err error
			if id, err = NewReservationID(); err != nil {
				return false, err
			}
		}
		holds = append(holds, ReserveRequest{ID: id, Estimate: costAt(costs, i), Hold: l.hold, OnExpiry: l.onExpiry})
	}
	if id == "" {
		holds = nil
	}
	ok, err := s.decide(ctx, ModeConsume, keys, costs, holds, out)
	if !ok || err != nil || holds == nil {
		return ok, err
	}
	for i, h := range holds {
		if h.ID != "" {
			res[i] = Reservation{ID: id, Key: keys[i], Estimate: h.Estimate, Expires: s.limiters[i].now().Add(h.Hold)}
		}
	}
	return true, nil
}

// ReserveSet implements SetReserver: DecideSet's step, the reservations
// recorded in the parts' books under the same shard locks.
func (s *MemoryStore) ReserveSet(ctx context.Context, parts []Part, holds []ReserveRequest, timeout time.Duration, out []Decision) (bool, error) {
	if len(holds) != len(parts) {
		return false, fmt.Errorf("memory store: %d holds for %d parts", len(holds), len(parts))
	}
	return s.decideParts(ctx, parts, ModeConsume, holds, out)
}

// openRecord records reservation r of estimate units, taken at mark, in
// key's book under cl, after settling the book's records past their hold
// by their policy. The caller holds sh's lock.
func (sh *memShard) openRecord(h uint64, key string, cl *compiledLimit, now int64, r ReserveRequest, estimate, mark int64) {
	bk := bookKey{cl.alg, key}
	book := sh.books[bk]
	if book != nil {
		sh.expireBook(bk, book, h, key, cl, now)
		if len(book.open) == 0 { // expireBook dropped it
			book = nil
		}
	}
	if book == nil {
		if sh.books == nil {
			sh.books = make(map[bookKey]*reserveBook)
		}
		book = &reserveBook{open: make(map[string]openReservation, 1)}
		sh.books[bk] = book
	}
	hold := r.Hold
	if hold <= 0 {
		hold = DefaultHold
	}
	rec := openReservation{estimate: estimate, expires: now + us(hold), mark: mark, hold: us(hold), refund: r.OnExpiry == ExpireRefund}
	if len(book.open) == 0 || rec.expires < book.next {
		book.next = rec.expires
	}
	book.open[r.ID] = rec
}

// takeMark is the mark a take at now on e leaves for a refund to find: the
// window start of both window algorithms, the take's time in a log.
func takeMark(e *memSlot, cl *compiledLimit, now int64) int64 {
	if cl.alg == slidingLogIndex {
		return now
	}
	return e.stamp
}
