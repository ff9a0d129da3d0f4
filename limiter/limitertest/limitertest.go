// Package limitertest is the conformance suite every limiter.Store passes:
// the memory store, a single Redis server and a Redis Cluster run the same
// tests, so the six algorithms behave the same on all of them.
//
// The suite runs on the store's own clock (real time), so it only waits out
// short windows; exact values at chosen instants are checked by the memory
// store's semantics tests with a controllable clock, and by the Redis
// store's test that runs its scripts on the same instants.
package limitertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// NewStore returns the store under test. It may return the same store for
// every call: the suite gives each test keys of its own.
type NewStore func(t *testing.T) limiter.Store

// Run runs the conformance suite against the stores newStore returns. The
// subtests run in parallel and take about two seconds of waiting in all.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	RunAlgorithms(t, newStore, limiter.AllAlgorithms())
	if st := newStore(t); isSetStore(st) {
		RunSets(t, st)
	}
}

func isSetStore(st limiter.Store) bool {
	_, ok := st.(limiter.SetStore)
	return ok
}

// RunAlgorithms is Run for the algorithms algs alone, for a store that
// supports only some.
func RunAlgorithms(t *testing.T, newStore NewStore, algs []limiter.Algorithm) {
	t.Helper()
	run := uniqueRun()
	for _, a := range algs {
		t.Run(string(a), func(t *testing.T) {
			t.Parallel()
			c := &suite{store: newStore(t), alg: a, run: run}
			t.Run("admits exactly the quota from a fresh key, counting remaining down, then rejects with a retry-after", c.quota)
			t.Run("a cost above 1 takes that many units and is rejected when they are not left", c.cost)
			t.Run("a cost above the quota is an error, not a decision", c.costAboveQuota)
			t.Run("keys are isolated, including keys that differ only in braces, percent signs or unicode", c.isolation)
			t.Run("after waiting the retry-after a rejected request passes, and after the reset the full quota is back", c.recovery)
			if _, ok := c.store.(limiter.Inspector); ok {
				t.Run("peek, reset and allow-at-most", c.inspect)
			}
			if _, ok := c.store.(limiter.Reserver); ok && limiter.SupportsReservations(a) {
				t.Run("reservations", c.reservations)
			}
			if a == limiter.FixedWindow {
				t.Run("a calendar day admits its quota until the zone's next midnight", c.calendar)
			}
			if limiter.SpecOf(a).Delays() {
				t.Run("leaky bucket delays the k-th request of a burst by k-1 intervals", c.leakyDelay)
				t.Run("leaky bucket with NoDelay admits the burst at once but still counts it", c.leakyNoDelay)
			}
		})
	}
}

// uniqueRun distinguishes keys of different runs sharing one Redis.
func uniqueRun() string { return fmt.Sprintf("%08x", rand.Uint32()) }

type suite struct {
	store limiter.Store
	alg   limiter.Algorithm
	run   string
}

// key is a key unique to the calling test.
func (c *suite) key(t *testing.T, name string) string {
	return "conformance:" + c.run + ":" + t.Name() + ":" + name
}

func (c *suite) decide(t *testing.T, key string, lim limiter.Limit, cost int64) limiter.Decision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := c.store.Decide(ctx, key, lim, cost)
	if err != nil {
		t.Fatalf("%s Decide(%q, cost %d): %v", c.alg, key, cost, err)
	}
	if d.Limit != lim.Quota() {
		t.Fatalf("%s Decide(%q): Limit = %d, want the quota %d", c.alg, key, d.Limit, lim.Quota())
	}
	if d.Failure != limiter.FailureNone {
		t.Fatalf("%s Decide(%q): Failure = %s from a store that decided", c.alg, key, d.Failure)
	}
	if d.Remaining < 0 || d.ResetAfter < 0 || d.RetryAfter < 0 || d.Delay < 0 {
		t.Fatalf("%s Decide(%q): negative field in %+v", c.alg, key, d)
	}
	if d.Allowed && d.RetryAfter != 0 {
		t.Fatalf("%s Decide(%q): allowed with RetryAfter %s", c.alg, key, d.RetryAfter)
	}
	if !d.Allowed && d.Delay != 0 {
		t.Fatalf("%s Decide(%q): rejected with Delay %s", c.alg, key, d.Delay)
	}
	return d
}

// longLimit is a limit whose window is long and whose refill is slow enough
// that nothing resets or refills noticeably during a test.
func (c *suite) longLimit(quota int64) limiter.Limit {
	return limiter.Limit{Algorithm: c.alg, Rate: quota, Period: time.Hour, Burst: quota}
}

func (c *suite) quota(t *testing.T) {
	const quota = 5
	lim := c.longLimit(quota)
	key := c.key(t, "k")
	for i := int64(1); i <= quota; i++ {
		d := c.decide(t, key, lim, 1)
		if !d.Allowed {
			t.Fatalf("request %d of %d rejected: %+v", i, quota, d)
		}
		if d.Remaining != quota-i {
			t.Fatalf("request %d: Remaining = %d, want %d", i, d.Remaining, quota-i)
		}
		if d.ResetAfter <= 0 || d.ResetAfter > 2*lim.Window() {
			t.Fatalf("request %d: ResetAfter = %s, want within (0, %s]", i, d.ResetAfter, 2*lim.Window())
		}
	}
	for i := 0; i < 3; i++ {
		d := c.decide(t, key, lim, 1)
		if d.Allowed {
			t.Fatalf("request %d over the quota of %d allowed: %+v", quota+1+i, quota, d)
		}
		if d.Remaining != 0 {
			t.Fatalf("rejected: Remaining = %d, want 0", d.Remaining)
		}
		if d.RetryAfter <= 0 || d.RetryAfter > 2*lim.Window() {
			t.Fatalf("rejected: RetryAfter = %s, want within (0, %s]", d.RetryAfter, 2*lim.Window())
		}
		if d.ResetAfter < d.RetryAfter {
			t.Fatalf("rejected: ResetAfter %s before RetryAfter %s", d.ResetAfter, d.RetryAfter)
		}
	}
}

func (c *suite) cost(t *testing.T) {
	lim := c.longLimit(10)
	key := c.key(t, "k")
	for _, s := range []struct {
		cost      int64
		allowed   bool
		remaining int64
	}{
		{4, true, 6},
		{4, true, 2},
		{4, false, 2}, // a rejected request takes nothing
		{3, false, 2},
		{2, true, 0},
		{1, false, 0},
	} {
		d := c.decide(t, key, lim, s.cost)
		if d.Allowed != s.allowed || d.Remaining != s.remaining {
			t.Fatalf("cost %d: Allowed %v Remaining %d, want %v %d (%+v)", s.cost, d.Allowed, d.Remaining, s.allowed, s.remaining, d)
		}
	}
}

func (c *suite) costAboveQuota(t *testing.T) {
	lim := c.longLimit(3)
	// A generous deadline: this test is about cost validation, not timing.
	l, err := limiter.New(limiter.Config{Limit: lim, Store: c.store, FailPolicy: limiter.FailClosed, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := c.key(t, "k")
	d, err := l.AllowN(context.Background(), key, 4)
	if !errors.Is(err, limiter.ErrCostExceedsLimit) || d.Allowed {
		t.Fatalf("cost 4 over quota 3: %+v, %v; want rejected with ErrCostExceedsLimit", d, err)
	}
	d, err = l.AllowN(context.Background(), key, 0)
	if !errors.Is(err, limiter.ErrInvalidCost) || d.Allowed {
		t.Fatalf("cost 0: %+v, %v; want rejected with ErrInvalidCost", d, err)
	}
	// Nothing was taken by the refused calls.
	d, err = l.AllowN(context.Background(), key, 3)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("cost 3 after refused calls: %+v, %v; want allowed with 0 remaining", d, err)
	}
}

func (c *suite) isolation(t *testing.T) {
	lim := c.longLimit(2)
	base := c.key(t, "")
	keys := []string{"a", "{a}", "%7Ba%7D", "%257Ba%257D", "{a", "a}", "{}", "", "%", "a:b", "a:{b}:c", "ключ", "键{値}", "a b"}
	// Exhaust the first key; every other one must still be fresh.
	for i := 0; i < 2; i++ {
		c.decide(t, base+keys[0], lim, 1)
	}
	if d := c.decide(t, base+keys[0], lim, 1); d.Allowed {
		t.Fatalf("key %q not exhausted: %+v", base+keys[0], d)
	}
	for _, k := range keys[1:] {
		if d := c.decide(t, base+k, lim, 1); !d.Allowed || d.Remaining != 1 {
			t.Fatalf("key %q after exhausting %q: %+v, want a fresh key (allowed, 1 remaining)", base+k, base+keys[0], d)
		}
	}
}

// shortLimit is a limit that resets or refills within a few hundred
// milliseconds.
func (c *suite) shortLimit() limiter.Limit {
	return limiter.Limit{Algorithm: c.alg, Rate: 3, Period: 300 * time.Millisecond, Burst: 3}
}

func (c *suite) recovery(t *testing.T) {
	lim := c.shortLimit()
	key := c.key(t, "k")
	var last limiter.Decision
	for i := 0; i < 3; i++ {
		last = c.decide(t, key, lim, 1)
	}
	d := c.decide(t, key, lim, 1)
	if d.Allowed {
		// The window may have ended during the burst on a slow machine:
		// exhaust again.
		for d.Allowed {
			last = d
			d = c.decide(t, key, lim, 1)
		}
	}
	bound := 2 * lim.Window()
	if d.RetryAfter <= 0 || d.RetryAfter > bound {
		t.Fatalf("rejected: RetryAfter = %s, want within (0, %s]", d.RetryAfter, bound)
	}
	time.Sleep(d.RetryAfter + 20*time.Millisecond)
	if d2 := c.decide(t, key, lim, 1); !d2.Allowed {
		t.Fatalf("after waiting RetryAfter %s: still rejected: %+v", d.RetryAfter, d2)
	} else {
		last = d2
	}
	if last.ResetAfter <= 0 || last.ResetAfter > bound {
		t.Fatalf("ResetAfter = %s, want within (0, %s]", last.ResetAfter, bound)
	}
	time.Sleep(last.ResetAfter + 20*time.Millisecond)
	if d3 := c.decide(t, key, lim, 1); !d3.Allowed || d3.Remaining != lim.Quota()-1 {
		t.Fatalf("after waiting ResetAfter %s: %+v, want the full quota back (allowed, %d remaining)", last.ResetAfter, d3, lim.Quota()-1)
	}
}

func (c *suite) leakyDelay(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 4, Period: time.Minute, Burst: 4} // one per 15 s
	key := c.key(t, "k")
	start := time.Now()
	for k := int64(1); k <= 4; k++ {
		d := c.decide(t, key, lim, 1)
		if !d.Allowed {
			t.Fatalf("request %d of a burst of 4 into an empty bucket of 4 rejected: %+v", k, d)
		}
		want := time.Duration(k-1) * 15 * time.Second
		// The bucket drains while the test runs: the delay is shorter by
		// at most the time elapsed.
		if elapsed := time.Since(start); d.Delay > want || d.Delay < want-elapsed-time.Millisecond {
			t.Fatalf("request %d: Delay = %s, want %s less at most %s elapsed", k, d.Delay, want, elapsed)
		}
	}
	if d := c.decide(t, key, lim, 1); d.Allowed {
		t.Fatalf("request 5 into a full bucket of 4 allowed: %+v", d)
	}
}

func (c *suite) leakyNoDelay(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 4, Period: time.Minute, Burst: 4, NoDelay: true}
	key := c.key(t, "k")
	for k := 1; k <= 4; k++ {
		if d := c.decide(t, key, lim, 1); !d.Allowed || d.Delay != 0 {
			t.Fatalf("request %d with NoDelay: %+v, want allowed without delay", k, d)
		}
	}
	if d := c.decide(t, key, lim, 1); d.Allowed {
		t.Fatalf("request 5 into a full bucket of 4 allowed: %+v", d)
	}
}

// ContentionResult is what Contention counted for one algorithm.
type ContentionResult struct {
	Algorithm limiter.Algorithm
	Allowed   int64
	Attempts  int64
}

// Contention hits one key per algorithm from len(stores) clients × perClient
// goroutines at once, each making several requests, with a limit whose
// window is an hour and whose refill takes minutes, so nothing resets
// during the test. fixed_window, sliding_log, token_bucket, leaky_bucket
// and gcra must admit exactly the quota; sliding_window, whose key is fresh,
// at least the quota and at most twice it (its documented bound, reached
// only if a window boundary fell inside the test). Pass the same store
// several times to model clients sharing one store.
func Contention(t *testing.T, stores []limiter.Store, perClient int) []ContentionResult {
	t.Helper()
	const quota = 100
	const perGoroutine = 3
	run := uniqueRun()
	var results []ContentionResult
	for _, a := range limiter.AllAlgorithms() {
		lim := limiter.Limit{Algorithm: a, Rate: quota, Period: time.Hour, Burst: quota}
		key := "contention:" + run + ":" + string(a)
		var allowed, attempts atomic.Int64
		var errs sync.Map
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, s := range stores {
			for g := 0; g < perClient; g++ {
				wg.Add(1)
				go func(s limiter.Store) {
					defer wg.Done()
					<-start
					for i := 0; i < perGoroutine; i++ {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						d, err := s.Decide(ctx, key, lim, 1)
						cancel()
						attempts.Add(1)
						if err != nil {
							errs.Store(err.Error(), true)
							continue
						}
						if d.Allowed {
							allowed.Add(1)
						}
					}
				}(s)
			}
		}
		close(start)
		wg.Wait()
		errs.Range(func(k, _ any) bool {
			t.Errorf("%s: store error under contention: %s", a, k)
			return true
		})
		n := allowed.Load()
		if !limiter.SpecOf(a).Exact() {
			if n < quota || n > 2*quota {
				t.Errorf("%s: %d clients × %d goroutines admitted %d, want within [%d, %d]", a, len(stores), perClient, n, quota, 2*quota)
			}
		} else if n != quota {
			t.Errorf("%s: %d clients × %d goroutines admitted %d of %d attempts, want exactly %d", a, len(stores), perClient, n, attempts.Load(), quota)
		}
		results = append(results, ContentionResult{Algorithm: a, Allowed: n, Attempts: attempts.Load()})
	}
	return results
}

// calendar runs on the store's clock: the refusal's RetryAfter and
// ResetAfter are the time to the next midnight in Tokyo, as far as the
// time the decisions took. A window that ends during an attempt (at
// 15:00Z, for a few ms) starts another.
func (c *suite) calendar(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	cal := &limiter.Calendar{Unit: limiter.Day, Location: loc}
	lim := limiter.PerCalendar(3, cal)
	for attempt := 0; ; attempt++ {
		key := c.key(t, fmt.Sprint(attempt))
		before := time.Now()
		for i := int64(1); i <= 3; i++ {
			if d := c.decide(t, key, lim, 1); !d.Allowed || d.Remaining != 3-i {
				t.Fatalf("request %d: %+v, want allowed with %d left", i, d, 3-i)
			}
		}
		d := c.decide(t, key, lim, 1)
		after := time.Now()
		_, end := cal.Window(before)
		if _, e := cal.Window(after); !e.Equal(end) && attempt == 0 {
			continue
		}
		const slack = time.Second // the store's clock against this one's
		if d.Allowed || d.RetryAfter != d.ResetAfter || d.ResetAfter > end.Sub(before)+slack || d.ResetAfter < end.Sub(after)-slack {
			t.Fatalf("the 4th request of the day: %+v, want refused until Tokyo's midnight, %s from now", d, end.Sub(after))
		}
		return
	}
}
