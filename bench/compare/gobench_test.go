package main

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResult is a finished benchmark with the given ns/op and CPU ns/op per
// round, as runGoBenchmarks would have measured them.
func fakeResult(name string, baseline bool, nsOp, cpuOp []float64) goBenchResult {
	limiter, _, _ := strings.Cut(name, "/")
	return goBenchResult{bench: memoryBenchmark{name: name, limiter: limiter, baseline: baseline}, nsOp: nsOp, cpuOp: cpuOp}
}

// Each goal is one printed number: the serial ratio to x/time/rate, and
// the parallel over serial throughput, by wall time and by CPU time, each a
// median of per-round ratios.
func TestGoBenchTablePrintsEachGoalAsOneNumber(t *testing.T) {
	results := []goBenchResult{
		// Round ratios of serial/parallel ns: 2, 1.5, 1.9 (median 1.9).
		fakeResult("gcra/serial", false, []float64{60, 60, 57}, []float64{60, 60, 57}),
		// CPU: 2 × 60/60, 2 × 60/80, 2 × 57/57 → 2, 1.5, 2 (median 2).
		fakeResult("gcra/parallel", false, []float64{30, 40, 30}, []float64{60, 80, 57}),
		// Own keys: 60/40, 60/31.6, 57/30 → 1.5, 1.9, 1.9 (median 1.9).
		fakeResult("gcra/parallel_own_keys", false, []float64{40, 31.6, 30}, []float64{60, 60, 57}),
		fakeResult(xrateLimiterName+"/serial", true, []float64{90, 90, 90}, []float64{90, 90, 90}),
		fakeResult(xrateLimiterName+"/parallel_own_keys", true, []float64{90, 90, 90}, []float64{180, 180, 180}),
		fakeResult(xrateLimiterName+"/parallel", true, []float64{180, 180, 180}, []float64{360, 360, 360}),
	}
	var out bytes.Buffer
	writeGoBenchTable(&out, results, goBenchRun{keys: 100, rounds: 3, benchtime: 10 * time.Millisecond, started: time.Now(), procs: 2, load: "0.50 0.40 0.30"})
	got := out.String()
	for _, want := range []string{
		"load average 0.50 0.40 0.30",
		"ratio to x/time/rate + mutex map (goal ≥ 1.50×): gcra/serial 1.50×\n",
		"parallel ratio to x/time/rate + mutex map: gcra/parallel 6.00×\n",
		"parallel ÷ serial throughput, keys shared by the goroutines: gcra 1.90×, " + xrateLimiterName + " 0.50×\n",
		"parallel ÷ serial throughput, distinct keys per goroutine (goal ≥ 1.80×): gcra 1.90×, " + xrateLimiterName + " 1.00×\n",
		"parallel ÷ serial by CPU time (GOMAXPROCS 2 × serial CPU/op ÷ parallel CPU/op, what idle cores would give), shared keys: gcra 2.00×, " + xrateLimiterName + " 0.50×; distinct keys: gcra 2.00×, " + xrateLimiterName + " 1.00×\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// The goroutines of a parallel benchmark make b.N calls between them, each
// once, every goroutine numbered once.
func TestRunParallelMakesEveryCallOnce(t *testing.T) {
	for _, procs := range []int{1, 2, 3} {
		for _, total := range []int{0, 1, parallelGrain - 1, parallelGrain, parallelGrain + 1, 10*parallelGrain + 7} {
			// One counter per goroutine, 128 bytes apart.
			counts := make([][16]int64, procs)
			started := make([]int, procs)
			var mu sync.Mutex
			runParallel(procs, total, func(g int, take func() int) {
				mu.Lock()
				started[g]++
				mu.Unlock()
				for n := take(); n > 0; n = take() {
					counts[g][0] += int64(n)
				}
			})
			sum := int64(0)
			for g := range procs {
				if started[g] != 1 {
					t.Errorf("procs %d, total %d: goroutine %d started %d times, want once", procs, total, g, started[g])
				}
				sum += counts[g][0]
			}
			if sum != int64(total) {
				t.Errorf("procs %d: %d calls made, want %d", procs, sum, total)
			}
		}
	}
}

// Each round starts with another limiter, its serial and parallel
// benchmarks kept together, so that none is always the first of a round.
func TestRoundOrderRotatesTheLimiters(t *testing.T) {
	var benches []memoryBenchmark
	for _, l := range []string{"gcra", "token_bucket", xrateLimiterName} {
		for _, m := range []string{"serial", "parallel"} {
			benches = append(benches, memoryBenchmark{name: l + "/" + m, limiter: l})
		}
	}
	want := [][]int{{0, 1, 2, 3, 4, 5}, {2, 3, 4, 5, 0, 1}, {4, 5, 0, 1, 2, 3}, {0, 1, 2, 3, 4, 5}}
	for r, w := range want {
		if got := roundOrder(benches, r); !slices.Equal(got, w) {
			t.Errorf("round %d runs %v, want %v", r, got, w)
		}
	}
}
