package redisstore

import (
		"context"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// TestOneBatchOfReservationCallsAnswersAsTheCallsOneByOne sends reserves
// and settles on two keys under two limits (so two sets of shared
// numbers for reserves and two for settles), a settle of an unknown id and
// a second settle of the same id, in one batch script call, and requires
// each answer to be what the calls would have answered one after another.
func TestOneBatchOfReservationCallsAnswersAsTheCallsOneByOne(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	a := limiter.FixedWindow
	spec := limiter.SpecOf(a)
	lims := []limiter.Limit{{Algorithm: a, Rate: 10, Period: time.Hour}, {Algorithm: a, Rate: 7, Period: time.Hour}}
	keep := 2 * time.Hour.Milliseconds()
	op := func(kind int64, key string, lim limiter.Limit, cost int64, id string, extra ...int64) *request {
		return store.reservationOp(spec, key, lim, kind, cost, id, extra...)
	}
	hold := time.Minute.Microseconds()
	ops := []*request{
		op(kindReserve, "a", lims[0], 6, "a1", hold, 0, keep),
		op(kindReserve, "b", lims[1], 5, "b1", hold, 1, keep),
		op(kindReserve, "a", lims[0], 5, "a2", hold, 0, keep), // 6 + 5 > 10: refused
		op(kindSettle, "a", lims[0], 1, "a1", 2, 10),          // gives 4 back
		op(kindReserve, "a", lims[0], 5, "a3", hold, 0, keep), // 2 + 5 fits
		op(kindSettle, "b", lims[1], 1, "b1", 7, 7),           // takes 2 more
		op(kindSettle, "b", lims[1], 1, "b1", 7, 7),           // settled already
		op(kindSettle, "a", lims[0], 1, "nobody", 0, 10),
	}
	sd := flushTogether(t, store, ops)
	if n := len(sd.enc.sets); n != 4 {
		t.Errorf("%d sets of shared numbers, want 4", n)
	}
	want := [][]int64{
		{6, 4}, {5, 2}, {0, 4}, {1, 6}, {5, 3}, {1, 5}, {0, 0}, {0, 0},
	}
	for i, o := range ops {
		if o.err != nil {
			t.Fatalf("call %d: %v", i, o.err)
		}
		if got := o.out[:2]; got[0] != want[i][0] || got[1] != want[i][1] {
			t.Errorf("call %d (kind %d, id %s): %v, want %v", i, o.kind, o.id, o.out, want[i])
		}
	}
	if d, err := store.DecideMode(ctx, "b", lims[1], 1, limiter.ModePeek, time.Second); err != nil || d.Allowed {
		t.Fatalf("b after 5 reserved and 7 committed of 7: %+v, %v; want refused", d, err)
	}
	if d, err := store.DecideMode(ctx, "a", lims[0], 3, limiter.ModePeek, time.Second); err != nil || !d.Allowed || d.Remaining != 3 {
		t.Fatalf("a after 2 committed and 5 reserved of 10: %+v, %v; want 3 remaining", d, err)
	}
}

// TestOneBatchOfLeaseCallsAnswersAsTheCallsOneByOne sends acquires and
// releases on two keys under two limits in one batch script call.
func TestOneBatchOfLeaseCallsAnswersAsTheCallsOneByOne(t *testing.T) {
	_, store := singleStore(t)
	ttl := time.Minute.Microseconds()
	op := func(kind int64, key, id string, limit int64) *request {
		return store.leaseOp(key, kind, id, limit, ttl)
	}
	ops := []*request{
		op(kindAcquire, "a", "a1", 1),
		op(kindAcquire, "b", "b1", 2),
		op(kindAcquire, "a", "a2", 1), // a holds its one lease: refused
		op(kindAcquire, "b", "b2", 2),
		op(kindRelease, "a", "a1", 0),
		op(kindRelease, "a", "a1", 0), // released already
		op(kindAcquire, "a", "a3", 1),
	}
	flushTogether(t, store, ops)
	want := [][2]int64{{1, 1}, {1, 1}, {0, 1}, {1, 2}, {1, 0}, {0, 0}, {1, 1}}
	for i, o := range ops {
		if o.err != nil {
			t.Fatalf("call %d: %v", i, o.err)
		}
		if o.out[0] != want[i][0] || o.out[1] != want[i][1] {
			t.Errorf("call %d (kind %d, id %s): %v, want %v", i, o.kind, o.id, o.out, want[i])
		}
	}
}

// TestABatchedChargeIsTakenOnASpentBudget sends a charge (the settle of
// id "") between a reserve that spends the budget and its cancel, in one
// batch script call: the charge is taken past the limit and stays when the
// reservation is given back.
func TestABatchedChargeIsTakenOnASpentBudget(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	a := limiter.FixedWindow
	spec := limiter.SpecOf(a)
	lim := limiter.Limit{Algorithm: a, Rate: 10, Period: time.Hour}
	op := func(kind int64, cost int64, id string, extra ...int64) *request {
		return store.reservationOp(spec, "k", lim, kind, cost, id, extra...)
	}
	ops := []*request{
		op(kindReserve, 10, "r1", time.Minute.Microseconds(), 0, 2*time.Hour.Milliseconds()),
		op(kindSettle, 1, "", 5, 10),    // a charge of 5 on the spent budget
		op(kindSettle, 1, "r1", -1, 10), // the 10 reserved given back
	}
	flushTogether(t, store, ops)
	want := [][2]int64{{10, 0}, {1, 0}, {1, 10}}
	for i, o := range ops {
		if o.err != nil {
			t.Fatalf("call %d: %v", i, o.err)
		}
		if o.out[0] != want[i][0] || o.out[1] != want[i][1] {
			t.Errorf("call %d (kind %d, id %q): %v, want %v", i, o.kind, o.id, o.out, want[i])
		}
	}
	if d, err := store.DecideMode(ctx, "k", lim, 5, limiter.ModePeek, time.Second); err != nil || !d.Allowed || d.Remaining != 5 {
		t.Fatalf("after a charge of 5 of 10 in the batch: %+v, %v; want 5 remaining", d, err)
	}
}

// flushTogether sends reqs as one batch of a sender, as a lane would, and
// requires each to have its answer.
func flushTogether(t *testing.T, store *Store, reqs []*request) *sender {
	t.Helper()
	for _, r := range reqs {
		r.ctx = context.Background()
		r.answered.Store(0)
	}
	sd := newSender(store.batch)
	sd.flush(append([]*request(nil), reqs...))
	for i, r := range reqs {
		select {
		case <-r.done:
		default:
			t.Fatalf("call %d: no answer after its batch", i)
		}
	}
	return sd
}
