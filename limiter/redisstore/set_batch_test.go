package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// scriptCalls is how many scripts srv has run (EVALSHA and EVAL).
func scriptCalls(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	info, err := srv.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, cmd := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
		calls, _, _ := strings.Cut(strings.TrimPrefix(info[cmd], "calls="), ",")
		if calls != "" {
			v, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", cmd, info[cmd], err)
			}
			n += v
		}
	}
	return n
}

// Sets decided at once by many callers share script calls, as single
// decisions do, and each still takes its cost exactly once.
func TestConcurrentSetsShareScriptCalls(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 8})
	month := limiter.PerCalendar(1<<20, &limiter.Calendar{Unit: limiter.Month, Location: time.UTC})
	var ls []*limiter.Limiter
	for _, lim := range []limiter.Limit{
		limiter.PerMinute(limiter.SlidingWindow, 1<<20),
		{Algorithm: limiter.TokenBucket, Rate: 1 << 20, Period: time.Minute},
		month,
	} {
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: limiter.FailClosed, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	set, err := limiter.NewSet(ls...)
	if err != nil {
		t.Fatal(err)
	}
	const callers, each, orgs = 64, 20, 4
	before := scriptCalls(t, srv)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			user, org := "batched:user"+strconv.Itoa(g), "batched:org"+strconv.Itoa(g%orgs)
			out := make([]limiter.Decision, 3)
			for range each {
				ok, err := set.Decide(context.Background(), limiter.ModeConsume, []string{user, user, org}, []int64{1, 7, 1}, out)
				if err != nil || !ok {
					t.Errorf("set of %s: %v %v %+v", user, ok, err, out)
					return
				}
			}
		})
	}
	wg.Wait()
	calls := scriptCalls(t, srv) - before
	if calls >= callers*each {
		t.Fatalf("%d sets took %d script calls: no set shared one", callers*each, calls)
	}
	for o := range orgs {
		d, err := ls[2].PeekN(context.Background(), "batched:org"+strconv.Itoa(o), 1)
		if want := int64(1<<20 - callers/orgs*each); err != nil || d.Remaining != want {
			t.Fatalf("organisation %d: %d remaining (%v), want %d: a take was lost or counted twice", o, d.Remaining, err, want)
		}
	}
	t.Logf("%d sets in %d script calls", callers*each, calls)
}

// A set refused by its last part leaves no key of its other parts behind:
// what they took is given back, and a state given back to nothing is a
// fresh key's, not an empty one kept until it expires.
func TestRefusedSetLeavesNoKeys(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL()})
	ctx := context.Background()
	gate := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1, Period: time.Hour}
	if d, err := store.Decide(ctx, "fresh:org", gate, 1); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	var parts []limiter.Part
	for _, a := range limiter.AllAlgorithms() {
		parts = append(parts, limiter.Part{Key: "fresh:user", Limit: limiter.Limit{Algorithm: a, Rate: 10, Period: time.Hour, Burst: 10}, Cost: 2})
	}
	parts = append(parts, limiter.Part{Key: "fresh:org", Limit: gate, Cost: 1})
	out := make([]limiter.Decision, len(parts))
	ok, err := store.DecideSet(ctx, parts, limiter.ModeConsume, time.Second, out)
	if err != nil || ok || out[len(parts)-1].Allowed {
		t.Fatalf("a set over the organisation's spent quota: %v %v %+v", ok, err, out)
	}
	for i, p := range parts[:len(parts)-1] {
		if !out[i].Allowed || out[i].Admitted != 0 || out[i].Remaining != 10 {
			t.Errorf("%s: %+v, want allowed alone with 10 remaining, nothing admitted", p.Limit.Algorithm, out[i])
		}
		for _, k := range store.Keys(p.Key, p.Limit.Algorithm) {
			if n, err := srv.Do("EXISTS", k); err != nil || n != int64(0) {
				t.Errorf("%s: key %s left behind by a refused set (EXISTS %v, %v)", p.Limit.Algorithm, k, n, err)
			}
		}
	}
}
