package limiter

import (
	"context"
	"fmt"
	"math"
	"time"
)

type bookKey struct {
	alg algorithmIndex
	key string
}

// reserveBook is a key's open reservations, kept in its shard beside its
// slot so that a settle changes both under one lock.
type reserveBook struct {
	open map[string]openReservation
	next int64 // no record expires before (µs)
}

// openReservation's mark finds the units a refund gives back. Past its hold it stays
// one hold more as a tombstone (gone), so that a late settle still charges what the
// expiry did not.
type openReservation struct {
	estimate int64
	expires  int64 // µs
	mark     int64
	hold     int64 // µs: what a renewal extends it by, and a tombstone's life
	refund   bool  // ExpireRefund
	gone     bool  // expired: a tombstone
}

// Reserve implements Reserver. Like Decide it never waits.
func (s *MemoryStore) Reserve(ctx context.Context, key string, lim Limit, r ReserveRequest, _ time.Duration) (Decision, error) {
	if err := lim.Validate(); err != nil {
		return Decision{}, fmt.Errorf("memory store: limit: %w", err)
	}
	if err := lim.CheckCost(r.Estimate); err != nil {
		return Decision{Limit: lim.Quota()}, fmt.Errorf("memory store: %w", err)
	}
	b := memoryBinding{store: s, limit: compileLimit(lim)}
	return b.reserve(ctx, key, r, 0)
}

// Settle implements Reserver. Like Decide it never waits.
func (s *MemoryStore) Settle(ctx context.Context, key string, lim Limit, id string, actual int64, _ time.Duration) (Settlement, error) {
	if err := lim.Validate(); err != nil {
		return Settlement{}, fmt.Errorf("memory store: limit: %w", err)
	}
	b := memoryBinding{store: s, limit: compileLimit(lim)}
	return b.settle(ctx, key, id, actual, 0)
}

// Charge implements Reserver. Like Decide it never waits.
func (s *MemoryStore) Charge(ctx context.Context, key string, lim Limit, cost int64, _ time.Duration) (Settlement, error) {
	if err := lim.Validate(); err != nil {
		return Settlement{}, fmt.Errorf("memory store: limit: %w", err)
	}
	if cost < 1 {
		return Settlement{}, fmt.Errorf("memory store: charge of %s: %w: got %d", key, ErrInvalidActual, cost)
	}
	b := memoryBinding{store: s, limit: compileLimit(lim)}
	return b.charge(ctx, key, cost, 0)
}

// Renew implements Reserver. Like Decide it never waits.
func (s *MemoryStore) Renew(ctx context.Context, key string, lim Limit, id string, hold time.Duration, _ time.Duration) (Renewal, error) {
	if err := lim.Validate(); err != nil {
		return Renewal{}, fmt.Errorf("memory store: limit: %w", err)
	}
	if hold <= 0 {
		hold = DefaultHold
	}
	b := memoryBinding{store: s, limit: compileLimit(lim)}
	return b.renew(ctx, key, id, hold, 0)
}

type keyCall struct {
	sh      *memShard
	h       uint64
	bk      bookKey
	now     int64
	book    *reserveBook // nil: no reservation open
	expired int64
}

// lock locks key's shard; the caller unlocks c.sh.mu.
func (b *memoryBinding) lock(key string) keyCall {
	s, cl := b.store, &b.limit
	h := s.hash(key)
	c := keyCall{sh: &s.shards[h&s.mask], h: h, bk: bookKey{cl.alg, key}}
	c.sh.mu.Lock()
	c.now = s.nowUS()
	if c.book = c.sh.books[c.bk]; c.book != nil {
		c.expired = c.sh.expireBook(c.bk, c.book, h, key, cl, c.now)
		if len(c.book.open) == 0 { // expireBook dropped it
			c.book = nil
		}
	}
	return c
}

func (b *memoryBinding) reserve(_ context.Context, key string, r ReserveRequest, _ time.Duration) (Decision, error) {
	if r.ID == "" {
		return Decision{Limit: b.limit.quota}, fmt.Errorf("memory store: reservation id is empty")
	}
	s, cl := b.store, &b.limit
	c := b.lock(key)
	defer c.sh.mu.Unlock()
	sh, now := c.sh, c.now
	if _, taken := c.book.find(r.ID); taken {
		return Decision{Limit: cl.quota}, fmt.Errorf("memory store: reservation id %s is already open", r.ID)
	}
	i := sh.find(c.h, cl.alg, key)
	fresh := i < 0
	var e *memSlot
	if fresh {
		e = sh.insert(c.h, cl.alg, key, now, s.perShard)
	} else {
		e = sh.slot(i)
	}
	d := e.apply(now, fresh, key, cl, r.Estimate, false)
	if !d.Allowed {
		return d, nil
	}
	sh.openRecord(c.h, key, cl, now, r, r.Estimate, takeMark(e, cl, now))
	return d, nil
}

func (b *memoryBinding) settle(_ context.Context, key string, id string, actual int64, _ time.Duration) (Settlement, error) {
	c := b.lock(key)
	defer c.sh.mu.Unlock()
	st := Settlement{Expired: c.expired}
	rec, ok := c.book.find(id)
	if !ok {
		return st, fmt.Errorf("memory store: reservation %s of %s: %w", id, key, ErrReservationUnknown)
	}
	delete(c.book.open, id)
	if len(c.book.open) == 0 {
		delete(c.sh.books, c.bk)
	}
	if rec.gone {
		st.settledLate(rec.estimate, actual, rec.refund, b.limit.quota)
		c.sh.adjust(c.h, key, &b.limit, c.now, st.Charged, c.now)
		return st, fmt.Errorf("memory store: reservation %s of %s: %w", id, key, ErrReservationExpired)
	}
	st.settled(rec.estimate, actual)
	c.sh.adjust(c.h, key, &b.limit, c.now, st.Charged-st.Refunded, rec.mark)
	return st, nil
}

func (b *memoryBinding) renew(_ context.Context, key string, id string, hold time.Duration, _ time.Duration) (Renewal, error) {
	c := b.lock(key)
	defer c.sh.mu.Unlock()
	rec, ok := c.book.find(id)
	if !ok || rec.gone {
		return Renewal{Expired: c.expired}, fmt.Errorf("memory store: reservation %s of %s: %w", id, key, ErrReservationUnknown)
	}
	rec.expires, rec.hold = c.now+us(hold), us(hold)
	c.book.open[id] = rec
	c.book.next = min(c.book.next, rec.expires)
	return Renewal{Expires: time.UnixMicro(rec.expires), Expired: c.expired}, nil
}

// charge settles a reservation of 0 at cost: an excess, so no mark is needed.
func (b *memoryBinding) charge(_ context.Context, key string, cost int64, _ time.Duration) (Settlement, error) {
	c := b.lock(key)
	defer c.sh.mu.Unlock()
	st := Settlement{Expired: c.expired}
	st.settled(0, cost)
	c.sh.adjust(c.h, key, &b.limit, c.now, st.Charged, c.now)
	return st, nil
}

func (bk *reserveBook) find(id string) (openReservation, bool) {
	if bk == nil {
		return openReservation{}, false
	}
	rec, ok := bk.open[id]
	return rec, ok
}

// settledLate charges the excess over what the expiry took, at most quota; an expiry
// that took more gives nothing back, its window being past.
func (st *Settlement) settledLate(estimate, actual int64, refunded bool, quota int64) {
	st.Estimate, st.Actual, st.Late = estimate, max(actual, 0), true
	took := estimate
	if refunded {
		took = 0
	}
	st.Charged = min(max(st.Actual-took, 0), quota)
}

// settled fills in what settling estimate at actual (< 0: cancel) does.
func (st *Settlement) settled(estimate, actual int64) {
	st.Estimate, st.Actual = estimate, max(actual, 0)
	st.Refunded = max(estimate-st.Actual, 0)
	st.Charged = max(st.Actual-estimate, 0)
}

// expireBook turns records past their hold into tombstones and drops the tombstones past theirs.
func (sh *memShard) expireBook(bk bookKey, book *reserveBook, h uint64, key string, cl *compiledLimit, now int64) int64 {
	if now < book.next {
		return 0
	}
	var n int64
	book.next = math.MaxInt64
	for id, rec := range book.open {
		switch {
		case rec.expires > now:
		case rec.gone:
			delete(book.open, id)
			continue
		default:
			n++
			if rec.refund {
				sh.adjust(h, key, cl, now, -rec.estimate, rec.mark)
			}
			rec.gone, rec.expires = true, now+rec.hold
			book.open[id] = rec
		}
		book.next = min(book.next, rec.expires)
	}
	if len(book.open) == 0 {
		delete(sh.books, bk)
	}
	return n
}

// sweepBooks drops records that no call came back for within their hold
// and a tombstone's time after it.
func (sh *memShard) sweepBooks(now int64) {
	for bk, book := range sh.books {
		for id, rec := range book.open {
			if rec.gone && rec.expires <= now || rec.expires+rec.hold <= now {
				delete(book.open, id)
			}
		}
		if len(book.open) == 0 {
			delete(sh.books, bk)
		}
	}
}

// adjust takes delta more units from key (< 0: gives back) once a peek brought its
// state to now (<algorithm>Adjust); a refund to a key not held does nothing.
func (sh *memShard) adjust(h uint64, key string, cl *compiledLimit, now, delta, mark int64) {
	if delta == 0 {
		return
	}
	i := sh.find(h, cl.alg, key)
	if i < 0 && delta < 0 {
		return
	}
	var e *memSlot
	if i < 0 {
		e = sh.insert(h, cl.alg, key, now, math.MaxInt)
	} else {
		e = sh.slot(i)
	}
	e.apply(now, i < 0, key, cl, 1, true)
	delta = min(max(delta, -2*cl.quota), 2*cl.quota) // no effect is larger; no product overflows
	switch cl.alg {
	case fixedWindowIndex:
		e.fixedWindowAdjust(cl, delta, mark)
	case slidingWindowIndex:
		e.slidingWindowAdjust(cl, delta, mark)
	case slidingLogIndex:
		e.slidingLogAdjust(now, cl, delta, mark)
	case tokenBucketIndex:
		e.tokenBucketAdjust(now, cl, delta)
	case leakyBucketIndex:
		e.leakyBucketAdjust(now, cl, delta)
	default:
		e.gcraAdjust(now, cl, delta)
	}
}
