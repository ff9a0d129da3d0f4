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
	return commandCalls(t, srv, "evalsha") + commandCalls(t, srv, "eval")
}

// commandCalls is how many times srv has run cmd (e.g. "pexpire"),
// scripts' calls included.
func commandCalls(t *testing.T, srv *redistest.Server, cmd string) int64 {
	t.Helper()
	info, err := srv.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	calls, _, _ := strings.Cut(strings.TrimPrefix(info["cmdstat_"+cmd], "calls="), ",")
	if calls == "" {
		return 0
	}
	n, err := strconv.ParseInt(calls, 10, 64)
	if err != nil {
		t.Fatalf("cmdstat_%s: %q: %v", cmd, info["cmdstat_"+cmd], err)
	}
	return n
}

// setOf is a set of lims on store, failing closed, each Limiter holding
// a Reserve's reservation for hold (0: limiter.DefaultHold).
func setOf(t *testing.T, store *redisstore.Store, hold time.Duration, lims ...limiter.Limit) (*limiter.Set, []*limiter.Limiter) {
	t.Helper()
	var ls []*limiter.Limiter
	for _, lim := range lims {
		l, err := limiter.New(limiter.Config{Limit: lim, Store: store, FailPolicy: limiter.FailClosed, Timeout: 10 * time.Second, Hold: hold})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	set, err := limiter.NewSet(ls...)
	if err != nil {
		t.Fatal(err)
	}
	return set, ls
}

// shareCalls runs each sets on every one of callers at once (caller g's
// i-th set by decide(g)) and fails unless srv ran fewer script calls
// than sets.
func shareCalls(t *testing.T, srv *redistest.Server, callers, each int, decide func(g int) (bool, []limiter.Decision, error)) {
	t.Helper()
	before := scriptCalls(t, srv)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for range each {
				if ok, out, err := decide(g); err != nil || !ok {
					t.Errorf("caller %d's set: %v %v %+v", g, ok, err, out)
					return
				}
			}
		})
	}
	wg.Wait()
	calls := scriptCalls(t, srv) - before
	if calls >= int64(callers*each) {
		t.Fatalf("%d sets took %d script calls: no set shared one", callers*each, calls)
	}
	t.Logf("%d sets in %d script calls", callers*each, calls)
}

// Sets decided at once by many callers share script calls, as single
// decisions do, and each still takes its cost exactly once.
func TestConcurrentSetsShareScriptCalls(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 8})
	month := limiter.PerCalendar(1<<20, &limiter.Calendar{Unit: limiter.Month, Location: time.UTC})
	set, ls := setOf(t, store, 0,
		limiter.PerMinute(limiter.SlidingWindow, 1<<20),
		limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1 << 20, Period: time.Minute},
		month)
	const callers, each, orgs = 64, 20, 4
	shareCalls(t, srv, callers, each, func(g int) (bool, []limiter.Decision, error) {
		user, org := "batched:user"+strconv.Itoa(g), "batched:org"+strconv.Itoa(g%orgs)
		out := make([]limiter.Decision, 3)
		ok, err := set.Decide(context.Background(), limiter.ModeConsume, []string{user, user, org}, []int64{1, 7, 1}, out)
		return ok, out, err
	})
	for o := range orgs {
		d, err := ls[2].PeekN(context.Background(), "batched:org"+strconv.Itoa(o), 1)
		if want := int64(1<<20 - callers/orgs*each); err != nil || d.Remaining != want {
			t.Fatalf("organisation %d: %d remaining (%v), want %d: a take was lost or counted twice", o, d.Remaining, err, want)
		}
	}
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

// Reserving sets (Set.Reserve) ride the batches beside plain sets: the
// sets decided at once share script calls, each reservation is opened
// once with its take and settles on its own limit, and the counts come
// out as settled.
func TestConcurrentReservingSetsShareScriptCalls(t *testing.T) {
	srv := redistest.Single(t)
	store := newStore(t, redisstore.ClientConfig{URL: srv.URL(), PoolSize: 8})
	const quota, tokens = 1 << 20, 100000 // a token refills in 10 minutes
	set, ls := setOf(t, store, time.Minute,
		limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 1, Period: 10 * time.Minute, Burst: tokens},
		limiter.PerMinute(limiter.FixedWindow, quota),
		limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: quota, Period: time.Hour})
	const callers, each = 64, 10
	held := make([][]limiter.Reservation, callers)
	// Half the callers reserve, the other half decide plain sets.
	shareCalls(t, srv, callers, each, func(g int) (bool, []limiter.Decision, error) {
		user := "held:user" + strconv.Itoa(g)
		keys := []string{user, user, "held:org"}
		out, res := make([]limiter.Decision, 3), make([]limiter.Reservation, 3)
		if g%2 == 1 {
			ok, err := set.Decide(context.Background(), limiter.ModeConsume, keys, []int64{10, 1, 10}, out)
			return ok, out, err
		}
		ok, err := set.Reserve(context.Background(), keys, []int64{10, 1, 10}, []bool{true, false, true}, out, res)
		held[g] = append(held[g], res[0], res[2])
		return ok, out, err
	})
	// Settle every reservation at 3 (7 given back of each 10 held).
	var orgSpent int64
	for g := range callers {
		spent := int64(each * 10)
		for k, r := range held[g] {
			if r.ID == "" {
				t.Fatalf("caller %d: reservation %d not opened", g, k)
			}
			p := 2 * (k % 2) // res[0] on the tokens, res[2] on the organisation
			if _, err := ls[p].Commit(context.Background(), r, 3); err != nil {
				t.Fatalf("caller %d: commit %d: %v", g, k, err)
			}
		}
		if g%2 == 0 {
			spent = each * 3
		}
		orgSpent += spent
		d, err := ls[0].PeekN(context.Background(), "held:user"+strconv.Itoa(g), 1)
		if err != nil || d.Remaining != tokens-spent {
			t.Fatalf("caller %d's tokens: %d remaining (%v), want %d", g, d.Remaining, err, tokens-spent)
		}
	}
	d, err := ls[2].PeekN(context.Background(), "held:org", 1)
	if err != nil || d.Remaining != quota-orgSpent {
		t.Fatalf("organisation: %d remaining (%v), want %d: a take or settle lost or counted twice", d.Remaining, err, quota-orgSpent)
	}
}
