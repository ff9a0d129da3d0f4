package limiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// reserveLimit is 100 units a key, refilled or windowed over a day, so
// that the seconds a test advances refill less than one unit.
func reserveLimit(a limiter.Algorithm) limiter.Limit {
	return limiter.Limit{Algorithm: a, Rate: 100, Period: 24 * time.Hour, AlignWindows: true}
}

func newReserveLimiter(t *testing.T, a limiter.Algorithm, clk *fakeClock, policy limiter.ExpiryPolicy) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(limiter.Config{
		Limit:    reserveLimit(a),
		Store:    limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}),
		Hold:     time.Minute,
		OnExpiry: policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Reserves() {
		t.Fatalf("%s on the memory store: Reserves() = false", a)
	}
	return l
}

func reserve(t *testing.T, l *limiter.Limiter, key string, estimate int64) limiter.Reservation {
	t.Helper()
	r, d, err := l.Reserve(context.Background(), key, estimate)
	if err != nil || !d.Allowed || r.ID == "" || d.Admitted != estimate {
		t.Fatalf("Reserve(%q, %d) = %+v, %+v, %v; want an admitted reservation", key, estimate, r, d, err)
	}
	return r
}

func remaining(t *testing.T, l *limiter.Limiter, key string) int64 {
	t.Helper()
	d, err := l.Peek(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

func TestReserveSettlesAtTheActualCostOnEveryAlgorithm(t *testing.T) {
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			clk := newFakeClock()
			l := newReserveLimiter(t, a, clk, limiter.ExpireCharge)

			r := reserve(t, l, "refund", 40)
			if got := remaining(t, l, "refund"); got != 60 {
				t.Fatalf("after reserving 40 of 100: remaining %d, want 60", got)
			}
			st, err := l.Commit(ctx, r, 15)
			want := limiter.Settlement{Estimate: 40, Actual: 15, Refunded: 25}
			if err != nil || st != want {
				t.Fatalf("Commit(15) = %+v, %v; want %+v", st, err, want)
			}
			if got := remaining(t, l, "refund"); got != 85 {
				t.Fatalf("after committing 15 of 40: remaining %d, want 85", got)
			}

			r = reserve(t, l, "excess", 30)
			st, err = l.Commit(ctx, r, 130)
			want = limiter.Settlement{Estimate: 30, Actual: 130, Charged: 100}
			if err != nil || st != want {
				t.Fatalf("Commit(130) = %+v, %v; want %+v", st, err, want)
			}
			if d, err := l.Allow(ctx, "excess"); err != nil || d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("after an excess past the quota: Allow = %+v, %v; want a rejection with a retry-after", d, err)
			}

			r = reserve(t, l, "cancel", 100)
			st, err = l.Cancel(ctx, r)
			want = limiter.Settlement{Estimate: 100, Refunded: 100}
			if err != nil || st != want {
				t.Fatalf("Cancel = %+v, %v; want %+v", st, err, want)
			}
			if got := remaining(t, l, "cancel"); got != 100 {
				t.Fatalf("after a cancel: remaining %d, want 100", got)
			}
		})
	}
}

func TestReserveRefundNeverLiftsTheBudgetAboveAFreshKeys(t *testing.T) {
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			clk := newFakeClock()
			l := newReserveLimiter(t, a, clk, limiter.ExpireCharge)
			r := reserve(t, l, "k", 50)
			clk.Advance(59 * time.Second)
			// Spent again after the reservation: a refund gives back only what is missing.
			if _, err := l.AllowN(ctx, "k", 10); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Cancel(ctx, r); err != nil {
				t.Fatal(err)
			}
			if got := remaining(t, l, "k"); got != 90 {
				t.Fatalf("remaining %d after 50 reserved and cancelled and 10 spent; want 90", got)
			}
			// A window or refill later the key is fresh; a late refund adds nothing.
			r = reserve(t, l, "late", 50)
			clk.Advance(49 * time.Hour)
			if _, err := l.Cancel(ctx, r); !errors.Is(err, limiter.ErrReservationUnknown) {
				t.Fatalf("cancel after the hold: %v, want ErrReservationUnknown", err)
			}
			if got := remaining(t, l, "late"); got != 100 {
				t.Fatalf("remaining %d, want a fresh key's 100", got)
			}
			long, err := limiter.New(limiter.Config{Limit: reserveLimit(a), Hold: 100 * time.Hour,
				Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})})
			if err != nil {
				t.Fatal(err)
			}
			r = reserve(t, long, "late", 50)
			clk.Advance(49 * time.Hour)
			if st, err := long.Cancel(ctx, r); err != nil || st.Refunded != 50 {
				t.Fatalf("cancel within a long hold: %+v, %v", st, err)
			}
			if got := remaining(t, long, "late"); got != 100 {
				t.Fatalf("remaining %d after a refund into a passed window or a full bucket, want a fresh key's 100", got)
			}
		})
	}
}

func TestReserveSettlesExactlyOnce(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	l := newReserveLimiter(t, limiter.FixedWindow, clk, limiter.ExpireCharge)
	r := reserve(t, l, "k", 10)
	if _, err := l.Commit(ctx, r, 5); err != nil {
		t.Fatal(err)
	}
	for name, settle := range map[string]func() (limiter.Settlement, error){
		"commit": func() (limiter.Settlement, error) { return l.Commit(ctx, r, 1) },
		"cancel": func() (limiter.Settlement, error) { return l.Cancel(ctx, r) },
	} {
		if st, err := settle(); !errors.Is(err, limiter.ErrReservationUnknown) || st.Refunded != 0 || st.Charged != 0 {
			t.Errorf("%s twice: %+v, %v; want ErrReservationUnknown and nothing settled", name, st, err)
		}
	}
	if got := remaining(t, l, "k"); got != 95 {
		t.Fatalf("remaining %d, want 95", got)
	}
	other := r
	other.Key = "another key"
	r2 := reserve(t, l, "k", 10)
	other.ID = r2.ID
	if _, err := l.Commit(ctx, other, 0); !errors.Is(err, limiter.ErrReservationUnknown) {
		t.Fatalf("an id settled on another key: %v, want ErrReservationUnknown", err)
	}
	if st, err := l.Commit(ctx, limiter.Reservation{Key: "k"}, 3); err != nil || st != (limiter.Settlement{}) {
		t.Fatalf("a reservation with no id: %+v, %v; want nothing", st, err)
	}
	if _, err := l.Commit(ctx, r2, -1); !errors.Is(err, limiter.ErrInvalidActual) {
		t.Fatalf("Commit(-1): %v, want ErrInvalidActual", err)
	}
}

func TestReserveExpiryPolicy(t *testing.T) {
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		for _, policy := range []limiter.ExpiryPolicy{limiter.ExpireCharge, limiter.ExpireRefund} {
			t.Run(string(a)+"/"+policy.String(), func(t *testing.T) {
				clk := newFakeClock()
				l := newReserveLimiter(t, a, clk, policy)
				lost := reserve(t, l, "k", 30)
				clk.Advance(30 * time.Second)
				kept := reserve(t, l, "k", 20)
				clk.Advance(31 * time.Second) // lost's minute is over, kept's is not
				st, err := l.Commit(ctx, kept, 20)
				if err != nil || st.Expired != 1 {
					t.Fatalf("Commit = %+v, %v; want the lost reservation counted as expired", st, err)
				}
				want := int64(50)
				if policy == limiter.ExpireRefund {
					want = 80
				}
				if got := remaining(t, l, "k"); got != want {
					t.Fatalf("remaining %d, want %d", got, want)
				}
				if _, err := l.Commit(ctx, lost, 30); !errors.Is(err, limiter.ErrReservationUnknown) {
					t.Fatalf("committing the expired reservation: %v, want ErrReservationUnknown", err)
				}
				// The key's only record expires in the call that opens the next.
				next := reserve(t, l, "alone", 10)
				clk.Advance(2 * time.Minute)
				last := reserve(t, l, "alone", 10)
				if st, err := l.Commit(ctx, last, 10); err != nil || st.Expired != 0 {
					t.Fatalf("committing a reservation opened as the key's last one expired: %+v, %v", st, err)
				}
				if _, err := l.Commit(ctx, next, 10); !errors.Is(err, limiter.ErrReservationUnknown) {
					t.Fatalf("committing the expired reservation: %v, want ErrReservationUnknown", err)
				}
			})
		}
	}
}

func TestReserveOnAStoreWithoutReservations(t *testing.T) {
	l, err := limiter.New(limiter.Config{Limit: reserveLimit(limiter.FixedWindow), Store: plainOnly{limiter.NewMemoryStore(limiter.MemoryConfig{})}})
	if err != nil {
		t.Fatal(err)
	}
	if l.Reserves() {
		t.Fatal("Reserves() = true on a store that is no Reserver")
	}
	if _, _, err := l.Reserve(context.Background(), "k", 1); !errors.Is(err, limiter.ErrReservationsNotSupported) {
		t.Fatalf("Reserve: %v, want ErrReservationsNotSupported", err)
	}
	if limiter.SupportsReservations("concurrency") {
		t.Fatal("SupportsReservations of an unknown algorithm")
	}
}

// plainOnly hides every method but the Store's.
type plainOnly struct{ s limiter.Store }

func (p plainOnly) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	return p.s.Decide(ctx, key, lim, cost)
}
func (p plainOnly) Name() string { return "plain" }

// failingReserver is a failingStore whose healthy store holds reservations.
type failingReserver struct {
	*failingStore
	healthy *limiter.MemoryStore
}

func (f failingReserver) failing() error {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f failingReserver) Reserve(ctx context.Context, key string, lim limiter.Limit, r limiter.ReserveRequest, timeout time.Duration) (limiter.Decision, error) {
	if err := f.failing(); err != nil {
		return limiter.Decision{}, err
	}
	return f.healthy.Reserve(ctx, key, lim, r, timeout)
}

func (f failingReserver) Settle(ctx context.Context, key string, lim limiter.Limit, id string, actual int64, timeout time.Duration) (limiter.Settlement, error) {
	if err := f.failing(); err != nil {
		return limiter.Settlement{}, err
	}
	return f.healthy.Settle(ctx, key, lim, id, actual, timeout)
}

func (f failingReserver) Charge(ctx context.Context, key string, lim limiter.Limit, cost int64, timeout time.Duration) (limiter.Settlement, error) {
	if err := f.failing(); err != nil {
		return limiter.Settlement{}, err
	}
	return f.healthy.Charge(ctx, key, lim, cost, timeout)
}

func (f failingReserver) Renew(ctx context.Context, key string, lim limiter.Limit, id string, hold, timeout time.Duration) (limiter.Renewal, error) {
	if err := f.failing(); err != nil {
		return limiter.Renewal{}, err
	}
	return f.healthy.Renew(ctx, key, lim, id, hold, timeout)
}

func TestReserveFollowsTheFailPolicyAndSettlesNothingItDidNotReserve(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		policy  limiter.FailPolicy
		allowed bool
		failure limiter.Failure
	}{
		{limiter.FailOpen, true, limiter.FailureOpen},
		{limiter.FailClosed, false, limiter.FailureClosed},
		{limiter.FailLocal, true, limiter.FailureLocal},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
			store := failingReserver{&failingStore{err: errStoreDown, healthy: mem}, mem}
			var observed atomic.Int64
			l, err := limiter.New(limiter.Config{Limit: reserveLimit(limiter.TokenBucket), Store: store, FailPolicy: tc.policy,
				Observer: observerFunc(func(context.Context, string, time.Duration, error) { observed.Add(1) })})
			if err != nil {
				t.Fatal(err)
			}
			r, d, err := l.Reserve(ctx, "k", 10)
			if !errors.Is(err, errStoreDown) || d.Allowed != tc.allowed || d.Failure != tc.failure || r.ID != "" {
				t.Fatalf("Reserve with the store down = %+v, %+v, %v; want the %s policy's decision and no id", r, d, err, tc.policy)
			}
			if st, err := l.Commit(ctx, r, 50); err != nil || st != (limiter.Settlement{}) {
				t.Fatalf("Commit of a fail-policy admission = %+v, %v; want nothing", st, err)
			}
			store.setErr(nil)
			r = reserve(t, l, "k", 10)
			store.setErr(errStoreDown)
			if _, err := l.Commit(ctx, r, 4); !errors.Is(err, errStoreDown) {
				t.Fatalf("Commit with the store down: %v, want the store's error", err)
			}
			store.setErr(nil)
			if st, err := l.Commit(ctx, r, 4); err != nil || st.Refunded != 6 {
				t.Fatalf("Commit once the store is back = %+v, %v; want the reservation still open", st, err)
			}
			if observed.Load() != 4 {
				t.Fatalf("the observer saw %d store calls, want 4", observed.Load())
			}
		})
	}
}

func TestReserveSkipsTheStoreWhileTheBreakerIsOpen(t *testing.T) {
	ctx := context.Background()
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	store := failingReserver{&failingStore{err: errStoreDown, healthy: mem}, mem}
	l, err := limiter.New(limiter.Config{Limit: reserveLimit(limiter.GCRA), Store: store, FailPolicy: limiter.FailClosed,
		Breaker: limiter.BreakerConfig{Threshold: 2, Cooldown: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, _, err := l.Reserve(ctx, "k", 1); !errors.Is(err, errStoreDown) {
			t.Fatalf("reserve %d: %v", i, err)
		}
	}
	before := store.calls.Load()
	_, d, err := l.Reserve(ctx, "k", 1)
	if !errors.Is(err, limiter.ErrCircuitOpen) || d.Allowed || store.calls.Load() != before {
		t.Fatalf("Reserve with the breaker open = %+v, %v after %d calls; want a fail-closed refusal without a call", d, err, store.calls.Load()-before)
	}
	if _, err := l.Commit(ctx, limiter.Reservation{ID: "x", Key: "k"}, 1); !errors.Is(err, limiter.ErrCircuitOpen) || store.calls.Load() != before {
		t.Fatalf("Commit with the breaker open: %v; want ErrCircuitOpen without a call", err)
	}
}

// Back from an outage, FailLocal holds a key it decided to its local share:
// a reservation the store admitted but the share refuses is given back.
func TestReserveRefusedByTheLocalShareAfterAnOutageGivesTheUnitsBack(t *testing.T) {
	ctx := context.Background()
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	store := failingReserver{&failingStore{err: errStoreDown, healthy: mem}, mem}
	lim := reserveLimit(limiter.FixedWindow)
	l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: limiter.FailLocal})
	if err != nil {
		t.Fatal(err)
	}
	if r, d, err := l.Reserve(ctx, "k", 100); !errors.Is(err, errStoreDown) || !d.Allowed || d.Failure != limiter.FailureLocal || r.ID != "" {
		t.Fatalf("Reserve in the outage = %+v, %+v, %v; want the local share's admission", r, d, err)
	}
	store.setErr(nil)
	r, d, err := l.Reserve(ctx, "k", 10)
	if err != nil || d.Allowed || r.ID != "" {
		t.Fatalf("Reserve past the local share after the outage = %+v, %+v, %v; want a refusal", r, d, err)
	}
	if pd, err := mem.DecideMode(ctx, "k", lim, 100, limiter.ModePeek, 0); err != nil || !pd.Allowed {
		t.Fatalf("the store kept the refused reservation's units: %+v, %v", pd, err)
	}
}

// TestCommitAsyncOnAStoreThatWaitsIsCommit: on the memory store, which
// settles in place, CommitAsync and CancelAsync hand then what Commit and
// Cancel return, before they return, and a second settle is unknown.
func TestCommitAsyncOnAStoreThatWaitsIsCommit(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := newReserveLimiter(t, limiter.GCRA, clk, limiter.ExpireCharge)
	ctx := context.Background()
	r := reserve(t, l, "k", 10)
	var st limiter.Settlement
	var err error
	l.CommitAsync(ctx, r, 4, func(s limiter.Settlement, e error) { st, err = s, e })
	if err != nil || st.Estimate != 10 || st.Refunded != 6 {
		t.Fatalf("CommitAsync of 10 at 4: %+v, %v; want 6 refunded", st, err)
	}
	if got := remaining(t, l, "k"); got != 96 {
		t.Fatalf("remaining after committing 4 of 100: %d, want 96", got)
	}
	err = nil
	l.CancelAsync(ctx, r, func(_ limiter.Settlement, e error) { err = e })
	if !errors.Is(err, limiter.ErrReservationUnknown) {
		t.Fatalf("CancelAsync after the commit: %v, want ErrReservationUnknown", err)
	}
	l.CommitAsync(ctx, r, -1, nil) // an invalid actual with no one to tell: no panic
}
