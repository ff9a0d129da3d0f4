package limiter_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// benchLimit is 10,000 per second: under a benchmark's load a key sees
// both admissions and rejections.
func benchLimit(a limiter.Algorithm) limiter.Limit { return limiter.PerSecond(a, 10_000) }

// BenchmarkMemoryStore measures one decision on the memory store with the
// real clock: on one existing key from one goroutine, and over 100,000
// keys from one goroutine and from all.
func BenchmarkMemoryStore(b *testing.B) {
	ctx := context.Background()
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, a := range limiter.AllAlgorithms() {
		lim := benchLimit(a)
		b.Run(string(a)+"/existing_key", func(b *testing.B) {
			store := limiter.NewMemoryStore(limiter.MemoryConfig{})
			store.Decide(ctx, "client-42", lim, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				store.Decide(ctx, "client-42", lim, 1)
			}
		})
		b.Run(string(a)+"/serial_100k_keys", func(b *testing.B) {
			store := limiter.NewMemoryStore(limiter.MemoryConfig{})
			for _, k := range keys {
				store.Decide(ctx, k, lim, 1)
			}
			i := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				// A stride prime to len(keys): each decision's slot is
				// out of the cache, as with many clients.
				if i += 7919; i >= len(keys) {
					i -= len(keys)
				}
				store.Decide(ctx, keys[i], lim, 1)
			}
		})
		b.Run(string(a)+"/parallel_100k_keys", func(b *testing.B) {
			store := limiter.NewMemoryStore(limiter.MemoryConfig{})
			for _, k := range keys {
				store.Decide(ctx, k, lim, 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			runParallel(runtime.GOMAXPROCS(0), b.N, func(g int, take func() int) {
				i := (g + 1) * 7919 % len(keys) // each goroutine starts elsewhere
				for calls := take(); calls > 0; calls = take() {
					for range calls {
						if i++; i >= len(keys) {
							i = 0
						}
						store.Decide(ctx, keys[i], lim, 1)
					}
				}
			})
		})
	}
}

// BenchmarkLimiterAllow is one decision through the Limiter on the memory
// store: validation, the optional breaker and the store.
func BenchmarkLimiterAllow(b *testing.B) {
	l, err := limiter.New(limiter.Config{Limit: benchLimit(limiter.GCRA), Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	l.Allow(ctx, "client-42")
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(ctx, "client-42")
	}
}

// BenchmarkLimiterAllowOneKeyParallel is one key decided on from
// GOMAXPROCS goroutines at once, and from 16 times as many (as a server's
// requests would): the key's slot is contended.
func BenchmarkLimiterAllowOneKeyParallel(b *testing.B) {
	for _, p := range []int{1, 16} {
		b.Run("goroutines_per_cpu="+strconv.Itoa(p), func(b *testing.B) {
			l, err := limiter.New(limiter.Config{Limit: benchLimit(limiter.GCRA), Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			l.Allow(ctx, "client-42")
			b.ReportAllocs()
			b.SetParallelism(p)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Allow(ctx, "client-42")
				}
			})
		})
	}
}

// BenchmarkCalendarWindow is a fixed_window decision through the Limiter on
// the memory store with and without a calendar (a Tokyo month), on one key
// and on a new key each time (whose window comes from the calendar's last).
func BenchmarkCalendarWindow(b *testing.B) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		b.Fatal(err)
	}
	for _, lim := range []limiter.Limit{
		{Algorithm: limiter.FixedWindow, Rate: 1 << 20, Period: time.Hour},
		limiter.PerCalendar(1<<20, &limiter.Calendar{Unit: limiter.Month, Location: tokyo}),
	} {
		name := "plain"
		if lim.Calendar != nil {
			name = "calendar"
		}
		l, err := limiter.New(limiter.Config{Limit: lim, Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.Run(name+"/existing_key", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l.Allow(ctx, "client-42")
			}
		})
		b.Run(name+"/new_keys", func(b *testing.B) {
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "new-" + strconv.Itoa(i)
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				l.Allow(ctx, keys[i&(len(keys)-1)])
				i++
			}
		})
	}
}

// BenchmarkMemoryStoreParallelKeys tells what the store shares between
// cores from what the keys do: GOMAXPROCS goroutines decide on 10,000
// existing gcra keys, either all of them, each goroutine elsewhere in the
// same walk (shared_keys: a key's slot is written by every core in turn,
// as a server's requests for one client land on any core), or each
// goroutine on its own keys only (own_keys). Run it with -cpu 1,2: with
// own keys a store that shares nothing scales with the cores.
func BenchmarkMemoryStoreParallelKeys(b *testing.B) {
	ctx := context.Background()
	lim := limiter.PerMinute(limiter.GCRA, 10_000_000) // never refuses here
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for _, own := range []bool{false, true} {
		name := "shared_keys"
		if own {
			name = "own_keys"
		}
		b.Run(name, func(b *testing.B) {
			store := limiter.NewMemoryStore(limiter.MemoryConfig{})
			for _, k := range keys {
				store.Decide(ctx, k, lim, 1)
			}
			procs := runtime.GOMAXPROCS(0)
			b.ReportAllocs()
			b.ResetTimer()
			runParallel(procs, b.N, func(g int, take func() int) {
				// Goroutine g visits the keys i with i % procs == g, or
				// all of them from its own start; stride 7919 is prime to
				// 10,000, so consecutive decisions touch unrelated keys.
				first, step, n := g*1009%len(keys), 7919, len(keys)
				if own {
					first, n = 0, len(keys)/procs
				}
				i := first
				for calls := take(); calls > 0; calls = take() {
					for range calls {
						if i += step; i >= n {
							i %= n
						}
						k := i
						if own {
							k = i*procs + g
						}
						store.Decide(ctx, keys[k], lim, 1)
					}
				}
			})
		})
	}
}

// runParallel runs worker on procs goroutines, numbered from 0, which take
// total calls between them, 1024 at a time, from take (0 when none are
// left). It writes nothing per call but on a worker's stack: b.RunParallel
// counts down in a small heap object per goroutine, and two goroutines'
// objects sometimes share a cache line, which then moves between the
// cores on every call.
func runParallel(procs, total int, worker func(g int, take func() int)) {
	const grain = 1024
	var taken atomic.Int64
	take := func() int {
		end := taken.Add(grain)
		start := end - grain
		if start >= int64(total) {
			return 0
		}
		return int(min(end, int64(total)) - start)
	}
	var wg sync.WaitGroup
	for g := range procs {
		wg.Go(func() { worker(g, take) })
	}
	wg.Wait()
}

// BenchmarkClock is the memory store's clock read, the monotonic time
// since the store was made (time.Since), beside time.Now, which reads the
// wall clock too.
func BenchmarkClock(b *testing.B) {
	start := time.Now()
	var sink int64
	b.Run("since_start", func(b *testing.B) {
		for b.Loop() {
			sink += int64(time.Since(start))
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixMicro()
		}
	})
	if sink == 42 {
		b.Log(sink)
	}
}
