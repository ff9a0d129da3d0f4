package limiter_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// distinctKeys is how many distinct keys the bound tests insert. Under
// -race, where each decision is about ten times slower, a quarter as many
// keep the test within seconds; the bounds checked are the same.
func distinctKeys() int {
	if raceEnabled {
		return 250_000
	}
	return 1_000_000
}

func TestMemoryStoreStaysBounded(t *testing.T) {
	ctx := context.Background()
	keys := distinctKeys()
	key := make([]byte, 0, 32)

	t.Run("a million distinct keys never hold more than MaxKeys", func(t *testing.T) {
		const maxKeys = 50_000
		clock := newFakeClock() // frozen: no key ever becomes idle
		before := heapInUse()
		store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now, MaxKeys: maxKeys, Shards: 64})
		lim := limiter.PerMinute(limiter.TokenBucket, 100)
		for i := 0; i < keys; i++ {
			key = strconv.AppendInt(append(key[:0], "client-"...), int64(i), 10)
			if _, err := store.Decide(ctx, string(key), lim, 1); err != nil {
				t.Fatal(err)
			}
		}
		n := store.Len()
		if n > maxKeys {
			t.Fatalf("%d keys held, more than MaxKeys %d", n, maxKeys)
		}
		if n < maxKeys*9/10 {
			t.Fatalf("only %d keys held: eviction drops far more than it must", n)
		}
		grown := heapInUse() - before
		t.Logf("%d keys inserted, %d held, heap grew %d bytes (%d per key held)", keys, n, grown, grown/uint64(n))
		// About 150 bytes per key; a store keeping every key would need
		// more than 100 MB.
		if grown > 30<<20 {
			t.Fatalf("heap grew %d bytes for %d keys", grown, n)
		}
		// The most recent key is still there and remembers its state.
		d, _ := store.Decide(ctx, string(key), lim, 100)
		if d.Allowed {
			t.Fatalf("the last key inserted lost its state: %+v", d)
		}
		runtime.KeepAlive(store)
	})

	t.Run("keys idle for longer than their window are dropped as new keys arrive", func(t *testing.T) {
		clock := newFakeClock()
		store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
		// One new key every millisecond, each idle a second after its last
		// request and dropped a second later (the grace): about 2000 keys
		// are worth keeping at any time.
		lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Second, AlignWindows: true}
		most := 0
		for i := 0; i < keys; i++ {
			clock.Advance(time.Millisecond)
			key = strconv.AppendInt(append(key[:0], "client-"...), int64(i), 10)
			if _, err := store.Decide(ctx, string(key), lim, 1); err != nil {
				t.Fatal(err)
			}
			if i%10_000 == 0 {
				most = max(most, store.Len())
			}
		}
		t.Logf("at most %d keys held while %d were inserted", most, keys)
		if most > 5_000 {
			t.Fatalf("%d keys held at once, want close to the ~2000 worth keeping", most)
		}
		clock.Advance(time.Second)
		if n := store.Sweep(); n == 0 || store.Len() != 0 {
			t.Fatalf("Sweep dropped %d and left %d keys, want every key dropped", n, store.Len())
		}
	})
}

func TestIdleStateIsEquivalentToFresh(t *testing.T) {
	// A key dropped once idle must decide exactly as if it had been kept.
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a)+" decides the same after its idle state is swept", func(t *testing.T) {
			lim := limiter.Limit{Algorithm: a, Rate: 4, Period: time.Second, Burst: 4}
			kept, swept := newFakeClock(), newFakeClock()
			keep := limiter.NewMemoryStore(limiter.MemoryConfig{Now: kept.Now})
			sweep := limiter.NewMemoryStore(limiter.MemoryConfig{Now: swept.Now})
			steps := []time.Duration{0, 0, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond,
				3 * time.Second, 3*time.Second + 10*time.Millisecond, 7 * time.Second}
			for i, at := range steps {
				kept.Set(at)
				swept.Set(at)
				sweep.Sweep()
				dk, _ := keep.Decide(ctx, "k", lim, 2)
				ds, _ := sweep.Decide(ctx, "k", lim, 2)
				if dk != ds {
					t.Fatalf("step %d at %s: kept %+v, swept %+v", i, at, dk, ds)
				}
			}
			if sweep.Len() != 1 {
				t.Fatalf("%d keys after the last request, want 1", sweep.Len())
			}
		})
	}
}

func TestMemoryStoreDoesNotAllocateForAnExistingKey(t *testing.T) {
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			clock := newFakeClock()
			store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
			lim := limiter.Limit{Algorithm: a, Rate: 100, Period: time.Second}
			l, err := limiter.New(limiter.Config{Limit: lim, Store: store})
			if err != nil {
				t.Fatal(err)
			}
			key := "client-42"
			// Warm up: create the key and let sliding_log's ring reach its size.
			for i := 0; i < 1000; i++ {
				clock.Advance(time.Millisecond)
				l.Allow(ctx, key)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				clock.Advance(time.Millisecond)
				if _, err := l.Allow(ctx, key); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per decision, want 0", allocs)
			}
		})
	}
}

func TestMemoryStoreIsExactUnderContention(t *testing.T) {
	// 64 goroutines on one key: no algorithm admits one more or one less
	// than its quota while nothing refills.
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a)+" admits exactly its quota to 64 goroutines", func(t *testing.T) {
			clock := newFakeClock()
			store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
			lim := limiter.Limit{Algorithm: a, Rate: 500, Period: time.Hour, AlignWindows: true}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				allowed int
			)
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 0
					for i := 0; i < 20; i++ {
						if d, _ := store.Decide(context.Background(), "shared", lim, 1); d.Allowed {
							n++
						}
					}
					mu.Lock()
					allowed += n
					mu.Unlock()
				}()
			}
			wg.Wait()
			if allowed != 500 {
				t.Fatalf("admitted %d of 1280, want exactly 500", allowed)
			}
		})
	}
}

func TestSmallMaxKeysIsNeverExceeded(t *testing.T) {
	clock := newFakeClock()
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now, MaxKeys: 10})
	for i := 0; i < 1000; i++ {
		store.Decide(context.Background(), "client-"+strconv.Itoa(i), limiter.PerHour(limiter.GCRA, 5), 1)
	}
	// 8 shards of one key each: at most MaxKeys, at least half of it.
	if n := store.Len(); n > 10 || n < 5 {
		t.Fatalf("%d keys held with MaxKeys 10", n)
	}
}

func TestMemoryStoreRefusesWhatItCannotCount(t *testing.T) {
	// Called directly, without a Limiter's validation, the store answers
	// with an error instead of dividing by zero.
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	tests := []struct {
		name string
		lim  limiter.Limit
		cost int64
		want string
	}{
		{"an unknown algorithm is named", limiter.Limit{Algorithm: "bogus", Rate: 1, Period: time.Second}, 1, `unknown algorithm "bogus"`},
		{"a zero rate is refused", limiter.Limit{Algorithm: limiter.TokenBucket, Period: time.Second}, 1, "rate: must be > 0"},
		{"a zero period is refused", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 5}, 1, "period: must be > 0"},
		{"a cost above the quota is refused", limiter.PerSecond(limiter.GCRA, 5), 6, "cost 6 > quota 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := store.Decide(context.Background(), "k", tc.lim, tc.cost)
			if err == nil || !strings.Contains(err.Error(), tc.want) || d.Allowed {
				t.Fatalf("got %+v, %v; want a refusal mentioning %q", d, err, tc.want)
			}
		})
	}
	if store.Len() != 0 {
		t.Fatalf("%d keys stored for refused calls", store.Len())
	}
}

func TestAlgorithmsKeepSeparateStateForOneKey(t *testing.T) {
	store := limiter.NewMemoryStore(limiter.MemoryConfig{})
	for _, a := range limiter.AllAlgorithms() {
		d, _ := store.Decide(context.Background(), "k", limiter.PerMinute(a, 1), 1)
		if !d.Allowed {
			t.Fatalf("%s was refused after other algorithms used the key: %+v", a, d)
		}
	}
	if n := store.Len(); n != limiter.NumAlgorithms {
		t.Fatalf("%d entries, want one per algorithm", n)
	}
}

func Example() {
	// A fixed clock keeps this example's output the same on every run;
	// leave Now unset to use time.Now.
	noon := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return noon }})

	// A queue of 3 drained at 2 per second, like NGINX limit_req burst=2.
	l, err := limiter.New(limiter.Config{
		Limit: limiter.Limit{Algorithm: limiter.LeakyBucket, Rate: 2, Period: time.Second, Burst: 3},
		Store: store,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 4; i++ {
		d, err := l.Allow(context.Background(), "user:42")
		fmt.Printf("allowed=%v remaining=%d delay=%s retry-after=%s err=%v\n", d.Allowed, d.Remaining, d.Delay, d.RetryAfter, err)
	}
	_, err = l.AllowN(context.Background(), "user:42", 4)
	fmt.Println(err)
	// Output:
	// allowed=true remaining=2 delay=0s retry-after=0s err=<nil>
	// allowed=true remaining=1 delay=500ms retry-after=0s err=<nil>
	// allowed=true remaining=0 delay=1s retry-after=0s err=<nil>
	// allowed=false remaining=0 delay=0s retry-after=500ms err=<nil>
	// cost exceeds the limit's quota: cost 4 > quota 3
}

// Limits of one algorithm share a key's state; a fixed window remembered
// for one period or alignment must not be taken for another's.
func TestFixedWindowsOfDifferentPeriodsOnOneKeyEachKeepTheirOwnBoundaries(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return now }})
	limits := []limiter.Limit{
		limiter.PerSecond(limiter.FixedWindow, 1000),
		{Algorithm: limiter.FixedWindow, Rate: 1000, Period: 7 * time.Second},
		{Algorithm: limiter.FixedWindow, Rate: 1000, Period: 7 * time.Second, AlignWindows: true},
	}
	const key = "shared-client"
	for step := 0; step < 60; step++ {
		for _, lim := range limits {
			d, err := store.Decide(context.Background(), key, lim, 1)
			if err != nil {
				t.Fatal(err)
			}
			off := limiter.WindowOffset(key, lim.Period)
			if lim.AlignWindows {
				off = 0
			}
			// The window containing now starts at off + k·Period.
			p := lim.Period
			since := now.Sub(time.Unix(0, 0).Add(off)) % p
			if since < 0 {
				since += p
			}
			if want := p - since; d.ResetAfter != want {
				t.Fatalf("step %d, period %s aligned %v: ResetAfter %s, want %s", step, p, lim.AlignWindows, d.ResetAfter, want)
			}
		}
		now = now.Add(330 * time.Millisecond)
	}
}

// Decisions on keys the store holds lock only the key's slot, not its
// shard, while other keys are added (the tables grow), dropped by
// insertions and sweeps (entries shift back, tables shrink and are
// rebuilt from reused chunks) and reset. Through all of it, decisions on
// each of a few hot keys from many goroutines admit exactly the quota.
func TestMemoryStoreIsExactWhileItsTablesChange(t *testing.T) {
	ctx := context.Background()
	for _, a := range limiter.AllAlgorithms() {
		t.Run(string(a), func(t *testing.T) {
			clock := newFakeClock() // an hour's start: nothing of an hour passes
			store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now, Shards: 2})
			const quota, hot, goroutines = 300, 6, 8
			hotLim := limiter.Limit{Algorithm: a, Rate: quota, Period: time.Hour, AlignWindows: true}
			// Churn keys live for a millisecond: insertions and sweeps
			// drop them as the clock moves on.
			churnLim := limiter.Limit{Algorithm: a, Rate: 1, Period: time.Millisecond}
			var allowed [hot]int64
			var mu sync.Mutex
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var churners sync.WaitGroup
			var churned atomic.Int64
			for c := 0; c < 3; c++ {
				churners.Add(1)
				go func() {
					defer churners.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						k := "churn-" + strconv.Itoa(c) + "-" + strconv.Itoa(i%5000)
						switch {
						case c == 0 && i%50 == 0:
							store.Sweep()
						case c == 1 && i%3 == 0:
							store.Reset(ctx, k, churnLim, 0)
						default:
							store.Decide(ctx, k, churnLim, 1)
						}
						if i%200 == 0 {
							clock.Advance(time.Millisecond) // 10 s (a unit of refill) takes 2,000,000
						}
						churned.Add(1)
					}
				}()
			}
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for churned.Load() < 2000 {
						runtime.Gosched() // let the tables change from the start
					}
					var mine [hot]int64
					for i := 0; i < 10*quota*hot/goroutines; i++ {
						k := (i + g) % hot
						var d limiter.Decision
						if i%7 == 3 {
							d, _ = store.DecideMode(ctx, "hot-"+strconv.Itoa(k), hotLim, 2, limiter.ModeAtMost, 0)
						} else {
							d, _ = store.Decide(ctx, "hot-"+strconv.Itoa(k), hotLim, 1)
						}
						mine[k] += d.Admitted
					}
					mu.Lock()
					for k := range mine {
						allowed[k] += mine[k]
					}
					mu.Unlock()
				}()
			}
			wg.Wait()
			close(stop)
			churners.Wait()
			t.Logf("%d churn operations", churned.Load())
			for k, n := range allowed {
				if n != quota {
					t.Errorf("hot-%d: admitted %d units, want exactly %d", k, n, quota)
				}
			}
		})
	}
}
