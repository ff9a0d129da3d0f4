package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// failingStore is a store whose errors the test switches on and off.
type failingStore struct {
	calls   atomic.Int64
	mu      sync.Mutex
	err     error // returned while non-nil
	healthy limiter.Store
}

func (f *failingStore) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return limiter.Decision{}, err
	}
	return f.healthy.Decide(ctx, key, lim, cost)
}

func (f *failingStore) Name() string { return "flaky" }

func (f *failingStore) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

var errStoreDown = errors.New("connection refused")

func TestFailPolicy(t *testing.T) {
	lim := limiter.PerMinute(limiter.FixedWindow, 3)
	tests := []struct {
		name    string
		policy  limiter.FailPolicy
		allowed []bool // five requests in a row
		failure limiter.Failure
	}{
		{"the default policy lets every request through and says it failed open", "", []bool{true, true, true, true, true}, limiter.FailureOpen},
		{"fail closed refuses every request", limiter.FailClosed, []bool{false, false, false, false, false}, limiter.FailureClosed},
		{"fail local enforces the limit with a local memory store", limiter.FailLocal, []bool{true, true, true, false, false}, limiter.FailureLocal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &failingStore{err: errStoreDown}
			l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.allowed {
				d, err := l.Allow(context.Background(), "k")
				if !errors.Is(err, errStoreDown) {
					t.Fatalf("request %d: err = %v, want it to wrap the store error", i, err)
				}
				if d.Allowed != want || d.Failure != tc.failure || d.Limit != 3 {
					t.Fatalf("request %d: got %+v, want allowed=%v failure=%s limit=3", i, d, want, tc.failure)
				}
				if !want && d.RetryAfter <= 0 {
					t.Fatalf("request %d: refused without a RetryAfter: %+v", i, d)
				}
			}
			if store.calls.Load() != int64(len(tc.allowed)) {
				t.Fatalf("store called %d times, want %d", store.calls.Load(), len(tc.allowed))
			}
		})
	}
}

func TestStoreRecoversAfterFailure(t *testing.T) {
	store := &failingStore{err: errStoreDown, healthy: limiter.NewMemoryStore(limiter.MemoryConfig{})}
	l, err := limiter.New(limiter.Config{Limit: limiter.PerMinute(limiter.TokenBucket, 2), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(context.Background(), "k"); err == nil || d.Failure != limiter.FailureOpen {
		t.Fatalf("while down: got %+v, %v", d, err)
	}
	store.setErr(nil)
	for i, want := range []bool{true, true, false} {
		d, err := l.Allow(context.Background(), "k")
		if err != nil || d.Failure != limiter.FailureNone || d.Allowed != want {
			t.Fatalf("after recovery, request %d: got %+v, %v; want allowed=%v from the store", i, d, err, want)
		}
	}
}

func TestBreaker(t *testing.T) {
	clock := newFakeClock()
	store := &failingStore{err: errStoreDown, healthy: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})}
	l, err := limiter.New(limiter.Config{
		Limit:   limiter.PerMinute(limiter.GCRA, 100),
		Store:   store,
		Breaker: limiter.BreakerConfig{Threshold: 3, Cooldown: 10 * time.Second, Now: clock.Now},
	})
	if err != nil {
		t.Fatal(err)
	}
	allow := func() (limiter.Decision, error) { return l.Allow(context.Background(), "k") }

	for i := 0; i < 3; i++ {
		if _, err := allow(); !errors.Is(err, errStoreDown) {
			t.Fatalf("failure %d: err = %v", i, err)
		}
	}
	if store.calls.Load() != 3 {
		t.Fatalf("store called %d times before the breaker opened, want 3", store.calls.Load())
	}
	t.Run("an open breaker does not call the store and fails open with ErrCircuitOpen", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			d, err := allow()
			if !errors.Is(err, limiter.ErrCircuitOpen) || limiter.ErrorKind(err) != "circuit_open" || !d.Allowed || d.Failure != limiter.FailureOpen {
				t.Fatalf("got %+v, %v (kind %q)", d, err, limiter.ErrorKind(err))
			}
		}
		clock.Advance(10*time.Second - time.Microsecond)
		if _, err := allow(); !errors.Is(err, limiter.ErrCircuitOpen) {
			t.Fatalf("just before the cooldown ends: err = %v", err)
		}
		if store.calls.Load() != 3 {
			t.Fatalf("store called %d times while open, want 3", store.calls.Load())
		}
	})
	t.Run("after the cooldown one probe reaches the store and a failed probe reopens", func(t *testing.T) {
		clock.Advance(time.Microsecond)
		if _, err := allow(); !errors.Is(err, errStoreDown) {
			t.Fatalf("probe: err = %v, want the store's error", err)
		}
		if store.calls.Load() != 4 {
			t.Fatalf("store called %d times, want 4 (one probe)", store.calls.Load())
		}
		if _, err := allow(); !errors.Is(err, limiter.ErrCircuitOpen) {
			t.Fatalf("after a failed probe: err = %v, want ErrCircuitOpen", err)
		}
	})
	t.Run("a successful probe closes the breaker", func(t *testing.T) {
		store.setErr(nil)
		clock.Advance(10 * time.Second)
		for i := 0; i < 3; i++ {
			d, err := allow()
			if err != nil || d.Failure != limiter.FailureNone || !d.Allowed {
				t.Fatalf("request %d after recovery: got %+v, %v", i, d, err)
			}
		}
		if store.calls.Load() != 7 {
			t.Fatalf("store called %d times, want 7", store.calls.Load())
		}
	})
}

// timeoutError is a net.Error that timed out, as a socket read returns.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

func TestErrorKind(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"no error has no kind", nil, ""},
		{"a context deadline is a timeout", fmt.Errorf("redis store: %w", context.DeadlineExceeded), "timeout"},
		{"an expired socket deadline is a timeout", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), "timeout"},
		{"a net.Error that timed out is a timeout", fmt.Errorf("dial: %w", timeoutError{}), "timeout"},
		{"a skipped call behind an open breaker is circuit_open", fmt.Errorf("x: %w", limiter.ErrCircuitOpen), "circuit_open"},
		{"anything else is an error", errStoreDown, "error"},
		{"a caller's cancellation is canceled, not a store failure", context.Canceled, "canceled"},
		{"a refused connection is an error, not a timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "error"},
		{"a refused dial under a deadline is still an error", errors.Join(context.DeadlineExceeded, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := limiter.ErrorKind(tc.err); got != tc.want {
				t.Fatalf("ErrorKind(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// blockingStore waits for its context to end, like a store that does not answer.
type blockingStore struct{}

func (blockingStore) Decide(ctx context.Context, _ string, _ limiter.Limit, _ int64) (limiter.Decision, error) {
	<-ctx.Done()
	return limiter.Decision{}, ctx.Err()
}

func (blockingStore) Name() string { return "blocking" }

func TestTimeoutFollowsPolicyWithinDeadline(t *testing.T) {
	l, err := limiter.New(limiter.Config{Limit: limiter.PerSecond(limiter.TokenBucket, 1), Store: blockingStore{},
		FailPolicy: limiter.FailClosed, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, err := l.Allow(context.Background(), "k")
	elapsed := time.Since(start)
	if limiter.ErrorKind(err) != "timeout" || d.Allowed || d.Failure != limiter.FailureClosed {
		t.Fatalf("got %+v, %v (kind %q), want a fail-closed timeout", d, err, limiter.ErrorKind(err))
	}
	if !raceEnabled && elapsed > time.Second {
		t.Fatalf("decision took %s with a 50ms timeout", elapsed)
	}
}

// observerFunc adapts a function to limiter.Observer.
type observerFunc func(ctx context.Context, operation string, elapsed time.Duration, err error)

func (f observerFunc) ObserveStore(ctx context.Context, operation string, elapsed time.Duration, err error) {
	f(ctx, operation, elapsed, err)
}

func TestObserverSeesEveryStoreCall(t *testing.T) {
	var ops []string
	var errs int
	store := &failingStore{healthy: limiter.NewMemoryStore(limiter.MemoryConfig{})}
	l, err := limiter.New(limiter.Config{Limit: limiter.PerSecond(limiter.SlidingLog, 5), Store: store,
		Observer: observerFunc(func(_ context.Context, op string, _ time.Duration, err error) {
			ops = append(ops, op)
			if err != nil {
				errs++
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	l.Allow(context.Background(), "k")
	store.setErr(errStoreDown)
	l.Allow(context.Background(), "k")
	l.AllowN(context.Background(), "k", 99) // invalid: never reaches the store
	if len(ops) != 2 || ops[0] != "sliding_log" || errs != 1 {
		t.Fatalf("observed %v with %d errors, want two sliding_log calls, one failed", ops, errs)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	mem := limiter.NewMemoryStore(limiter.MemoryConfig{})
	tests := []struct {
		name string
		cfg  limiter.Config
		want string
	}{
		{"a missing store is refused", limiter.Config{Limit: limiter.PerSecond(limiter.GCRA, 1)}, "Store is required"},
		{"an unknown algorithm is named", limiter.Config{Store: mem, Limit: limiter.Limit{Algorithm: "leaky", Rate: 1, Period: time.Second}}, `unknown algorithm "leaky"`},
		{"a zero rate is refused", limiter.Config{Store: mem, Limit: limiter.Limit{Algorithm: limiter.GCRA, Period: time.Second}}, "rate: must be > 0"},
		{"a period below a millisecond is refused", limiter.Config{Store: mem, Limit: limiter.Limit{Algorithm: limiter.GCRA, Rate: 1, Period: time.Microsecond}}, "period: must be at least 1ms"},
		{"a limit too large to count exactly is refused", limiter.Config{Store: mem, Limit: limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Burst: 1 << 40, Period: time.Hour}}, "more than 2^53"},
		{"an unknown fail policy is refused", limiter.Config{Store: mem, Limit: limiter.PerSecond(limiter.GCRA, 1), FailPolicy: "maybe"}, `unknown fail policy "maybe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := limiter.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// A Limiter on a MemoryStore calls the store directly when nothing else
// has to see the call; with an Observer or a breaker it goes the general
// way, so that they still see every decision, and either way a cost the
// quota refuses never reaches the store.
func TestMemoryStoreLimiterCallsAreObservedAndCostsChecked(t *testing.T) {
	ctx := context.Background()
	var observed int
	obs := observerFunc(func(context.Context, string, time.Duration, error) { observed++ })
	for _, cfg := range []limiter.Config{
		{},
		{Observer: obs},
		{Breaker: limiter.BreakerConfig{Threshold: 1}},
		{FailPolicy: limiter.FailLocal},
	} {
		cfg.Limit, cfg.Store = limiter.PerMinute(limiter.GCRA, 2), limiter.NewMemoryStore(limiter.MemoryConfig{})
		l, err := limiter.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := observed
		if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed || d.Admitted != 1 || d.Remaining != 1 || d.Limit != 2 {
			t.Fatalf("%+v: Allow = %+v, %v; want the first of 2 admitted", cfg, d, err)
		}
		if d, err := l.AllowN(ctx, "k", 3); !errors.Is(err, limiter.ErrCostExceedsLimit) || d.Allowed || d.Limit != 2 {
			t.Fatalf("%+v: AllowN(3) = %+v, %v; want ErrCostExceedsLimit", cfg, d, err)
		}
		if d, err := l.AllowN(ctx, "k", 0); !errors.Is(err, limiter.ErrInvalidCost) || d.Allowed {
			t.Fatalf("%+v: AllowN(0) = %+v, %v; want ErrInvalidCost", cfg, d, err)
		}
		if d, err := l.AllowN(ctx, "k", 2); err != nil || d.Allowed || d.Remaining != 1 || d.RetryAfter <= 0 {
			t.Fatalf("%+v: AllowN(2) = %+v, %v; want a refusal with 1 remaining", cfg, d, err)
		}
		if d, err := l.AllowN(ctx, "k", 1); err != nil || !d.Allowed || d.Admitted != 1 || d.Remaining != 0 {
			t.Fatalf("%+v: AllowN(1) = %+v, %v; want the last unit admitted", cfg, d, err)
		}
		if want := 3 * b2i(cfg.Observer != nil); observed-before != want {
			t.Fatalf("%+v: the Observer saw %d calls, want %d", cfg, observed-before, want)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
