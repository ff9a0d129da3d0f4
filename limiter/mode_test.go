package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// failingInspector is a failingStore that also peeks, admits at most and
// resets, failing the same way.
type failingInspector struct{ failingStore }

func (f *failingInspector) DecideMode(ctx context.Context, key string, lim limiter.Limit, cost int64, mode limiter.Mode, timeout time.Duration) (limiter.Decision, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return limiter.Decision{}, err
	}
	return f.healthy.(limiter.Inspector).DecideMode(ctx, key, lim, cost, mode, timeout)
}

func (f *failingInspector) Reset(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) error {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.healthy.(limiter.Inspector).Reset(ctx, key, lim, timeout)
}

func TestFailPolicyAppliesToPeekAndAllowAtMost(t *testing.T) {
	lim := limiter.PerMinute(limiter.FixedWindow, 3)
	tests := []struct {
		name          string
		policy        limiter.FailPolicy
		peekAllowed   bool
		atMostAdmits  []int64 // AllowAtMost(2) three times in a row
		failure       limiter.Failure
		peekRemaining int64
	}{
		{"fail open: a peek says allowed with the full quota, allow-at-most admits all it asks", limiter.FailOpen, true, []int64{2, 2, 2}, limiter.FailureOpen, 3},
		{"fail closed: a peek says refused, allow-at-most admits nothing", limiter.FailClosed, false, []int64{0, 0, 0}, limiter.FailureClosed, 0},
		{"fail local: a peek looks at the local share without taking from it, allow-at-most takes what fits locally", limiter.FailLocal, true, []int64{2, 1, 0}, limiter.FailureLocal, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &failingInspector{failingStore{err: errStoreDown, healthy: limiter.NewMemoryStore(limiter.MemoryConfig{})}}
			l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := 0; i < 5; i++ {
				d, err := l.Peek(ctx, "k")
				if !errors.Is(err, errStoreDown) {
					t.Fatalf("peek %d: err = %v, want the store error", i, err)
				}
				if d.Allowed != tc.peekAllowed || d.Failure != tc.failure || d.Admitted != 0 || d.Remaining != tc.peekRemaining {
					t.Fatalf("peek %d: %+v, want allowed=%v failure=%s remaining=%d, nothing admitted", i, d, tc.peekAllowed, tc.failure, tc.peekRemaining)
				}
			}
			for i, want := range tc.atMostAdmits {
				d, err := l.AllowAtMost(ctx, "k", 2)
				if !errors.Is(err, errStoreDown) {
					t.Fatalf("allow-at-most %d: err = %v, want the store error", i, err)
				}
				if d.Admitted != want || d.Allowed != (want > 0) || d.Failure != tc.failure {
					t.Fatalf("allow-at-most %d: %+v, want %d admitted, failure=%s", i, d, want, tc.failure)
				}
			}
		})
	}
}

func TestResetIsAStoreCall(t *testing.T) {
	clock := newFakeClock()
	var observed int
	store := &failingInspector{failingStore{healthy: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})}}
	l, err := limiter.New(limiter.Config{
		Limit: limiter.PerMinute(limiter.GCRA, 2), Store: store, FailPolicy: limiter.FailLocal,
		Breaker:  limiter.BreakerConfig{Threshold: 2, Cooldown: 10 * time.Second, Now: clock.Now},
		Observer: observerFunc(func(context.Context, string, time.Duration, error) { observed++ }),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.AllowN(ctx, "k", 2)
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if d, _ := l.AllowN(ctx, "k", 2); !d.Allowed {
		t.Fatalf("after Reset: %+v, want the quota back", d)
	}
	if observed != 3 {
		t.Fatalf("the Observer saw %d calls, want 3 (two decisions and the reset)", observed)
	}
	store.setErr(errStoreDown)
	for i := 0; i < 2; i++ {
		if err := l.Reset(ctx, "k"); !errors.Is(err, errStoreDown) {
			t.Fatalf("Reset %d on a failing store: %v, want the store error", i, err)
		}
	}
	calls := store.calls.Load()
	if err := l.Reset(ctx, "k"); !errors.Is(err, limiter.ErrCircuitOpen) {
		t.Fatalf("Reset with the circuit open: %v, want ErrCircuitOpen", err)
	}
	if store.calls.Load() != calls {
		t.Fatalf("the store was called with the circuit open")
	}
}

func TestPeekResetAndAllowAtMostNeedAnInspector(t *testing.T) {
	store := &failingStore{healthy: limiter.NewMemoryStore(limiter.MemoryConfig{})}
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.GCRA, 2), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Peek(ctx, "k"); !errors.Is(err, limiter.ErrNotSupported) {
		t.Fatalf("Peek: %v, want ErrNotSupported", err)
	}
	if _, err := l.AllowAtMost(ctx, "k", 1); !errors.Is(err, limiter.ErrNotSupported) {
		t.Fatalf("AllowAtMost: %v, want ErrNotSupported", err)
	}
	if err := l.Reset(ctx, "k"); !errors.Is(err, limiter.ErrNotSupported) {
		t.Fatalf("Reset: %v, want ErrNotSupported", err)
	}
	if store.calls.Load() != 0 {
		t.Fatalf("the store was called %d times", store.calls.Load())
	}
	if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed || d.Admitted != 1 {
		t.Fatalf("Allow on a plain store: %+v, %v", d, err)
	}
}

// Reserve and lease are modes of a decision, not of a store call: a store asked to decide in
// one refuses and takes nothing.
func TestAStoreCallRefusesTheModesThatAreNotItsOwn(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	lim := limiter.PerMinute(limiter.FixedWindow, 5)
	for _, mode := range []limiter.Mode{limiter.ModeReserve, limiter.ModeLease} {
		if _, err := store.DecideMode(context.Background(), "k", lim, 1, mode, 0); !errors.Is(err, limiter.ErrNotSupported) {
			t.Errorf("DecideMode in %s: %v, want ErrNotSupported", mode, err)
		}
	}
	d, err := store.DecideMode(context.Background(), "k", lim, 1, limiter.ModePeek, 0)
	if err != nil || d.Remaining != 5 {
		t.Errorf("after the refused calls a peek sees %d remaining (%v), want all 5", d.Remaining, err)
	}
}
