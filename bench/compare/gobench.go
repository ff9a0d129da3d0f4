package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// A memory benchmark is one limiter deciding over a fixed set of keys as a
// Go benchmark: serially on one goroutine, or on GOMAXPROCS goroutines
// (runParallel). Unlike the load generator it reads no clock and
// records nothing per decision, so ns/op is the limiter's own cost.
type memoryBenchmark struct {
	// name is "<limiter>/<serial|parallel|parallel_own_keys>", usable as a
	// sub-benchmark name.
	name string
	// limiter is the contender's name (rl-exporter's algorithm or xrate).
	limiter string
	// baseline marks x/time/rate behind a mutex-guarded map.
	baseline bool
	fn       func(b *testing.B)
}

// xrateLimiterName names the baseline in the benchmarks.
const xrateLimiterName = "xrate_mutex_map"

// memoryBenchmarks returns the benchmarks over keys distinct keys: for each
// of rl-exporter's Limiter on a MemoryStore (gcra, token_bucket,
// fixed_window) and for x/time/rate behind a mutex-guarded map of keys, a
// serial benchmark and two parallel ones, on keys every goroutine decides on
// in turn and on keys of each goroutine's own. Every key exists before the
// timer starts and every decision is allowed. Each benchmark makes its own
// limiter.
func memoryBenchmarks(keys int) ([]memoryBenchmark, error) {
	names := make([]string, keys)
	for i := range names {
		names[i] = "client-" + strconv.Itoa(i)
	}
	var makers []maker
	for _, alg := range []limiter.Algorithm{limiter.GCRA, limiter.TokenBucket, limiter.FixedWindow} {
		makers = append(makers, maker{string(alg), false, func() (decider, error) {
			lim, err := limiter.New(limiter.Config{
				Limit: limiter.PerMinute(alg, memoryRate),
				Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", alg, err)
			}
			ctx := context.Background()
			return func(key string) bool {
				d, _ := lim.Allow(ctx, key)
				return d.Allowed
			}, nil
		}})
	}
	makers = append(makers, maker{xrateLimiterName, true, func() (decider, error) {
		x := newXrateMap()
		ctx := context.Background()
		return func(key string) bool { ok, _ := x.decide(ctx, key); return ok }, nil
	}})

	var out []memoryBenchmark
	for _, m := range makers {
		if _, err := m.make(); err != nil {
			return nil, err
		}
		out = append(out,
			memoryBenchmark{name: m.name + "/serial", limiter: m.name, baseline: m.baseline, fn: serialBenchmark(names, m.make)},
			memoryBenchmark{name: m.name + "/parallel", limiter: m.name, baseline: m.baseline, fn: parallelBenchmark(names, m.make, false)},
			memoryBenchmark{name: m.name + "/parallel_own_keys", limiter: m.name, baseline: m.baseline, fn: parallelBenchmark(names, m.make, true)},
		)
	}
	return out, nil
}

// decider decides for one key and says whether it was allowed.
type decider func(key string) bool

// maker makes a fresh limiter under test.
type maker struct {
	name     string
	baseline bool
	make     func() (decider, error)
}

// Keys are visited with a stride prime to len(names), so consecutive
// decisions touch unrelated keys, as independent clients do.
const stride = 7919

// serialBenchmark decides over names, every key made to exist before the
// timer starts; a refused decision fails it.
func serialBenchmark(names []string, newDecider func() (decider, error)) func(*testing.B) {
	return func(b *testing.B) {
		decide, _ := newDecider()
		for _, k := range names {
			decide(k)
		}
		refused := 0
		i := 0
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if i += stride; i >= len(names) {
				i %= len(names)
			}
			if !decide(names[i]) {
				refused++
			}
		}
		if refused > 0 {
			b.Fatalf("%d decisions refused; the benchmark measures allowed ones", refused)
		}
	}
}

// parallelBenchmark is serialBenchmark on GOMAXPROCS goroutines (see
// runParallel). Each goroutine starts elsewhere in names and, with own,
// decides only on the keys of its own: those whose index is its number
// modulo GOMAXPROCS. Without own, every key's state is written by each
// goroutine in turn, as a server's requests for one client land on any
// core, and moves between the cores' caches.
func parallelBenchmark(names []string, newDecider func() (decider, error), own bool) func(*testing.B) {
	return func(b *testing.B) {
		decide, _ := newDecider()
		for _, k := range names {
			decide(k)
		}
		var refused atomic.Int64
		procs := runtime.GOMAXPROCS(0)
		b.ReportAllocs()
		b.ResetTimer()
		runParallel(procs, b.N, func(g int, take func() int) {
			keys, mine, step := len(names), 0, 1
			if own {
				// The goroutine's keys are names[mine + step·j]; with
				// fewer keys than goroutines, some share one.
				keys, mine, step = max(len(names)/procs, 1), g%min(procs, len(names)), procs
			}
			i := (g + 1) * 1009 % keys
			n := 0
			for calls := take(); calls > 0; calls = take() {
				for range calls {
					if i += stride; i >= keys {
						i %= keys
					}
					if !decide(names[mine+step*i]) {
						n++
					}
				}
			}
			refused.Add(int64(n))
		})
		b.StopTimer()
		if n := refused.Load(); n > 0 {
			b.Fatalf("%d decisions refused; the benchmark measures allowed ones", n)
		}
	}
}

// parallelGrain is how many calls a goroutine of runParallel takes at a
// time: the shared count is written once a grain, not once a call.
const parallelGrain = 1024

// runParallel runs worker on procs goroutines, numbered from 0, which take
// total calls between them, parallelGrain at a time, from take (0 when
// none are left), and returns when all have returned. Unlike
// b.RunParallel it writes nothing per call but on the worker's stack:
// testing.PB counts down in a small heap object per goroutine, written on
// every call, and two goroutines' objects sometimes share a cache line,
// which then moves between the cores on every decision and makes a
// parallel figure depend on the run, not on the limiter.
func runParallel(procs, total int, worker func(g int, take func() int)) {
	var taken atomic.Int64
	take := func() int {
		end := taken.Add(parallelGrain)
		start := end - parallelGrain
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

// goBenchResult is one benchmark's figures over several rounds.
type goBenchResult struct {
	bench  memoryBenchmark
	nsOp   []float64 // per round
	cpuOp  []float64 // CPU ns (user + system, the whole process) per op, per round
	allocs int64     // per op, last round
	bytes  int64     // per op, last round
}

// processCPU is the CPU time this process has used (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// withCPU wraps a benchmark so that the CPU time of its last run (the one
// testing.Benchmark reports) and that run's N are kept. CPU time does not
// count the time the benchmark waits for a CPU, so on a shared machine it
// is steadier than wall time; in parallel it sums every CPU's.
func withCPU(fn func(*testing.B), cpu *time.Duration, n *int) func(*testing.B) {
	return func(b *testing.B) {
		start := processCPU()
		fn(b)
		*cpu, *n = processCPU()-start, b.N
	}
}

// goBenchRun describes one run of the memory benchmarks, for the table's
// heading and the CPU-time ratios.
type goBenchRun struct {
	keys, rounds int
	benchtime    time.Duration
	started      time.Time
	procs        int    // GOMAXPROCS: the goroutines of a parallel benchmark
	load         string // the machine's load average when the run started
}

// runGoBenchmarks runs every memory benchmark rounds times, interleaved (one
// round runs each benchmark once, back to back, in roundOrder, so a change
// in the machine's load affects the contenders of a round alike), each for
// about benchtime, and writes a table of median ns/op, allocations and the
// ratio to the baseline: the median over rounds of the baseline's ns/op
// divided by the limiter's, both from the same round.
func runGoBenchmarks(w, progress io.Writer, keys, rounds int, benchtime time.Duration) error {
	// testing.Benchmark takes its duration from the testing package's flag.
	testing.Init()
	previous := flag.Lookup("test.benchtime").Value.String()
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		return fmt.Errorf("set benchtime: %w", err)
	}
	defer flag.Set("test.benchtime", previous)
	benches, err := memoryBenchmarks(keys)
	if err != nil {
		return err
	}
	results := make([]goBenchResult, len(benches))
	for i, b := range benches {
		results[i].bench = b
	}
	run := goBenchRun{keys: keys, rounds: rounds, benchtime: benchtime, started: time.Now(), procs: runtime.GOMAXPROCS(0), load: loadAverage()}
	for r := 0; r < rounds; r++ {
		for _, i := range roundOrder(benches, r) {
			var cpu time.Duration
			var n int
			res := testing.Benchmark(withCPU(results[i].bench.fn, &cpu, &n))
			if res.N == 0 || n == 0 {
				return fmt.Errorf("benchmark %s failed", results[i].bench.name)
			}
			ns := float64(res.T.Nanoseconds()) / float64(res.N)
			cpuNs := float64(cpu.Nanoseconds()) / float64(n)
			results[i].nsOp = append(results[i].nsOp, ns)
			results[i].cpuOp = append(results[i].cpuOp, cpuNs)
			results[i].allocs, results[i].bytes = res.AllocsPerOp(), res.AllocedBytesPerOp()
			fmt.Fprintf(progress, "round %d  %-28s %8.1f ns/op  %8.1f CPU ns/op  %d allocs/op\n", r+1, results[i].bench.name, ns, cpuNs, res.AllocsPerOp())
		}
	}
	writeGoBenchTable(w, results, run)
	return nil
}

// roundOrder is the order in which round r runs benches: limiter by
// limiter, each limiter's benchmarks together and in their order, starting
// r limiters further each round, so that no limiter always runs first,
// right after the previous round's last benchmark.
func roundOrder(benches []memoryBenchmark, r int) []int {
	var groups [][]int
	for i, b := range benches {
		if i == 0 || b.limiter != benches[i-1].limiter {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], i)
	}
	order := make([]int, 0, len(benches))
	for k := range groups {
		order = append(order, groups[(k+r)%len(groups)]...)
	}
	return order
}

// loadAverage is /proc/loadavg's three load averages, or "unknown": a
// parallel figure means little when other work holds the CPUs.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func writeGoBenchTable(w io.Writer, results []goBenchResult, run goBenchRun) {
	fmt.Fprintf(w, "Go benchmarks measured %s on %s, %d CPUs (GOMAXPROCS %d), %s, load average %s; %d keys, every decision allowed; %d interleaved rounds of about %s per benchmark, medians.\n\n",
		run.started.UTC().Format("2006-01-02 15:04 MST"), cpuModel(), runtime.NumCPU(), run.procs, runtime.Version(), run.load, run.keys, run.rounds, run.benchtime)
	fmt.Fprintln(w, "| benchmark | ns/op (median) | ns/op per round | allocs/op | B/op | × x/time/rate speed (median of rounds) | CPU ns/op (median) | × x/time/rate by CPU time |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|")
	summary := map[string][]string{}
	for _, r := range results {
		base := find(results, func(b goBenchResult) bool { return b.bench.baseline && mode(b.bench.name) == mode(r.bench.name) })
		ratio := medianRatio(base.nsOp, r.nsOp, 1)
		cpuRatio := medianRatio(base.cpuOp, r.cpuOp, 1)
		perRound := make([]string, len(r.nsOp))
		for i, ns := range r.nsOp {
			perRound[i] = fmt.Sprintf("%.0f", ns)
		}
		name := r.bench.name
		if r.bench.baseline {
			name += " (baseline)"
		}
		fmt.Fprintf(w, "| %s | %.1f | %s | %d | %d | %.2f× | %.1f | %.2f× |\n", name, median(r.nsOp), strings.Join(perRound, ", "), r.allocs, r.bytes, ratio, median(r.cpuOp), cpuRatio)
		if !r.bench.baseline {
			m := mode(r.bench.name)
			summary[m] = append(summary[m], fmt.Sprintf("%s %.2f×", r.bench.name, ratio))
			summary[m+" cpu"] = append(summary[m+" cpu"], fmt.Sprintf("%s %.2f×", r.bench.name, cpuRatio))
		}
	}
	shared, sharedCPU := scaling(results, "parallel", run.procs)
	own, ownCPU := scaling(results, "parallel_own_keys", run.procs)
	fmt.Fprintf(w, "\nratio to x/time/rate + mutex map (goal ≥ 1.50×): %s\n", strings.Join(summary["serial"], ", "))
	fmt.Fprintf(w, "by CPU time, steadier on a shared machine: %s\n", strings.Join(summary["serial cpu"], ", "))
	fmt.Fprintf(w, "parallel ratio to x/time/rate + mutex map: %s\n", strings.Join(summary["parallel"], ", "))
	fmt.Fprintf(w, "parallel ÷ serial throughput, keys shared by the goroutines: %s\n", shared)
	fmt.Fprintf(w, "parallel ÷ serial throughput, distinct keys per goroutine (goal ≥ 1.80×): %s\n", own)
	// CPU time per decision does not grow while a benchmark waits for a
	// CPU, so this ratio still shows what the store shares between cores
	// when other work holds them; it is what idle cores would give.
	fmt.Fprintf(w, "parallel ÷ serial by CPU time (GOMAXPROCS %d × serial CPU/op ÷ parallel CPU/op, what idle cores would give), shared keys: %s; distinct keys: %s\n",
		run.procs, sharedCPU, ownCPU)
}

// scaling lists, for each limiter, the parallel benchmark of mode's
// throughput over the serial one's, by wall time and by CPU time: the
// medians of per-round ratios.
func scaling(results []goBenchResult, parallel string, procs int) (wall, cpu string) {
	var byWall, byCPU []string
	for _, s := range results {
		if mode(s.bench.name) != "serial" {
			continue
		}
		p := find(results, func(b goBenchResult) bool {
			return b.bench.limiter == s.bench.limiter && mode(b.bench.name) == parallel
		})
		if p == nil {
			continue
		}
		// Throughput is 1/ns per op, so parallel ÷ serial is serial ns ÷ parallel ns.
		byWall = append(byWall, fmt.Sprintf("%s %.2f×", s.bench.limiter, medianRatio(s.nsOp, p.nsOp, 1)))
		byCPU = append(byCPU, fmt.Sprintf("%s %.2f×", s.bench.limiter, medianRatio(s.cpuOp, p.cpuOp, float64(procs))))
	}
	return strings.Join(byWall, ", "), strings.Join(byCPU, ", ")
}

// find returns the first result that matches, or nil.
func find(results []goBenchResult, match func(goBenchResult) bool) *goBenchResult {
	for i := range results {
		if match(results[i]) {
			return &results[i]
		}
	}
	return nil
}

// medianRatio is the median over rounds of scale × num[i] / den[i]: each
// ratio compares two benchmarks of one round, under one load.
func medianRatio(num, den []float64, scale float64) float64 {
	ratios := make([]float64, min(len(num), len(den)))
	for i := range ratios {
		ratios[i] = scale * num[i] / den[i]
	}
	return median(ratios)
}

// mode is "serial" or "parallel" from a benchmark name.
func mode(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[i+1:]
		}
	}
	return name
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else if n > 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return 0
}
