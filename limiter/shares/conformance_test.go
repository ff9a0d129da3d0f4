package shares_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// admission is one admitted decision: it happened between start and end (local clock, which
// on one machine is Redis's).
type admission struct{ start, end time.Time }

// replicaLoad runs callers[i] goroutines on replica ls[i] (callers[0] on each when it has
// one element), each deciding on key as fast as it can (or once per pace, when set) until
// stop, and returns every admission sorted by start.
func replicaLoad(t testing.TB, ls []*limiter.Limiter, key string, callers []int, pace time.Duration, stop <-chan struct{}) []admission {
	t.Helper()
	var mu sync.Mutex
	var all []admission
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i, l := range ls {
		n := callers[0]
		if len(callers) > 1 {
			n = callers[i]
		}
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []admission
				defer func() { mu.Lock(); all = append(all, mine...); mu.Unlock() }()
				var tick <-chan time.Time
				if pace > 0 {
					tk := time.NewTicker(pace)
					defer tk.Stop()
					tick = tk.C
				}
				for {
					if tick != nil {
						select {
						case <-stop:
							return
						case <-tick:
						}
					} else {
						select {
						case <-stop:
							return
						default:
						}
					}
					start := time.Now()
					d, err := l.Allow(context.Background(), key)
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
					if d.Allowed {
						mine = append(mine, admission{start, time.Now()})
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.SortFunc(all, func(a, b admission) int { return a.start.Compare(b.start) })
	return all
}

// replicas returns n Limiters of lim, each on shares of its own Redis store on srv (n replicas).
// The load starves the machine's two cores: cfg.Timeout should be long, or give-backs time out
// and their units are lost (expired charged), which the tests would count as refusals.
func replicas(t testing.TB, srv *redistest.Server, lim limiter.Limit, n int, cfg shares.Config) []*limiter.Limiter {
	t.Helper()
	var ls []*limiter.Limiter
	for range n {
		c := cfg
		c.Store = newRedisStore(t, srv)
		st, err := shares.New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := st.Close(ctx); err != nil {
				t.Error(err)
			}
		})
		ls = append(ls, newLimiter(t, lim, st))
	}
	return ls
}

// TestSharesTwoReplicasHoldEachWindow: two replicas hammering one key for several windows
// admit at most the quota in each fixed window (the bound is none). A decision whose call
// straddled a window's end may belong to either window: it is counted in neither.
func TestSharesTwoReplicasHoldEachWindow(t *testing.T) {
	srv := redistest.Single(t)
	const period, windows = 300 * time.Millisecond, 6
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 500, Period: period, AlignWindows: true}
	ls := replicas(t, srv, lim, 2, shares.Config{Interval: 50 * time.Millisecond, Timeout: 5 * time.Second})
	stop := make(chan struct{})
	time.AfterFunc(windows*period, func() { close(stop) })
	all := replicaLoad(t, ls, "fw", []int{4}, 0, stop)
	per := map[int64]int64{}
	for _, a := range all {
		w0, w1 := a.start.UnixNano()/int64(period), a.end.UnixNano()/int64(period)
		if w0 == w1 {
			per[w0]++
		}
	}
	t.Logf("admitted per window of %s (quota %d): %v", period, lim.Rate, per)
	full := 0
	for w, n := range per {
		if n > lim.Rate {
			t.Errorf("window %d admitted %d, quota %d", w, n, lim.Rate)
		}
		if n >= lim.Rate*9/10 {
			full++
		}
	}
	if full < windows-2 { // the first and last windows are partly run
		t.Errorf("only %d of %d windows admitted 90%% of the quota: %v", full, windows, per)
	}
}

// TestSharesTwoReplicasHoldEverySpan: on sliding_log (exact: at most the quota in any span of
// a Period) and gcra (at most Burst + Rate·W/Period in any span W), two replicas admit beyond
// the rule at most the stated bound, 2 × the largest chunk, in any span of a Period; and from
// the fresh key, never more than the rule's total.
func TestSharesTwoReplicasHoldEverySpan(t *testing.T) {
	srv := redistest.Single(t)
	const period, callers = 400 * time.Millisecond, 4 // callers per replica
	for _, alg := range []limiter.Algorithm{limiter.SlidingLog, limiter.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			lim := limiter.Limit{Algorithm: alg, Rate: 200, Period: period}
			ls := replicas(t, srv, lim, 2, shares.Config{Interval: 50 * time.Millisecond, Timeout: 5 * time.Second})
			stop := make(chan struct{})
			time.AfterFunc(5*period, func() { close(stop) })
			all := replicaLoad(t, ls, "span-"+string(alg), []int{callers}, 0, stop)
			bound := 2 * int64(float64(lim.Quota())*shares.DefaultMaxFraction)
			allowed := func(span time.Duration) int64 { // the rule's most in a span
				if alg == limiter.GCRA {
					return lim.Quota() + int64(float64(lim.Rate)*float64(span)/float64(period))
				}
				return lim.Rate
			}
			j, most := 0, int64(0)
			for i, a := range all { // spans [a.start, a.start+period): counts all started in it
				for j < len(all) && all[j].start.Before(a.start.Add(period)) {
					j++
				}
				most = max(most, int64(j-i))
			}
			t.Logf("%s: at most %d admitted in a span of %s, rule %d + bound %d", alg, most, period, allowed(period), bound)
			// A decision is counted by its call's start: each of the 8 callers may have one
			// call that started in the span and was decided after it.
			if slack := int64(2 * callers); most > allowed(period)+bound+slack {
				t.Errorf("a span admitted %d, rule %d + bound %d + %d calls in flight", most, allowed(period), bound, slack)
			}
			total, span := int64(len(all)), all[len(all)-1].end.Sub(all[0].start)
			if total > allowed(span)+bound && alg == limiter.GCRA {
				t.Errorf("gcra admitted %d in %s from a fresh key, rule %d + bound %d", total, span, allowed(span), bound)
			}
			if total < allowed(span)*8/10 && alg == limiter.GCRA {
				t.Errorf("gcra admitted %d in %s, below 80%% of the rule's %d", total, span, allowed(span))
			}
		})
	}
}
