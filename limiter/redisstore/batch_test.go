package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// TestBatchScriptsMatchTheMemoryStore runs each batch script on a real
// Redis at chosen instants, with batches of several decisions on a few keys
// (the same key several times in one batch too), and the memory store on
// the same decisions in the same order at the same instants: every answer
// must be identical, to the microsecond. So must they be with each speed
// mechanism of the batch scripts switched off (SwitchOff), which
// BenchmarkSpeedMechanisms measures against the scripts as they run.
func TestBatchScriptsMatchTheMemoryStore(t *testing.T) {
	srv, _ := singleStore(t)
	for _, off := range []string{"", "cache", "compact-args"} {
		store := NewTestStore(t, ClientConfig{URL: srv.URL()}, Config{})
		name := "as they run"
		if off != "" {
			name = off + " off"
			if err := store.SwitchOff(off); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(name, func(t *testing.T) { batchScriptsMatchTheMemoryStore(t, store, off) })
	}
}

func batchScriptsMatchTheMemoryStore(t *testing.T, store *Store, off string) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			_, script := scriptsAt(t, a)
			if off != "" {
				_, src, err := assemble(limiter.SpecOf(a), testClock, speedOffOf[off])
				if err != nil {
					t.Fatal(err)
				}
				script = redis.NewScript(src)
			}
			// One limit per key: a batch mixes decisions of different limits.
			lims := []limiter.Limit{
				{Algorithm: a, Rate: 5, Period: time.Second},
				{Algorithm: a, Rate: 7, Period: 3 * time.Second, Burst: 4},
				{Algorithm: a, Rate: 3, Period: 1700 * time.Millisecond, Burst: 9, AlignWindows: true},
				{Algorithm: a, Rate: 2, Period: time.Second, Burst: 5, NoDelay: true},
			}
			keys := make([]string, len(lims))
			for i := range keys {
				keys[i] = fmt.Sprintf("batchdiff:%s:%s:%d:{ü}", off, a, i)
			}
			clock := newInstants()
			mem := clock.memoryStore()
			var allowed, rejected, shared int
			for step := 0; step < 60; step++ {
				var gap int64
				switch r := rng.IntN(10); {
				case r < 4:
					gap = rng.Int64N(3)
				case r < 9:
					gap = rng.Int64N(400_000)
				default:
					gap = rng.Int64N(4_000_000)
				}
				clock.advance(gap)

				n := 1 + rng.IntN(8)
				var want []limiter.Decision
				var reqs []*request
				seen := map[int]bool{}
				for i := 0; i < n; i++ {
					k := rng.IntN(len(keys))
					if seen[k] {
						shared++
					}
					seen[k] = true
					lim := lims[k]
					cost := 1 + rng.Int64N(min(lim.Quota(), 3))
					mode := limiter.Mode(rng.IntN(3)) // consume, peek or at most
					reqs = append(reqs, newRequest(store, keys[k], lim, cost, mode))
					d, err := mem.DecideMode(ctx, keys[k], lim, cost, mode, 0)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, d)
				}
				rkeys, args := batchCall(store, reqs)
				args = append(args, clock.clockArgs()...)
				reply, err := script.Run(ctx, store.client, rkeys, args...).Result()
				if err != nil {
					t.Fatalf("step %d: batch script: %v", step, err)
				}
				ints, err := anyInts(reply, nil)
				if err != nil || len(ints) != replyLen*n {
					t.Fatalf("step %d: reply %v (%v), want %d integers", step, reply, err, replyLen*n)
				}
				for i := 0; i < n; i++ {
					got, err := reqs[i].answer(decodeInts(ints[i*replyLen : (i+1)*replyLen]))
					if err != nil {
						t.Fatalf("step %d decision %d: %v", step, i, err)
					}
					if got != want[i] {
						t.Fatalf("step %d at +%dµs, decision %d of %d:\nredis  %+v\nmemory %+v", step, clock.elapsed(), i+1, n, got, want[i])
					}
					if got.Allowed {
						allowed++
					} else {
						rejected++
					}
				}
			}
			if allowed < 10 || rejected < 10 || shared < 10 {
				t.Fatalf("%d allowed, %d rejected, %d decisions sharing a batch with their key: the sequence does not exercise the batch script", allowed, rejected, shared)
			}
		})
	}
}

func TestParseIntsReadsRawArraysAndRejectsOtherShapes(t *testing.T) {
	got, err := parseInts([]byte("*3\r\n:1\r\n:-20\r\n:300000000000\r\n"), nil)
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != -20 || got[2] != 300000000000 {
		t.Fatalf("parseInts of a good reply = %v, %v", got, err)
	}
	if got, err := parseInts([]byte("*0\r\n"), nil); err != nil || len(got) != 0 {
		t.Fatalf("parseInts of an empty array = %v, %v", got, err)
	}
	_, err = parseInts([]byte("-NOSCRIPT No matching script. Please use EVAL.\r\n"), nil)
	if !isNoScript(err) {
		t.Fatalf("NOSCRIPT reply: err = %v, want a NOSCRIPT error", err)
	}
	for name, raw := range map[string]string{
		"an empty reply":             "",
		"a string instead of array":  "+OK\r\n",
		"a bulk string element":      "*2\r\n:1\r\n$1\r\n2\r\n",
		"a truncated array":          "*3\r\n:1\r\n:2\r\n",
		"an element without CRLF":    "*1\r\n:12",
		"garbage after the reply":    "*1\r\n:1\r\nxyz",
		"a number too long":          "*1\r\n:12345678901234567890\r\n",
		"a float element":            "*1\r\n,1.5\r\n",
		"an error reply":             "-ERR user_script:1: boom\r\n",
		"an array length not number": "*x\r\n",
	} {
		t.Run(name+" is an error, not a panic", func(t *testing.T) {
			if got, err := parseInts([]byte(raw), nil); err == nil {
				t.Fatalf("parseInts(%q) = %v, nil; want an error", raw, got)
			}
		})
	}
}

func TestKeySlotMatchesRedisClusterExamples(t *testing.T) {
	// Values of CLUSTER KEYSLOT on Redis.
	for key, want := range map[string]int{
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363,
		"{}foo":                9500,
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// After SCRIPT FLUSH, batches answer NOSCRIPT too: the sender sends the
// batch script with EVAL and every decision still gets its answer.
func TestBatchesSurviveAFlushedScriptCache(t *testing.T) {
	srv := redistest.Single(t)
	batches := new(BatchCounter)
	store := NewTestStore(t, ClientConfig{URL: srv.URL()}, Config{BatchTracer: batches})
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1000, Period: time.Hour}
	for round := 0; round < 3; round++ {
		if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		before := batches.Batched()
		errs := make(chan error, 64)
		for g := 0; g < 64; g++ {
			go func() {
				d, err := store.Decide(context.Background(), "flushed-batch", lim, 1)
				if err == nil && !d.Allowed {
					err = fmt.Errorf("rejected: %+v", d)
				}
				errs <- err
			}()
		}
		for g := 0; g < 64; g++ {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if batches.Batched() == before {
			t.Fatalf("round %d: no decision went in a batch", round)
		}
	}
	requireCached(t, srv, store.scriptsOf(limiter.FixedWindow).batch.sha, "fixed_window batch script")
}

// TestBatchScriptsLeaveTheStateDecisionsOneByOneLeave runs batches whose
// decisions share keys (which the batch script reads once and writes
// once, see lua/batch.lua) and the same decisions one after another with
// the single script on other keys, at the same instants: the replies, the
// values stored (the format other versions read) and their expiry must be
// the same, and the expiry (an absolute time) too, within the real time
// the two sets of calls took (each sets it from the time it runs) and the
// lag of Redis's cached clock; a decision's expiry instead of another's
// would be off by a refill of one unit at least, 200 ms here. Each batch
// mixes two keys, a key used once with one used more; in the last round
// the decisions on one key also mix limits (a reload changing a limit
// while decisions are on their way).
func TestBatchScriptsLeaveTheStateDecisionsOneByOneLeave(t *testing.T) {
	srv, store := singleStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			single, batch := scriptsAt(t, a)
			lims := []limiter.Limit{
				{Algorithm: a, Rate: 5, Period: time.Second},
				{Algorithm: a, Rate: 7, Period: 3 * time.Second, Burst: 4},
				{Algorithm: a, Rate: 20, Period: time.Minute, Burst: 12},
			}
			for li := 0; li <= len(lims); li++ {
				// The decisions' arguments are those of their key (the
				// window offset depends on it); their state lives under two.
				var keys []string
				var oneByOne, batched [][]string
				for k := 0; k < 2; k++ {
					key := fmt.Sprintf("state:%s:%d:%d", a, li, k)
					keys = append(keys, key)
					oneByOne = append(oneByOne, store.Keys(key+":single", a))
					batched = append(batched, store.Keys(key+":batch", a))
				}
				clock := newInstants()
				shared := 0
				for step := 0; step < 25; step++ {
					clock.advance(rng.Int64N(int64(lims[min(li, len(lims)-1)].Period/time.Microsecond) / 4))
					n := 1 + rng.IntN(6)
					var reqs []*request
					var want []int64
					uses := make([]int, len(keys))
					began := time.Now()
					for i := 0; i < n; i++ {
						k := rng.IntN(len(keys))
						uses[k]++
						lim := lims[rng.IntN(len(lims))]
						if li < len(lims) {
							lim = lims[li]
						}
						cost := 1 + rng.Int64N(min(lim.Quota(), 3))
						mode := limiter.Mode(rng.IntN(3))
						dargs := scriptArgs(keys[k], lim, cost, mode)
						reply, err := single.Run(ctx, store.client, oneByOne[k], append(dargs, clock.clockArgs()...)...).Result()
						if err != nil {
							t.Fatalf("step %d: single script: %v", step, err)
						}
						ints, err := anyInts(reply, nil)
						if err != nil {
							t.Fatal(err)
						}
						want = append(want, ints...)
						r := newRequest(store, keys[k], lim, cost, mode)
						copy(r.keys[:], batched[k])
						reqs = append(reqs, r)
					}
					for _, u := range uses {
						shared += max(u-1, 0)
					}
					rkeys, args := batchCall(store, reqs)
					reply, err := batch.Run(ctx, store.client, rkeys, append(args, clock.clockArgs()...)...).Result()
					if err != nil {
						t.Fatalf("step %d: batch script: %v", step, err)
					}
					took := time.Since(began).Milliseconds() + 1
					got, err := anyInts(reply, nil)
					if err != nil || !slices.Equal(got, want) {
						t.Fatalf("step %d: batch of %d answered %v (%v), one by one %v", step, n, got, err, want)
					}
					for k := range keys {
						for i := range oneByOne[k] {
							s, b := storedState(t, srv, oneByOne[k][i]), storedState(t, srv, batched[k][i])
							if s.value != b.value {
								t.Fatalf("step %d: after a batch of %d, %s holds %s; one by one %s", step, n, batched[k][i], b.value, s.value)
							}
							if d := b.expiry - s.expiry; d < -took-50 || d > took+50 || (s.expiry < 0) != (b.expiry < 0) {
								t.Fatalf("step %d: after a batch of %d, %s expires at %d ms; one by one at %d ms (the calls took %d ms)", step, n, batched[k][i], b.expiry, s.expiry, took)
							}
						}
					}
				}
				if shared < 20 {
					t.Fatalf("%d decisions shared a batch with others on their key: the sequence does not exercise the cache", shared)
				}
			}
		})
	}
}

// stored is a key's content, as text, and its PEXPIRETIME (Unix ms; -1
// none, -2 no key).
type stored struct {
	value  string
	expiry int64
}

// storedState reads key's content whatever its type (a sorted set's
// members with their scores, a hash's fields sorted) and its expiry.
func storedState(t *testing.T, srv *redistest.Server, key string) stored {
	t.Helper()
	do := func(args ...string) any {
		r, err := srv.Do(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return r
	}
	var value string
	switch typ := do("TYPE", key); typ {
	case "none":
		value = "none"
	case "string":
		value = fmt.Sprint(do("GET", key))
	case "hash":
		fields := do("HGETALL", key).([]any)
		pairs := make([]string, 0, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			pairs = append(pairs, fmt.Sprintf("%v=%v", fields[i], fields[i+1]))
		}
		slices.Sort(pairs)
		value = "hash " + strings.Join(pairs, " ")
	case "zset":
		value = fmt.Sprint("zset ", do("ZRANGE", key, "0", "-1", "WITHSCORES"))
	default:
		t.Fatalf("%s: unexpected type %v", key, typ)
	}
	return stored{value: value, expiry: do("PEXPIRETIME", key).(int64)}
}

// A batch with more algorithms than any batch before it reuses capacity
// that append left zeroed: every group still gets a reply buffer (a batch
// of four algorithms after one of three used to find none and panic).
func TestBatchesOfMoreAlgorithmsThanBeforeHaveReplyBuffers(t *testing.T) {
	_, store := singleStore(t)
	sd := newSender(store.batch)
	for n := 1; n <= limiter.NumAlgorithms; n++ {
		var live []*request
		for alg := 0; alg < n; alg++ {
			live = append(live, &request{alg: alg, fam: alg})
		}
		sd.group(live)
		if len(sd.groups) != n {
			t.Fatalf("%d algorithms in %d groups", n, len(sd.groups))
		}
		for gi, g := range sd.groups {
			if g.raw == nil {
				t.Fatalf("batch of %d algorithms: group %d has no reply buffer", n, gi)
			}
		}
	}
}

// newRequest is a request for one decision on key, as Store.decide fills
// it.
func newRequest(s *Store, key string, lim limiter.Limit, cost int64, mode limiter.Mode) *request {
	r := new(request)
	s.fill(r, s.scriptsOf(lim.Algorithm), key, lim, cost, mode)
	return r
}

// batchCall is the KEYS and ARGV of the batch-script call a sender makes
// for reqs (decisions of one algorithm, in this order).
func batchCall(s *Store, reqs []*request) (keys []string, args []any) {
	g := group{fam: reqs[0].fam, members: reqs}
	var e encoder
	e.reserve([]group{g})
	return unboxCall(s.encode(&e, nil, &s.algs[g.fam], &g), int(g.numKeys))
}

// unboxCall is the KEYS and ARGV of cmd, an encoded EVALSHA of nk keys
// whose arguments point into the requests and the encoder.
func unboxCall(cmd []any, nk int) (keys []string, args []any) {
	for _, k := range cmd[3 : 3+nk] {
		keys = append(keys, *k.(*string))
	}
	for _, a := range cmd[3+nk:] {
		args = append(args, *a.(*int64))
	}
	return keys, args
}

// TestBatchedShortTimeoutBehindLongOnesEndsAtItsOwn queues, on a frozen
// Redis, a decision with a short timeout behind decisions with a long one:
// it must end with the timeout error at its own deadline, not at theirs,
// though no sender is free to look at it; once Redis answers again, every
// decision is answered, and the requests reused after the timeouts answer
// their own decisions.
func TestBatchedShortTimeoutBehindLongOnesEndsAtItsOwn(t *testing.T) {
	srv, store := singleStore(t)
	ctx := context.Background()
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Second}
	if _, err := store.DecideMode(ctx, "warm", lim, 1, limiter.ModeConsume, time.Second); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw()
		}
	}()
	const long, short, margin = 3 * time.Second, 100 * time.Millisecond, time.Second
	const waiting = 12
	errs := make(chan error, waiting)
	for i := range waiting {
		go func() {
			_, err := store.DecideMode(ctx, fmt.Sprintf("long%d", i), lim, 1, limiter.ModeConsume, long)
			errs <- err
		}()
	}
	eventually.True(t, 5*time.Second, "the long decisions in progress",
		func() bool { return store.batch.inFlight.Load() >= waiting })
	for i := range 3 {
		start := time.Now()
		_, err := store.DecideMode(ctx, fmt.Sprintf("short%d", i), lim, 1, limiter.ModeConsume, short)
		took := time.Since(start)
		if limiter.ErrorKind(err) != "timeout" {
			t.Fatalf("short decision %d: err %v, want the timeout", i, err)
		}
		if took < short || took > short+margin {
			t.Fatalf("short decision %d took %s, want its own %s timeout (+%s), not the others' %s", i, took, short, margin, long)
		}
	}
	srv.Thaw()
	thawed = true
	for range waiting {
		<-errs // answered or timed out: what matters is that each returns
	}
	for i := range 200 {
		d, err := store.DecideMode(ctx, "after", lim, 1, limiter.ModeConsume, time.Second)
		if err != nil || !d.Allowed || d.Limit != lim.Quota() {
			t.Fatalf("decision %d after the thaw: %+v, %v", i, d, err)
		}
	}
}
