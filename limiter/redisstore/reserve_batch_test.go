package redisstore

import (
	"context"
	"errors"
	"sync/atomic"
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
		if r.done == nil {
			r.done = make(chan struct{}, 1)
		}
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

// TestADecisionAndAReserveShareOneRoundTrip flushes a decision and a
// reserve on the same key as one batch: one pipeline of two script calls
// (one per family), each answered as alone.
func TestADecisionAndAReserveShareOneRoundTrip(t *testing.T) {
	_, store := singleStore(t)
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 10, Period: time.Hour}
	spec := limiter.SpecOf(lim.Algorithm)
	d := newRequest(store, "k", lim, 3, limiter.ModeConsume)
	r := store.reservationOp(spec, "k", lim, kindReserve, 4, "r1", time.Minute.Microseconds(), 0, 2*time.Hour.Milliseconds())
	sd := flushTogether(t, store, []*request{d, r})
	if len(sd.groups) != 2 {
		t.Fatalf("a decision and a reserve in %d script calls, want 2 in one pipeline", len(sd.groups))
	}
	if d.err != nil || !d.d.Allowed || d.d.Remaining != 7 {
		t.Fatalf("decision of 3 of 10: %+v, %v; want allowed, 7 remaining", d.d, d.err)
	}
	if r.err != nil || r.out[0] != 4 || r.out[1] != 3 {
		t.Fatalf("reserve of 4 after 3 of 10: %v, %v; want 4 admitted, 3 remaining", r.out[:r.nout], r.err)
	}
}

// TestSettleAsyncAnswersAsSettle settles a reservation without waiting:
// then hears what Settle would have said, the budget shows the refund, and
// a second settle of the same id hears it is unknown.
func TestSettleAsyncAnswersAsSettle(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Hour}
	if d, err := store.Reserve(ctx, "k", lim, limiter.ReserveRequest{ID: "r1", Estimate: 8}, time.Second); err != nil || !d.Allowed {
		t.Fatalf("reserve 8 of 10: %+v, %v", d, err)
	}
	type answer struct {
		st  limiter.Settlement
		err error
	}
	got := make(chan answer, 2)
	then := func(st limiter.Settlement, err error) { got <- answer{st, err} }
	store.SettleAsync(ctx, "k", lim, "r1", 3, time.Second, then)
	a := <-got
	if a.err != nil || a.st.Estimate != 8 || a.st.Actual != 3 || a.st.Refunded != 5 {
		t.Fatalf("settle of 8 at 3: %+v, %v; want 5 refunded", a.st, a.err)
	}
	if d, err := store.DecideMode(ctx, "k", lim, 8, limiter.ModePeek, time.Second); err != nil || d.Allowed || d.Remaining != 7 {
		t.Fatalf("after 3 committed of 10, a peek at 8: %+v, %v; want refused, 7 remaining", d, err)
	}
	store.SettleAsync(ctx, "k", lim, "r1", 3, time.Second, then)
	if a := <-got; !errors.Is(a.err, limiter.ErrReservationUnknown) {
		t.Fatalf("second settle: %+v, %v; want ErrReservationUnknown", a.st, a.err)
	}
}

// TestAnAsyncSettleThatFailsIsReported settles through CommitAsync while
// Redis is down: the caller returns, and the failure reaches then and the
// Limiter's Observer, as a failed Commit's does.
func TestAnAsyncSettleThatFailsIsReported(t *testing.T) {
	srv, store := singleStore(t)
	obs := &errorCounter{}
	l, err := limiter.New(limiter.Config{Limit: limiter.Limit{Algorithm: limiter.GCRA, Rate: 10, Period: time.Hour}, Store: store,
		Observer: obs, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, d, err := l.Reserve(ctx, "k", 2)
	if err != nil || !d.Allowed {
		t.Fatalf("reserve: %+v, %v", d, err)
	}
	srv.Stop()
	got := make(chan error, 1)
	l.CommitAsync(ctx, r, 1, func(_ limiter.Settlement, err error) { got <- err })
	if err := <-got; err == nil {
		t.Fatal("a commit on a stopped Redis succeeded")
	}
	if obs.errs.Load() == 0 {
		t.Fatal("the Observer was not told of the failed commit")
	}
}

// TestReleaseLeaseAsyncAnswersAsReleaseLease releases a lease without
// waiting, then again: held, then unknown.
func TestReleaseLeaseAsyncAnswersAsReleaseLease(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	lim := limiter.LeaseLimit{Limit: 1, TTL: time.Minute}
	if d, err := store.AcquireLease(ctx, "k", lim, "l1", time.Second); err != nil || !d.Allowed {
		t.Fatalf("acquire: %+v, %v", d, err)
	}
	got := make(chan error, 2)
	store.ReleaseLeaseAsync(ctx, "k", "l1", time.Second, func(_ int64, err error) { got <- err })
	if err := <-got; err != nil {
		t.Fatalf("release: %v", err)
	}
	store.ReleaseLeaseAsync(ctx, "k", "l1", time.Second, func(_ int64, err error) { got <- err })
	if err := <-got; !errors.Is(err, limiter.ErrLeaseUnknown) {
		t.Fatalf("second release: %v, want ErrLeaseUnknown", err)
	}
	if d, err := store.AcquireLease(ctx, "k", lim, "l2", time.Second); err != nil || !d.Allowed {
		t.Fatalf("acquire after the release: %+v, %v", d, err)
	}
}

// errorCounter is a limiter.Observer counting the failed store calls.
type errorCounter struct{ errs atomic.Int64 }

func (c *errorCounter) ObserveStore(_ context.Context, _ string, _ time.Duration, err error) {
	if err != nil {
		c.errs.Add(1)
	}
}
