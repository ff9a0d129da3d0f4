package limitertest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// inspect runs the tests of PeekN, AllowAtMost and Reset for a store that
// is a limiter.Inspector, through a Limiter as callers use them.
func (c *suite) inspect(t *testing.T) {
	t.Run("peeking takes nothing: after many peeks the full quota is still admitted", c.peekNeverConsumes)
	t.Run("a peek answers for the cost asked, with the key's remaining as it is", c.peekCost)
	t.Run("reset gives the whole budget back", c.reset)
	t.Run("allow-at-most admits what fits and says how many", c.atMost)
}

// limiter is a Limiter on the suite's store that fails closed with a
// generous deadline: these tests are about semantics, not timing.
func (c *suite) limiter(t *testing.T, lim limiter.Limit) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(limiter.Config{Limit: lim, Store: c.store, FailPolicy: limiter.FailClosed, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustDecide returns a function that checks a Limiter's answer for what.
func mustDecide(t *testing.T, what string) func(limiter.Decision, error) limiter.Decision {
	return func(d limiter.Decision, err error) limiter.Decision {
		t.Helper()
		return checked(t, what, d, err)
	}
}

func checked(t *testing.T, what string, d limiter.Decision, err error) limiter.Decision {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if d.Failure != limiter.FailureNone {
		t.Fatalf("%s: Failure = %s from a store that decided", what, d.Failure)
	}
	if d.Remaining < 0 || d.ResetAfter < 0 || d.RetryAfter < 0 || d.Delay < 0 || d.Admitted < 0 {
		t.Fatalf("%s: negative field in %+v", what, d)
	}
	return d
}

func (c *suite) peekNeverConsumes(t *testing.T) {
	const quota = 5
	l := c.limiter(t, c.longLimit(quota))
	ctx := context.Background()
	key := c.key(t, "k")
	for i := 0; i < 3*quota; i++ {
		d := mustDecide(t, "peek at a fresh key")(l.Peek(ctx, key))
		if !d.Allowed || d.Remaining != quota || d.Admitted != 0 || d.RetryAfter != 0 || d.ResetAfter > time.Hour {
			t.Fatalf("peek %d at a fresh key: %+v, want allowed, %d remaining, nothing admitted, no retry", i+1, d, quota)
		}
	}
	for i := int64(1); i <= quota; i++ {
		d := mustDecide(t, "allow after peeks")(l.Allow(ctx, key))
		if !d.Allowed || d.Admitted != 1 || d.Remaining != quota-i {
			t.Fatalf("request %d of %d after the peeks: %+v, want allowed, 1 admitted, %d remaining", i, quota, d, quota-i)
		}
		p := mustDecide(t, "peek between requests")(l.Peek(ctx, key))
		if p.Remaining != quota-i || p.Admitted != 0 || p.Allowed != (i < quota) {
			t.Fatalf("peek after request %d: %+v, want %d remaining, allowed %v, nothing admitted", i, p, quota-i, i < quota)
		}
		if p.ResetAfter <= 0 || p.ResetAfter > d.ResetAfter {
			t.Fatalf("peek after request %d: ResetAfter %s, want within (0, %s] (the request's)", i, p.ResetAfter, d.ResetAfter)
		}
	}
	p := mustDecide(t, "peek at an exhausted key")(l.Peek(ctx, key))
	if p.Allowed || p.RetryAfter <= 0 || p.RetryAfter > 2*c.longLimit(quota).Window() {
		t.Fatalf("peek at an exhausted key: %+v, want refused with a retry-after", p)
	}
	if d := mustDecide(t, "request after the last peek")(l.Allow(ctx, key)); d.Allowed {
		t.Fatalf("request over the quota after peeks allowed: %+v", d)
	}
}

func (c *suite) peekCost(t *testing.T) {
	const quota = 10
	l := c.limiter(t, c.longLimit(quota))
	ctx := context.Background()
	key := c.key(t, "k")
	mustDecide(t, "take 7")(l.AllowN(ctx, key, 7))
	for _, s := range []struct {
		cost    int64
		allowed bool
	}{{1, true}, {3, true}, {4, false}, {10, false}} {
		p := mustDecide(t, "peek")(l.PeekN(ctx, key, s.cost))
		if p.Allowed != s.allowed || p.Remaining != 3 || p.Admitted != 0 {
			t.Fatalf("PeekN(cost %d) with 3 left: %+v, want allowed %v, 3 remaining, nothing admitted", s.cost, p, s.allowed)
		}
		if s.allowed && p.RetryAfter != 0 || !s.allowed && p.RetryAfter <= 0 {
			t.Fatalf("PeekN(cost %d) with 3 left: RetryAfter %s, want 0 when allowed and > 0 when not", s.cost, p.RetryAfter)
		}
		if limiter.SpecOf(c.alg).Delays() && s.allowed {
			// The delay the cost would get: 7 queued ahead, one per 6 min.
			want := 7 * c.longLimit(quota).Interval()
			if p.Delay > want || p.Delay < want-time.Minute {
				t.Fatalf("PeekN(cost %d) on leaky_bucket: Delay %s, want about %s", s.cost, p.Delay, want)
			}
		}
	}
	if _, err := l.PeekN(ctx, key, quota+1); err == nil {
		t.Fatalf("PeekN with a cost above the quota: no error")
	}
	if d := mustDecide(t, "take the 3 peeked at")(l.AllowN(ctx, key, 3)); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("AllowN(3) after the peeks: %+v, want allowed with 0 remaining", d)
	}
}

func (c *suite) reset(t *testing.T) {
	const quota = 4
	l := c.limiter(t, c.longLimit(quota))
	ctx := context.Background()
	key := c.key(t, "k")
	other := c.key(t, "other")
	mustDecide(t, "exhaust")(l.AllowN(ctx, key, quota))
	mustDecide(t, "take 1 of another key")(l.AllowN(ctx, other, 1))
	if d := mustDecide(t, "over the quota")(l.Allow(ctx, key)); d.Allowed {
		t.Fatalf("request over the quota allowed: %+v", d)
	}
	if err := l.Reset(ctx, key); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if p := mustDecide(t, "peek after reset")(l.Peek(ctx, key)); !p.Allowed || p.Remaining != quota {
		t.Fatalf("peek after Reset: %+v, want a fresh key (allowed, %d remaining)", p, quota)
	}
	if d := mustDecide(t, "the whole quota after reset")(l.AllowN(ctx, key, quota)); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("AllowN(quota) after Reset: %+v, want allowed with 0 remaining", d)
	}
	if p := mustDecide(t, "peek at the other key")(l.Peek(ctx, other)); p.Remaining != quota-1 {
		t.Fatalf("another key after Reset: %+v, want its own state (%d remaining)", p, quota-1)
	}
	if err := l.Reset(ctx, c.key(t, "never-used")); err != nil {
		t.Fatalf("Reset of an unknown key: %v", err)
	}
}

func (c *suite) atMost(t *testing.T) {
	const quota = 10
	l := c.limiter(t, c.longLimit(quota))
	ctx := context.Background()
	key := c.key(t, "k")
	for _, s := range []struct {
		n, admitted, remaining int64
	}{
		{4, 4, 6},
		{8, 6, 0}, // only 6 fit: they are taken
		{1, 0, 0},
		{100, 0, 0},
	} {
		d := mustDecide(t, "AllowAtMost")(l.AllowAtMost(ctx, key, s.n))
		if d.Admitted != s.admitted || d.Allowed != (s.admitted > 0) || d.Remaining != s.remaining {
			t.Fatalf("AllowAtMost(%d): %+v, want %d admitted, %d remaining", s.n, d, s.admitted, s.remaining)
		}
		if !d.Allowed && d.RetryAfter <= 0 {
			t.Fatalf("AllowAtMost(%d) refused without a retry-after: %+v", s.n, d)
		}
	}
	// Refused, AllowAtMost answers for one unit: its RetryAfter is when
	// one will fit, as a peek at a cost of 1 says just after.
	refused := mustDecide(t, "refused AllowAtMost")(l.AllowAtMost(ctx, key, quota))
	peek := mustDecide(t, "peek at one unit")(l.PeekN(ctx, key, 1))
	if refused.Allowed || refused.RetryAfter < peek.RetryAfter || refused.RetryAfter > peek.RetryAfter+time.Second {
		t.Fatalf("refused AllowAtMost(%d): RetryAfter %s, want about %s (when one unit fits)", quota, refused.RetryAfter, peek.RetryAfter)
	}
	if d := mustDecide(t, "AllowAtMost above the quota")(l.AllowAtMost(ctx, c.key(t, "fresh"), 1000)); d.Admitted != quota || d.Remaining != 0 {
		t.Fatalf("AllowAtMost(1000) on a fresh key of quota %d: %+v, want the quota admitted", quota, d)
	}
	if d := mustDecide(t, "AllowN")(l.AllowN(ctx, c.key(t, "n"), 3)); d.Admitted != 3 {
		t.Fatalf("AllowN(3): Admitted = %d, want 3", d.Admitted)
	}
	if _, err := l.AllowAtMost(ctx, key, 0); err == nil {
		t.Fatalf("AllowAtMost(0): no error")
	}
}

// AtMostContention has len(stores) clients × perClient goroutines take
// random amounts (1 to 7 units) of one key per algorithm with
// AllowAtMost, at once, until each has been refused, with a limit of 100
// per hour. The units admitted in all must be exactly the quota (for
// sliding_window, whose key is fresh, at least the quota and at most
// twice it, its documented bound across a window boundary), and every
// answer's Admitted must be within what was asked. It returns the units
// admitted per algorithm.
func AtMostContention(t *testing.T, stores []limiter.Store, perClient int) map[limiter.Algorithm]int64 {
	t.Helper()
	const quota = 100
	run := uniqueRun()
	out := map[limiter.Algorithm]int64{}
	for _, a := range limiter.AllAlgorithms() {
		lim := limiter.Limit{Algorithm: a, Rate: quota, Period: time.Hour, Burst: quota}
		key := "atmost:" + run + ":" + string(a)
		var admitted atomic.Int64
		var errs sync.Map
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, s := range stores {
			l, err := limiter.New(limiter.Config{Limit: lim, Store: s, FailPolicy: limiter.FailClosed, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			for g := 0; g < perClient; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for {
						n := 1 + rand.Int64N(7)
						d, err := l.AllowAtMost(context.Background(), key, n)
						if err != nil {
							errs.Store(err.Error(), true)
							return
						}
						if d.Admitted < 0 || d.Admitted > n || d.Allowed != (d.Admitted > 0) {
							errs.Store("inconsistent answer", true)
							return
						}
						if !d.Allowed {
							return
						}
						admitted.Add(d.Admitted)
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		errs.Range(func(k, _ any) bool {
			t.Errorf("%s: AllowAtMost under contention: %s", a, k)
			return true
		})
		n := admitted.Load()
		if !limiter.SpecOf(a).Exact() {
			if n < quota || n > 2*quota {
				t.Errorf("%s: %d clients × %d goroutines admitted %d units, want within [%d, %d]", a, len(stores), perClient, n, quota, 2*quota)
			}
		} else if n != quota {
			t.Errorf("%s: %d clients × %d goroutines admitted %d units with AllowAtMost, want exactly %d", a, len(stores), perClient, n, quota)
		}
		out[a] = n
	}
	return out
}
