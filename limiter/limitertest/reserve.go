package limitertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// RunReservations runs the reservation table alone against the stores
// newStore returns, which must be limiter.Reservers, for every algorithm.
func RunReservations(t *testing.T, newStore NewStore) {
	t.Helper()
	run := uniqueRun()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			c := &suite{store: newStore(t), alg: a, run: run}
			if _, ok := c.store.(limiter.Reserver); !ok {
				t.Fatalf("%s store is no limiter.Reserver", c.store.Name())
			}
			c.reservations(t)
		})
	}
}

// reservations runs the reservation table for a store that is a
// limiter.Reserver, through Limiters as callers use them.
func (c *suite) reservations(t *testing.T) {
	t.Run("a commit gives back what was reserved beyond the actual cost", c.reserveRefund)
	t.Run("a commit past the estimate takes the excess, even past the quota", c.reserveExcess)
	t.Run("a cancel gives everything back, never more than a fresh key has", c.reserveCancel)
	t.Run("a reservation settles once, on its own key", c.reserveOnce)
	t.Run("an expired reservation is charged or refunded by its policy", c.reserveExpiry)
	t.Run("a charge on a spent budget is taken and waited for", c.chargeSpent)
	t.Run("a reservation kept by its holder outlives its hold", c.reserveRenew)
	t.Run("a settle after expiry charges what the expiry did not take, once, at most a quota", c.reserveLate)
	if _, ok := c.store.(limiter.ReservationCounter); ok {
		t.Run("open reservations are counted until settled or past their hold, changing nothing", c.reserveCount)
	}
}

// dayLimit refills or windows so slowly that nothing changes in a test.
func (c *suite) dayLimit(quota int64) limiter.Limit {
	return limiter.Limit{Algorithm: c.alg, Rate: quota, Period: 24 * time.Hour, Burst: quota}
}

func (c *suite) reserver(t *testing.T, lim limiter.Limit, hold time.Duration, policy limiter.ExpiryPolicy) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(limiter.Config{Limit: lim, Store: c.store, FailPolicy: limiter.FailClosed,
		Timeout: 10 * time.Second, Hold: hold, OnExpiry: policy})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Reserves() {
		t.Fatalf("%s on %s: Reserves() = false", c.alg, c.store.Name())
	}
	return l
}

func mustReserve(t *testing.T, l *limiter.Limiter, key string, estimate int64) limiter.Reservation {
	t.Helper()
	r, d, err := l.Reserve(context.Background(), key, estimate)
	checked(t, "Reserve", d, err)
	if !d.Allowed || r.ID == "" || r.Key != key || r.Estimate != estimate || d.Admitted != estimate {
		t.Fatalf("Reserve(%q, %d) = %+v, %+v; want an admitted reservation", key, estimate, r, d)
	}
	return r
}

func wantRemaining(t *testing.T, l *limiter.Limiter, key string, want int64, what string) {
	t.Helper()
	d, err := l.Peek(context.Background(), key)
	if got := checked(t, "Peek", d, err).Remaining; got != want {
		t.Fatalf("%s: remaining %d, want %d", what, got, want)
	}
}

func mustSettle(t *testing.T, what string, want limiter.Settlement) func(limiter.Settlement, error) {
	return func(st limiter.Settlement, err error) {
		t.Helper()
		if err != nil || st != want {
			t.Fatalf("%s = %+v, %v; want %+v", what, st, err, want)
		}
	}
}

func (c *suite) reserveRefund(t *testing.T) {
	l := c.reserver(t, c.dayLimit(100), time.Minute, limiter.ExpireCharge)
	key := c.key(t, "k")
	r := mustReserve(t, l, key, 40)
	wantRemaining(t, l, key, 60, "after reserving 40 of 100")
	mustSettle(t, "Commit(15)", limiter.Settlement{Estimate: 40, Actual: 15, Refunded: 25})(l.Commit(context.Background(), r, 15))
	wantRemaining(t, l, key, 85, "after committing 15 of 40")
}

func (c *suite) reserveExcess(t *testing.T) {
	ctx := context.Background()
	l := c.reserver(t, c.dayLimit(100), time.Minute, limiter.ExpireCharge)
	key := c.key(t, "k")
	r := mustReserve(t, l, key, 30)
	mustSettle(t, "Commit(70)", limiter.Settlement{Estimate: 30, Actual: 70, Charged: 40})(l.Commit(ctx, r, 70))
	wantRemaining(t, l, key, 30, "after committing 70")
	r = mustReserve(t, l, key, 30)
	mustSettle(t, "Commit(80)", limiter.Settlement{Estimate: 30, Actual: 80, Charged: 50})(l.Commit(ctx, r, 80))
	d, err := l.Allow(ctx, key)
	if checked(t, "Allow", d, err); d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("after 150 of 100 settled: Allow = %+v, want a rejection with a retry-after", d)
	}
}

func (c *suite) reserveCancel(t *testing.T) {
	ctx := context.Background()
	l := c.reserver(t, c.dayLimit(100), time.Minute, limiter.ExpireCharge)
	key := c.key(t, "k")
	r := mustReserve(t, l, key, 100)
	if d, err := l.Allow(ctx, key); err != nil || d.Allowed {
		t.Fatalf("with the whole quota reserved: Allow = %+v, %v; want a rejection", d, err)
	}
	mustSettle(t, "Cancel", limiter.Settlement{Estimate: 100, Refunded: 100})(l.Cancel(ctx, r))
	wantRemaining(t, l, key, 100, "after a cancel")
	// Reserved, then the key reset: the cancel finds a fresh key and adds nothing.
	r = mustReserve(t, l, key, 50)
	if err := l.Reset(ctx, key); err != nil {
		t.Fatal(err)
	}
	mustSettle(t, "Cancel after a reset", limiter.Settlement{Estimate: 50, Refunded: 50})(l.Cancel(ctx, r))
	wantRemaining(t, l, key, 100, "a refund on a fresh key")
}

func (c *suite) reserveOnce(t *testing.T) {
	ctx := context.Background()
	l := c.reserver(t, c.dayLimit(100), time.Minute, limiter.ExpireCharge)
	key := c.key(t, "k")
	r := mustReserve(t, l, key, 10)
	mustSettle(t, "Commit(5)", limiter.Settlement{Estimate: 10, Actual: 5, Refunded: 5})(l.Commit(ctx, r, 5))
	if _, err := l.Commit(ctx, r, 1); !errors.Is(err, limiter.ErrReservationUnknown) {
		t.Fatalf("commit twice: %v, want ErrReservationUnknown", err)
	}
	if _, err := l.Cancel(ctx, r); !errors.Is(err, limiter.ErrReservationUnknown) {
		t.Fatalf("cancel after a commit: %v, want ErrReservationUnknown", err)
	}
	r2 := mustReserve(t, l, key, 10)
	stolen := r2
	stolen.Key = c.key(t, "other")
	if _, err := l.Cancel(ctx, stolen); !errors.Is(err, limiter.ErrReservationUnknown) {
		t.Fatalf("an id settled on another key: %v, want ErrReservationUnknown", err)
	}
	mustSettle(t, "a reservation with no id", limiter.Settlement{})(l.Commit(ctx, limiter.Reservation{Key: key}, 7))
	wantRemaining(t, l, key, 85, "after settling nothing more")
}

func (c *suite) reserveExpiry(t *testing.T) {
	ctx := context.Background()
	const hold = 150 * time.Millisecond
	lim := c.dayLimit(100)
	for _, policy := range []limiter.ExpiryPolicy{limiter.ExpireCharge, limiter.ExpireRefund} {
		short := c.reserver(t, lim, hold, policy)
		long := c.reserver(t, lim, time.Minute, policy)
		key := c.key(t, policy.String())
		lost := mustReserve(t, short, key, 30)
		kept := mustReserve(t, long, key, 20)
		time.Sleep(hold + 50*time.Millisecond) // waits out the hold; nothing to synchronise with
		st, err := long.Commit(ctx, kept, 20)
		if err != nil || st.Expired != 1 {
			t.Fatalf("%s: Commit = %+v, %v; want the lost reservation counted as expired", policy, st, err)
		}
		want := int64(50)
		if policy == limiter.ExpireRefund {
			want = 80
		}
		wantRemaining(t, long, key, want, "after the "+policy.String()+" policy")
		if _, err := short.Commit(ctx, lost, 30); !errors.Is(err, limiter.ErrReservationUnknown) {
			t.Fatalf("%s: committing an expired reservation: %v, want ErrReservationUnknown", policy, err)
		}
	}
}

func (c *suite) reserveRenew(t *testing.T) {
	ctx := context.Background()
	// The holder renews every third of the hold: 300 ms leaves a renewal 200 ms late on a
	// loaded machine.
	const hold = 300 * time.Millisecond
	l := c.reserver(t, c.dayLimit(100), hold, limiter.ExpireRefund)
	key := c.key(t, "k")
	r := mustReserve(t, l, key, 30)
	stop := l.Keep(r)
	time.Sleep(4 * hold) // four holds of the holder at work; nothing to synchronise with
	stop()
	mustSettle(t, "Commit(10) after four holds kept", limiter.Settlement{Estimate: 30, Actual: 10, Refunded: 20})(l.Commit(ctx, r, 10))
	wantRemaining(t, l, key, 90, "after the kept reservation settled")
	if _, err := l.Renew(ctx, r); !errors.Is(err, limiter.ErrReservationUnknown) {
		t.Fatalf("renewing a settled reservation: %v, want ErrReservationUnknown", err)
	}
}

func (c *suite) reserveLate(t *testing.T) {
	ctx := context.Background()
	const hold = 150 * time.Millisecond
	for _, policy := range []limiter.ExpiryPolicy{limiter.ExpireCharge, limiter.ExpireRefund} {
		l := c.reserver(t, c.dayLimit(100), hold, policy)
		key := c.key(t, "late-"+policy.String())
		r := mustReserve(t, l, key, 30)
		big := mustReserve(t, l, key, 10)
		time.Sleep(hold + 50*time.Millisecond) // waits out the hold; nothing to synchronise with
		if _, err := l.Renew(ctx, r); !errors.Is(err, limiter.ErrReservationUnknown) {
			t.Fatalf("%s: renewing an expired reservation: %v, want ErrReservationUnknown", policy, err)
		}
		st, err := l.Commit(ctx, r, 50)
		want := limiter.Settlement{Estimate: 30, Actual: 50, Charged: 20, Late: true}
		if policy == limiter.ExpireRefund {
			want.Charged = 50
		}
		if st.Expired, want.Expired = 0, 0; !errors.Is(err, limiter.ErrReservationExpired) || st != want {
			t.Fatalf("%s: Commit(50) after the hold = %+v, %v; want %+v, ErrReservationExpired", policy, st, err, want)
		}
		// 50 spent whatever the policy; big's 10 by its policy, not yet settled.
		remaining := int64(40)
		if policy == limiter.ExpireRefund {
			remaining = 50
		}
		wantRemaining(t, l, key, remaining, "after a late commit")
		if _, err := l.Commit(ctx, r, 50); errors.Is(err, limiter.ErrReservationExpired) || !errors.Is(err, limiter.ErrReservationUnknown) {
			t.Fatalf("%s: a second late commit: %v, want ErrReservationUnknown alone", policy, err)
		}
		st, err = l.Commit(ctx, big, 1000)
		if !errors.Is(err, limiter.ErrReservationExpired) || st.Charged > 100 {
			t.Fatalf("%s: Commit(1000) of 10 after the hold = %+v, %v; want at most the quota, 100, charged late", policy, st, err)
		}
	}
}

// ReserveContentionResult is what ReserveContention measured on one algorithm.
type ReserveContentionResult struct {
	Algorithm limiter.Algorithm
	Settled   int64 // units committed in all
	Quota     int64
	Bound     int64 // Quota + the excesses that could be in flight
}

// ReserveContention has perClient goroutines on each store reserve an
// estimate on one key and commit a random actual cost of 0 to twice the
// estimate, until each is rejected. It checks, for every algorithm, that
// the units settled stay within the documented bound, the quota plus the
// excesses of the reservations in flight (one per goroutine), and that the
// store counted every commit exactly once: remaining = quota − settled.
func ReserveContention(t *testing.T, stores []limiter.Store, perClient int) []ReserveContentionResult {
	t.Helper()
	const quota, estimate = 2000, 10
	run := uniqueRun()
	var results []ReserveContentionResult
	for _, a := range limiter.AllAlgorithms() {
		lim := limiter.Limit{Algorithm: a, Rate: quota, Period: 24 * time.Hour, Burst: quota}
		key := "reserve-contention:" + run + ":" + string(a)
		var settled, maxExcess atomic.Int64
		var errs sync.Map
		start := make(chan struct{})
		var wg sync.WaitGroup
		var limiters []*limiter.Limiter
		for _, s := range stores {
			l, err := limiter.New(limiter.Config{Limit: lim, Store: s, FailPolicy: limiter.FailClosed, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			limiters = append(limiters, l)
			for g := 0; g < perClient; g++ {
				wg.Add(1)
				go func(l *limiter.Limiter, seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 7))
					<-start
					for {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						r, d, err := l.Reserve(ctx, key, estimate)
						if err != nil || !d.Allowed {
							cancel()
							if err != nil {
								errs.Store(err.Error(), true)
							}
							return
						}
						actual := rng.Int64N(2*estimate + 1)
						_, err = l.Commit(ctx, r, actual)
						cancel()
						if err != nil {
							errs.Store(err.Error(), true)
							return
						}
						settled.Add(actual)
						for ex := actual - estimate; ex > maxExcess.Load(); {
							if maxExcess.CompareAndSwap(maxExcess.Load(), ex) {
								break
							}
						}
					}
				}(l, uint64(g)+1)
			}
		}
		close(start)
		wg.Wait()
		errs.Range(func(k, _ any) bool {
			t.Errorf("%s: store error under contention: %s", a, k)
			return true
		})
		n := settled.Load()
		bound := quota + int64(len(stores)*perClient)*maxExcess.Load()
		if n > bound {
			t.Errorf("%s: %d units settled, above the bound %d (quota %d + %d in flight × largest excess %d)", a, n, bound, quota, len(stores)*perClient, maxExcess.Load())
		}
		if limiter.SpecOf(a).Exact() {
			d, err := limiters[0].Peek(context.Background(), key)
			if err != nil || d.Remaining != max(quota-n, 0) {
				t.Errorf("%s: after %d units settled: Peek = %+v, %v; want remaining %d", a, n, d, err, max(quota-n, 0))
			}
		}
		results = append(results, ReserveContentionResult{Algorithm: a, Settled: n, Quota: quota, Bound: bound})
	}
	return results
}

func (c *suite) reserveCount(t *testing.T) {
	ctx := context.Background()
	lim := c.dayLimit(100)
	long := c.reserver(t, lim, time.Minute, limiter.ExpireRefund)
	short := c.reserver(t, lim, 150*time.Millisecond, limiter.ExpireRefund)
	key := c.key(t, "k")
	count := func(key string) int64 {
		t.Helper()
		n, err := long.OpenReservations(ctx, key)
		if err != nil {
			t.Fatalf("OpenReservations(%q): %v", key, err)
		}
		return n
	}
	if n := count(key); n != 0 {
		t.Fatalf("a fresh key: %d open, want 0", n)
	}
	first := mustReserve(t, long, key, 10)
	mustReserve(t, long, key, 20)
	if n := count(key); n != 2 {
		t.Fatalf("after two reservations: %d open, want 2", n)
	}
	mustSettle(t, "Commit(10)", limiter.Settlement{Estimate: 10, Actual: 10})(long.Commit(ctx, first, 10))
	if n := count(key); n != 1 {
		t.Fatalf("after committing one: %d open, want 1", n)
	}
	if n := count(c.key(t, "other")); n != 0 {
		t.Fatalf("another key: %d open, want 0", n)
	}
	mustReserve(t, short, key, 5)
	eventually.True(t, 5*time.Second, "the reservation past its short hold no longer counted", func() bool {
		n, err := long.OpenReservations(ctx, key)
		return err == nil && n == 1
	})
	// Only a write settles the expired one by its refund policy: counting did not.
	wantRemaining(t, long, key, 65, "after counting (10 committed, 20 and 5 reserved)")
}

// chargeSpent charges past the quota: 100 then 50 of 100 leave the key
// refused, as a commit of 150 on one unit reserved does, the same wait
// where keys' waits compare (no window offset), and for the algorithms
// whose wait grows with the debt, a longer one than after 100.
func (c *suite) chargeSpent(t *testing.T) {
	ctx := context.Background()
	l := c.reserver(t, c.dayLimit(100), time.Minute, limiter.ExpireCharge)
	charged, settled, full := c.key(t, "charged"), c.key(t, "settled"), c.key(t, "full")
	mustSettle(t, "Charge(100)", limiter.Settlement{Actual: 100, Charged: 100})(l.Charge(ctx, charged, 100))
	mustSettle(t, "Charge(100)", limiter.Settlement{Actual: 100, Charged: 100})(l.Charge(ctx, full, 100))
	wantRemaining(t, l, charged, 0, "after charging 100 of 100")
	mustSettle(t, "Charge(50) past the quota", limiter.Settlement{Actual: 50, Charged: 50})(l.Charge(ctx, charged, 50))
	mustSettle(t, "Charge(0)", limiter.Settlement{})(l.Charge(ctx, charged, 0))
	if _, err := l.Charge(ctx, charged, -1); !errors.Is(err, limiter.ErrInvalidActual) {
		t.Fatalf("Charge(-1) = %v, want ErrInvalidActual", err)
	}
	r := mustReserve(t, l, settled, 1)
	mustSettle(t, "Commit(150)", limiter.Settlement{Estimate: 1, Actual: 150, Charged: 149})(l.Commit(ctx, r, 150))
	got, want, less := peekRejected(t, l, charged), peekRejected(t, l, settled), peekRejected(t, l, full)
	if c.alg == limiter.FixedWindow || c.alg == limiter.SlidingWindow {
		return // each key's window has its own offset: their waits differ
	}
	const slack = 5 * time.Second // of a day's period: the calls' clocks differ by that at most
	if d := got.RetryAfter - want.RetryAfter; d < -slack || d > slack {
		t.Fatalf("after charges of 100 and 50: retry after %s, want %s as after a commit of 150", got.RetryAfter, want.RetryAfter)
	}
	if d := got.ResetAfter - want.ResetAfter; d < -slack || d > slack {
		t.Fatalf("after charges of 100 and 50: reset after %s, want %s as after a commit of 150", got.ResetAfter, want.ResetAfter)
	}
	switch c.alg {
	case limiter.TokenBucket, limiter.LeakyBucket, limiter.GCRA:
		if got.RetryAfter <= less.RetryAfter+slack {
			t.Fatalf("retry after %s with 150 charged, %s with 100: the charge past the quota was not taken", got.RetryAfter, less.RetryAfter)
		}
	}
}

func peekRejected(t *testing.T, l *limiter.Limiter, key string) limiter.Decision {
	t.Helper()
	d, err := l.Peek(context.Background(), key)
	if checked(t, "Peek", d, err); d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
		t.Fatalf("Peek(%q) = %+v, want a rejection with a retry-after", key, d)
	}
	return d
}
