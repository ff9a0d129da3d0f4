package loadgen

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsEveryDecisionAsAllowedRejectedOrError(t *testing.T) {
	var calls atomic.Uint64
	errBoom := errors.New("boom")
	decide := func(ctx context.Context, key string) (bool, error) {
		switch n := calls.Add(1); n % 3 {
		case 0:
			return false, errBoom
		case 1:
			return true, nil
		default:
			return false, nil
		}
	}
	res, err := Run(context.Background(), Config{Duration: 100 * time.Millisecond, Concurrency: 4, Keys: 10}, decide)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decisions == 0 || res.Decisions != calls.Load() {
		t.Fatalf("Decisions = %d, decide was called %d times", res.Decisions, calls.Load())
	}
	if res.Allowed+res.Rejected+res.Errors != res.Decisions {
		t.Fatalf("allowed %d + rejected %d + errors %d != decisions %d", res.Allowed, res.Rejected, res.Errors, res.Decisions)
	}
	if res.Allowed == 0 || res.Rejected == 0 || res.Errors == 0 {
		t.Fatalf("want some of each: allowed %d, rejected %d, errors %d", res.Allowed, res.Rejected, res.Errors)
	}
	if !errors.Is(res.FirstError, errBoom) {
		t.Fatalf("FirstError = %v, want %v", res.FirstError, errBoom)
	}
	if res.Latency.Count() != res.Decisions {
		t.Fatalf("latency samples %d, decisions %d", res.Latency.Count(), res.Decisions)
	}
	if res.Elapsed < 100*time.Millisecond {
		t.Fatalf("Elapsed = %s, shorter than the configured duration", res.Elapsed)
	}
	if res.DecisionsPerSecond() <= 0 {
		t.Fatalf("DecisionsPerSecond = %g", res.DecisionsPerSecond())
	}
}

func TestRunKeepsExactlyConcurrencyCallersInFlight(t *testing.T) {
	const duration = 150 * time.Millisecond
	var inFlight, peak atomic.Int64
	// Every decision is held until the run's duration is over, so that
	// every caller Run started is in flight at once, however the machine
	// schedules them: one caller too many or too few shows in the peak.
	held := make(chan struct{})
	release := time.AfterFunc(duration, func() { close(held) })
	defer release.Stop()
	decide := func(ctx context.Context, key string) (bool, error) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-held
		inFlight.Add(-1)
		return true, nil
	}
	if _, err := Run(context.Background(), Config{Duration: duration, Concurrency: 8}, decide); err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 8 {
		t.Fatalf("peak callers in flight = %d, want 8", peak.Load())
	}
	if inFlight.Load() != 0 {
		t.Fatalf("%d decisions still in flight after Run returned", inFlight.Load())
	}
}

// keyCounts runs for a short while and counts how often each key was chosen.
func keyCounts(t *testing.T, cfg Config) map[string]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	cfg.Duration = 60 * time.Millisecond
	cfg.Concurrency = 2
	_, err := Run(context.Background(), cfg, func(ctx context.Context, key string) (bool, error) {
		mu.Lock()
		counts[key]++
		mu.Unlock()
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

func TestUniformKeysSpreadEvenlyAndZipfConcentratesOnHotKeys(t *testing.T) {
	uniform := keyCounts(t, Config{Keys: 100, KeyPrefix: "k:", Seed: 7})
	zipf := keyCounts(t, Config{Keys: 100, KeyPrefix: "k:", Seed: 7, Zipf: 1.5})
	share := func(m map[string]int, key string) float64 {
		total := 0
		for k, n := range m {
			if !strings.HasPrefix(k, "k:") {
				t.Fatalf("key %q lacks the prefix", k)
			}
			total += n
		}
		return float64(m[key]) / float64(total)
	}
	if len(uniform) != 100 {
		t.Fatalf("uniform run used %d distinct keys, want all 100", len(uniform))
	}
	if s := share(uniform, "k:0"); s > 0.05 {
		t.Fatalf("uniform: key 0 got %.1f%% of decisions, want about 1%%", 100*s)
	}
	if s := share(zipf, "k:0"); s < 0.25 {
		t.Fatalf("zipf 1.5: key 0 got %.1f%% of decisions, want the hottest share (≈ 40%%)", 100*s)
	}
	for k := range zipf {
		if n, err := strconv.Atoi(strings.TrimPrefix(k, "k:")); err != nil || n < 0 || n >= 100 {
			t.Fatalf("zipf chose %q, outside k:0..k:99", k)
		}
	}
}

func TestRunStopsEarlyWhenTheContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Config{Duration: time.Hour, Concurrency: 3}, func(ctx context.Context, key string) (bool, error) {
		return true, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's error", err)
	}
	if res.Decisions == 0 || res.Elapsed > time.Minute {
		t.Fatalf("partial result: %d decisions in %s", res.Decisions, res.Elapsed)
	}
}

func TestRunReportsProgressAndAFinalCount(t *testing.T) {
	var mu sync.Mutex
	var seen []uint64
	res, err := Run(context.Background(), Config{
		Duration: 120 * time.Millisecond, ProgressInterval: 20 * time.Millisecond,
		Progress: func(elapsed time.Duration, decisions uint64) {
			mu.Lock()
			seen = append(seen, decisions)
			mu.Unlock()
		},
	}, func(ctx context.Context, key string) (bool, error) {
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 {
		t.Fatalf("progress called %d times, want several", len(seen))
	}
	if !slices.IsSorted(seen) {
		t.Fatalf("progress counts %v go down", seen)
	}
	if last := seen[len(seen)-1]; last != res.Decisions {
		t.Fatalf("last progress count %d, result %d", last, res.Decisions)
	}
}

func TestRunRejectsABadConfigNamingTheField(t *testing.T) {
	ok := func(ctx context.Context, key string) (bool, error) { return true, nil }
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a missing duration", Config{}, "duration"},
		{"negative concurrency", Config{Duration: time.Second, Concurrency: -1}, "concurrency"},
		{"negative keys", Config{Duration: time.Second, Keys: -5}, "keys"},
		{"a zipf skew of 1 or less", Config{Duration: time.Second, Zipf: 0.9}, "zipf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.cfg, ok)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	if _, err := Run(context.Background(), Config{Duration: time.Second}, nil); err == nil {
		t.Fatal("a nil decide function was accepted")
	}
}

func TestLargeKeySpacesAreFormattedOnDemand(t *testing.T) {
	counts := keyCounts(t, Config{Keys: maxPrebuiltKeys + 10, KeyPrefix: "big:", Seed: 9})
	if len(counts) < 100 {
		t.Fatalf("only %d distinct keys in a key space of %d", len(counts), maxPrebuiltKeys+10)
	}
}

func TestTheEngineAllocatesNothingPerDecision(t *testing.T) {
	for _, zipf := range []float64{0, 1.2} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		const keys = 1000
		res, err := Run(context.Background(), Config{Duration: 150 * time.Millisecond, Concurrency: 2, Keys: keys, Zipf: zipf},
			func(ctx context.Context, key string) (bool, error) { return len(key) > 0, nil })
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		// The run itself allocates a fixed amount: one string per key, the
		// callers, goroutines and timers. One allocation per decision would
		// be at least res.Decisions more.
		mallocs := after.Mallocs - before.Mallocs
		fixed := uint64(keys) + 2000
		if res.Decisions < 10_000 || mallocs > fixed+res.Decisions/100 {
			t.Fatalf("zipf %g: %d allocations for %d decisions (fixed allowance %d), want none per decision",
				zipf, mallocs, res.Decisions, fixed)
		}
	}
}

func TestLatencyCoversEachDecisionAndAddsUpToNoMoreThanTheRun(t *testing.T) {
	const pause = 2 * time.Millisecond
	res, err := Run(context.Background(), Config{Duration: 60 * time.Millisecond, Concurrency: 3},
		func(ctx context.Context, key string) (bool, error) {
			select { // the latency the run must measure, cut short by the run's end
			case <-time.After(pause):
			case <-ctx.Done():
			}
			return true, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.Latency.Count() != res.Decisions || res.Decisions < 3 {
		t.Fatalf("%d latency samples for %d decisions", res.Latency.Count(), res.Decisions)
	}
	if res.Latency.Min() < pause {
		t.Fatalf("shortest latency %s, but every decision slept %s", res.Latency.Min(), pause)
	}
	// Each caller's samples are consecutive stretches of the run, so their
	// sum cannot exceed the callers' combined time.
	if sum := time.Duration(res.Latency.Count()) * res.Latency.Mean(); sum > 3*res.Elapsed {
		t.Fatalf("latencies add up to %s, more than 3 callers × %s", sum, res.Elapsed)
	}
}
