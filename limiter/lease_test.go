package limiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLeases(t *testing.T, st limiter.Store, n int64, ttl time.Duration) *limiter.Leases {
	t.Helper()
	l, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: n, TTL: ttl}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLeasesCapInFlightAndReleaseFreesASlot(t *testing.T) {
	clock := &manualClock{t: time.Unix(1_700_000_000, 0)}
	st := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
	l := newLeases(t, st, 2, 10*time.Second)
	ctx := context.Background()
	a, d, err := l.Acquire(ctx, "k")
	if err != nil || !d.Allowed || a.ID == "" || d.InFlight != 1 || d.Remaining() != 1 {
		t.Fatalf("first: %+v %+v %v", a, d, err)
	}
	b, d, _ := l.Acquire(ctx, "k")
	if !d.Allowed || b.ID == a.ID {
		t.Fatalf("second: %+v %+v", b, d)
	}
	c, d, _ := l.Acquire(ctx, "k")
	if d.Allowed || c.ID != "" || d.InFlight != 2 || d.RetryAfter != limiter.LeaseRetryAfter {
		t.Fatalf("third must be refused with a Retry-After of %s: %+v %+v", limiter.LeaseRetryAfter, c, d)
	}
	if _, d, _ := l.Acquire(ctx, "other"); !d.Allowed {
		t.Fatal("another key has its own leases")
	}
	if _, err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Release(ctx, a); !errors.Is(err, limiter.ErrLeaseUnknown) {
		t.Fatalf("released twice: %v, want ErrLeaseUnknown", err)
	}
	if _, d, _ := l.Acquire(ctx, "k"); !d.Allowed {
		t.Fatalf("a released slot is free again: %+v", d)
	}
}

func TestLeasesNeverReleasedExpireAndAreCounted(t *testing.T) {
	clock := &manualClock{t: time.Unix(1_700_000_000, 0)}
	st := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
	l := newLeases(t, st, 2, 10*time.Second)
	ctx := context.Background()
	old, _, _ := l.Acquire(ctx, "k")
	clock.Add(4 * time.Second)
	l.Acquire(ctx, "k")
	clock.Add(5 * time.Second)
	_, d, _ := l.Acquire(ctx, "k")
	if d.Allowed || d.RetryAfter != limiter.LeaseRetryAfter {
		t.Fatalf("full: %+v", d)
	}
	clock.Add(500 * time.Millisecond)
	if _, d, _ = l.Acquire(ctx, "k"); d.Allowed || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("the earliest expiry, 0.5 s away, bounds Retry-After: %+v", d)
	}
	clock.Add(500 * time.Millisecond)
	_, d, _ = l.Acquire(ctx, "k")
	if !d.Allowed || d.Expired != 1 || d.InFlight != 2 {
		t.Fatalf("the first lease expired at its TTL and is counted: %+v", d)
	}
	if n, err := l.Release(ctx, old); !errors.Is(err, limiter.ErrLeaseUnknown) || n != 0 {
		t.Fatalf("releasing an expired lease: %d %v, want ErrLeaseUnknown", n, err)
	}
}

func TestLeasesHoldTheLimitUnderConcurrency(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	l := newLeases(t, st, 5, time.Minute)
	ctx := context.Background()
	var mu sync.Mutex
	var held []limiter.Lease
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if lease, d, _ := l.Acquire(ctx, "k"); d.Allowed {
				mu.Lock()
				held = append(held, lease)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(held) != 5 || st.Leases("k") != 5 {
		t.Fatalf("%d leases taken, %d held, want 5", len(held), st.Leases("k"))
	}
	for _, lease := range held {
		if _, err := l.Release(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	if st.Leases("k") != 0 {
		t.Fatalf("%d leases left", st.Leases("k"))
	}
}

type failingLeaser struct{ *limiter.MemoryStore }

var errDown = errors.New("down")

func (failingLeaser) AcquireLease(context.Context, string, limiter.LeaseLimit, string, time.Duration) (limiter.LeaseDecision, error) {
	return limiter.LeaseDecision{}, errDown
}

func TestLeasesFailPolicy(t *testing.T) {
	ctx := context.Background()
	st := failingLeaser{limiter.NewMemoryStore(limiter.MemoryConfig{})}
	for _, tc := range []struct {
		policy  limiter.FailPolicy
		allowed int
		failure limiter.Failure
	}{
		{limiter.FailOpen, 3, limiter.FailureOpen},
		{limiter.FailClosed, 0, limiter.FailureClosed},
		{limiter.FailLocal, 2, limiter.FailureLocal},
	} {
		l, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: 2}, Store: st, FailPolicy: tc.policy})
		if err != nil {
			t.Fatal(err)
		}
		allowed := 0
		var taken []limiter.Lease
		for range 3 {
			lease, d, err := l.Acquire(ctx, "k")
			if !errors.Is(err, errDown) || d.Failure != tc.failure {
				t.Fatalf("%s: %+v %v", tc.policy, d, err)
			}
			if d.Allowed {
				allowed++
				taken = append(taken, lease)
			}
		}
		if allowed != tc.allowed {
			t.Fatalf("%s: %d admitted, want %d", tc.policy, allowed, tc.allowed)
		}
		for _, lease := range taken {
			if _, err := l.Release(ctx, lease); err != nil {
				t.Fatalf("%s: release: %v", tc.policy, err)
			}
		}
	}
}

func TestNewLeasesRefusesBadLimitsAndStores(t *testing.T) {
	st := limiter.NewMemoryStore(limiter.MemoryConfig{})
	if _, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: 0}, Store: st}); err == nil {
		t.Fatal("limit 0 accepted")
	}
	if _, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: 1, TTL: time.Microsecond}, Store: st}); err == nil {
		t.Fatal("a TTL below 1ms accepted")
	}
	type plain struct{ limiter.Store }
	if _, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: 1}, Store: plain{st}}); !errors.Is(err, limiter.ErrLeasesNotSupported) {
		t.Fatalf("a store without leases: %v", err)
	}
	l := newLeases(t, st, 1, 0)
	if l.Limit().TTL != limiter.DefaultLeaseTTL {
		t.Fatalf("default TTL %s", l.Limit().TTL)
	}
}

type countingLeaser struct {
	failingLeaser
	calls int
}

func (c *countingLeaser) AcquireLease(ctx context.Context, key string, lim limiter.LeaseLimit, id string, timeout time.Duration) (limiter.LeaseDecision, error) {
	c.calls++
	return c.failingLeaser.AcquireLease(ctx, key, lim, id, timeout)
}

// With the limiters' Guard, a failing store opens the shared breaker and
// later leases are decided by the fail policy without calling it.
func TestLeasesShareTheGuardsBreaker(t *testing.T) {
	st := &countingLeaser{failingLeaser: failingLeaser{limiter.NewMemoryStore(limiter.MemoryConfig{})}}
	g := limiter.NewGuard(limiter.GuardConfig{Store: "test", Breaker: limiter.BreakerConfig{Threshold: 2, Cooldown: time.Hour}})
	defer g.Close()
	l, err := limiter.NewLeases(limiter.LeasesConfig{Limit: limiter.LeaseLimit{Limit: 1}, Store: st, FailPolicy: limiter.FailClosed, Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_, d, err := l.Acquire(context.Background(), "k")
		if d.Failure != limiter.FailureClosed || err == nil {
			t.Fatalf("acquire %d: %+v %v", i, d, err)
		}
		if i >= 2 && !errors.Is(err, limiter.ErrCircuitOpen) {
			t.Fatalf("acquire %d after 2 failures: %v, want the open breaker's error", i, err)
		}
	}
	if st.calls != 2 || g.Breaker().State() != limiter.CircuitOpen {
		t.Fatalf("the store was called %d times (want 2), breaker %v", st.calls, g.Breaker().State())
	}
}
