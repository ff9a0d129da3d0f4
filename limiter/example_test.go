package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// stoppedClock is a clock that does not move, so that the examples print
// the same durations on every run.
func stoppedClock() time.Time { return time.Unix(1_700_000_000, 0) }

// redis_rate.PerMinute(10) is a GCRA limit of 10 per minute with a burst
// of 10: gcra with Rate 10 and Burst 10 (or Burst 0, which here means
// Burst = Rate, where redis_rate's Burst 0 refuses everything).
func Example_fromRedisRate() {
	lim := limiter.PerMinute(limiter.GCRA, 10) // Burst 0: the bucket holds Rate
	l, err := limiter.New(limiter.Config{
		Limit: lim,
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: stoppedClock}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, _ := l.AllowN(ctx, "user:42", 4) // redis_rate: limiter.AllowN(ctx, key, limit, 4)
	fmt.Println(d.Allowed, d.Admitted, d.Remaining, d.RetryAfter, d.ResetAfter)
	d, _ = l.AllowN(ctx, "user:42", 7) // does not fit: nothing is taken
	fmt.Println(d.Allowed, d.Admitted, d.Remaining, d.RetryAfter)
	// Output:
	// true 4 6 0s 24s
	// false 0 6 6s
}

// Peek is redis_rate's AllowN with n = 0 and ulule/limiter's Peek: the
// key's state without taking anything.
func ExampleLimiter_Peek() {
	l, err := limiter.New(limiter.Config{
		Limit: limiter.PerMinute(limiter.FixedWindow, 3),
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: stoppedClock}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		l.Peek(ctx, "user:42") // takes nothing
	}
	d, _ := l.AllowN(ctx, "user:42", 3)
	fmt.Println("after 5 peeks, 3 taken:", d.Allowed)
	p, _ := l.Peek(ctx, "user:42")
	fmt.Println("peek:", p.Allowed, p.Remaining, p.RetryAfter > 0)
	p, _ = l.PeekN(ctx, "other", 2) // would a cost of 2 pass?
	fmt.Println("peek cost 2:", p.Allowed, p.Remaining, p.Admitted)
	// Output:
	// after 5 peeks, 3 taken: true
	// peek: false 0 true
	// peek cost 2: true 3 0
}

// AllowAtMost is redis_rate's AllowAtMost: take up to n units, as many as
// fit, in one atomic step.
func ExampleLimiter_AllowAtMost() {
	l, err := limiter.New(limiter.Config{
		Limit: limiter.PerMinute(limiter.TokenBucket, 10),
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: stoppedClock}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, n := range []int64{4, 8, 8} {
		d, _ := l.AllowAtMost(ctx, "batch:7", n)
		fmt.Printf("asked %d: admitted %d, %d left\n", n, d.Admitted, d.Remaining)
	}
	// Output:
	// asked 4: admitted 4, 6 left
	// asked 8: admitted 6, 0 left
	// asked 8: admitted 0, 0 left
}

// Reset is redis_rate's and ulule/limiter's Reset: the key's next request
// finds the full quota.
func ExampleLimiter_Reset() {
	l, err := limiter.New(limiter.Config{
		Limit: limiter.PerHour(limiter.SlidingLog, 2),
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: stoppedClock}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	l.AllowN(ctx, "login:alice", 2)
	d, _ := l.Allow(ctx, "login:alice")
	fmt.Println("before reset:", d.Allowed)
	if err := l.Reset(ctx, "login:alice"); err != nil {
		panic(err)
	}
	d, _ = l.Allow(ctx, "login:alice")
	fmt.Println("after reset:", d.Allowed, d.Remaining)
	// Output:
	// before reset: false
	// after reset: true 1
}

// ulule/limiter's "1000-H" (its Redis store: a window that starts at a
// key's first request and counts refused requests too) is closest to
// fixed_window with Rate 1000 and Period one hour. Its Peek, Reset and
// Increment(ctx, key, count) are Peek, Reset and AllowN here.
func Example_fromUlule() {
	l, err := limiter.New(limiter.Config{
		Limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1000, Period: time.Hour},
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: stoppedClock}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, _ := l.AllowN(ctx, "ip:10.0.0.1", 998) // ulule: Increment(ctx, key, 998)
	fmt.Println(d.Allowed, d.Remaining)
	d, _ = l.AllowN(ctx, "ip:10.0.0.1", 5) // refused: not counted, unlike ulule
	fmt.Println(d.Allowed, d.Remaining)
	p, _ := l.Peek(ctx, "ip:10.0.0.1") // ulule: Peek; Reached is !p.Allowed
	fmt.Println(!p.Allowed, p.Remaining)
	// Output:
	// true 2
	// false 2
	// false 2
}

// golang.org/x/time/rate's rate.NewLimiter(rate.Every(100*time.Millisecond), 5)
// is a token bucket of 5 refilled at 10 per second, shared by every
// process on the same store.
func Example_fromXTimeRate() {
	l, err := limiter.New(limiter.Config{
		Limit: limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 10, Period: time.Second, Burst: 5},
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: stoppedClock}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	n := 0
	for i := 0; i < 8; i++ {
		if d, _ := l.Allow(ctx, "worker"); d.Allowed { // x/time/rate: lim.Allow()
			n++
		}
	}
	d, _ := l.Allow(ctx, "worker")
	// Instead of Wait: sleep RetryAfter (bounded by the caller's context) and ask again.
	fmt.Println(n, d.Allowed, d.RetryAfter)
	// Output:
	// 5 false 100ms
}
