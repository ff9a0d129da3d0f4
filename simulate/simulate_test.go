package simulate

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func mustRun(t *testing.T, p Pattern, rate int64, period time.Duration, burst int64, seed uint64) *Run {
	t.Helper()
	arrivals, err := Generate(p, rate, period, p.DefaultDuration(period), seed)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Simulate(Config{Rate: rate, Period: period, Burst: burst, Arrivals: arrivals, Duration: p.DefaultDuration(period)})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func result(t *testing.T, run *Run, a limiter.Algorithm) Result {
	t.Helper()
	res, ok := run.Result(a)
	if !ok {
		t.Fatalf("no result for %s", a)
	}
	return res
}

// TestBoundaryBurst checks the numbers the README's chart shows: the same
// attack (Rate requests just before the first window boundary, Rate just
// after) against each algorithm.
func TestBoundaryBurst(t *testing.T) {
	limits := []struct {
		name   string
		rate   int64
		period time.Duration
		burst  int64
	}{
		{"60 per minute", 60, time.Minute, 0},
		{"100 per second", 100, time.Second, 0},
		{"10 per 30 seconds", 10, 30 * time.Second, 0},
		{"60 per minute with buckets of 120", 60, time.Minute, 120},
	}
	for _, lim := range limits {
		run := mustRun(t, BoundaryBurst, lim.rate, lim.period, lim.burst, 1)
		arrivals := run.Config.Arrivals
		span := arrivals[len(arrivals)-1] - arrivals[0]
		bucket := lim.burst
		if bucket == 0 {
			bucket = lim.rate
		}
		r := lim.rate
		t.Run(lim.name+": fixed_window lets through twice the limit across the boundary", func(t *testing.T) {
			res := result(t, run, limiter.FixedWindow)
			if res.Allowed != int(2*r) || res.Rejected != 0 || res.MaxInWindow != int(2*r) || res.MaxRatio != 2 {
				t.Errorf("allowed %d rejected %d max %d (%.2f×); want all %d within one window, 2.00×", res.Allowed, res.Rejected, res.MaxInWindow, res.MaxRatio, 2*r)
			}
		})
		t.Run(lim.name+": sliding_log lets through exactly the limit", func(t *testing.T) {
			res := result(t, run, limiter.SlidingLog)
			if res.Allowed != int(r) || res.MaxInWindow != int(r) || res.MaxRatio != 1 {
				t.Errorf("allowed %d max %d (%.2f×); want %d, 1.00×", res.Allowed, res.MaxInWindow, res.MaxRatio, r)
			}
		})
		// A bucket of B refilled at R per P lets through at most B plus
		// what refills in the span of the attack.
		bucketBound := int(bucket + int64(math.Ceil(float64(r)*float64(span)/float64(lim.period))))
		for _, a := range []limiter.Algorithm{limiter.TokenBucket, limiter.GCRA} {
			t.Run(fmt.Sprintf("%s: %s lets through its bucket plus the refill during the attack, at most %d", lim.name, a, bucketBound), func(t *testing.T) {
				res := result(t, run, a)
				if res.MaxInWindow > bucketBound || res.Allowed < int(min(bucket, 2*r)) {
					t.Errorf("allowed %d, max %d in a window; want at least the bucket %d and at most %d", res.Allowed, res.MaxInWindow, min(bucket, 2*r), bucketBound)
				}
			})
		}
		t.Run(lim.name+": token_bucket and gcra decide alike", func(t *testing.T) {
			tb, g := result(t, run, limiter.TokenBucket), result(t, run, limiter.GCRA)
			if tb.Allowed != g.Allowed || !slices.Equal(tb.Passed, g.Passed) {
				t.Errorf("token_bucket let through %d, gcra %d", tb.Allowed, g.Allowed)
			}
		})
		t.Run(lim.name+": leaky_bucket admits like a token bucket but passes at most the limit per period", func(t *testing.T) {
			res := result(t, run, limiter.LeakyBucket)
			if res.Allowed != result(t, run, limiter.TokenBucket).Allowed {
				t.Errorf("leaky_bucket admitted %d, token_bucket %d", res.Allowed, result(t, run, limiter.TokenBucket).Allowed)
			}
			if res.MaxInWindow > int(r) {
				t.Errorf("max %d let through in a window, want at most %d", res.MaxInWindow, r)
			}
			// The last one admitted queues behind all the others, less what
			// drained while the attack went on.
			if want := time.Duration(res.Allowed-1)*lim.period/time.Duration(r) - span; res.MaxDelay < want {
				t.Errorf("max delay %s, want at least %s (the last admitted waits for the queue ahead)", res.MaxDelay, want)
			}
		})
		t.Run(lim.name+": sliding_window stays within its approximation", func(t *testing.T) {
			res := result(t, run, limiter.SlidingWindow)
			// Just after the boundary the previous window weighs almost its
			// whole count, so only what its weight loses during the attack
			// gets through.
			if res.MaxInWindow > bucketBound && lim.burst == 0 || res.MaxInWindow < int(r) {
				t.Errorf("max %d in a window, want between %d and %d", res.MaxInWindow, r, bucketBound)
			}
		})
	}
}

// TestDocumentedBoundsHoldForEveryPattern checks, on every pattern and many
// seeds, the bounds the algorithms' documentation promises for any span of
// one Period.
func TestDocumentedBoundsHoldForEveryPattern(t *testing.T) {
	for _, p := range Patterns {
		for seed := uint64(1); seed <= 8; seed++ {
			if p != Spiky && seed > 1 {
				continue
			}
			for _, burst := range []int64{0, 25} {
				const r = 10
				run := mustRun(t, p, r, 2*time.Second, burst, seed)
				b := int64(r)
				if burst > 0 {
					b = burst
				}
				bounds := map[limiter.Algorithm]int{
					limiter.FixedWindow:   2 * r,
					limiter.SlidingLog:    r,
					limiter.SlidingWindow: 2 * r,
					limiter.TokenBucket:   int(b + r),
					limiter.GCRA:          int(b + r),
					limiter.LeakyBucket:   r,
				}
				for _, res := range run.Results {
					if res.MaxInWindow > bounds[res.Algorithm] {
						t.Errorf("%s seed %d burst %d: %s let through %d in one period, bound %d", p, seed, burst, res.Algorithm, res.MaxInWindow, bounds[res.Algorithm])
					}
					if res.Allowed+res.Rejected != len(run.Config.Arrivals) {
						t.Errorf("%s: %s decided %d of %d requests", p, res.Algorithm, res.Allowed+res.Rejected, len(run.Config.Arrivals))
					}
				}
			}
		}
	}
}

func TestPatternsAreDeterministicAndShapedAsDocumented(t *testing.T) {
	const r, period = 60, time.Minute
	for _, p := range Patterns {
		a, err := Generate(p, r, period, p.DefaultDuration(period), 7)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Generate(p, r, period, p.DefaultDuration(period), 7)
		if !slices.Equal(a, b) || !slices.IsSorted(a) || len(a) == 0 {
			t.Errorf("%s: not the same sorted, non-empty arrivals twice", p)
		}
		for _, at := range a {
			if at%time.Microsecond != 0 || at < 0 || at >= p.DefaultDuration(period) {
				t.Fatalf("%s: arrival %s outside [0, duration) or finer than a microsecond", p, at)
			}
		}
	}
	counts := map[Pattern][2]int{ // expected request counts over 5 minutes, ±
		Steady: {450, 1},
		Ramp:   {300, 1},
		Spiky:  {375, 75}, // half the limit plus, per period, a spike of 3/4 of it on average
	}
	for p, want := range counts {
		a, _ := Generate(p, r, period, 5*period, 3)
		if d := len(a) - want[0]; d < -want[1] || d > want[1] {
			t.Errorf("%s: %d requests in 5 periods, want %d±%d", p, len(a), want[0], want[1])
		}
	}
	burst, _ := Generate(BoundaryBurst, r, period, 3*period, 1)
	if len(burst) != 120 || burst[0] != 59*time.Second || burst[59] >= 60*time.Second || burst[60] != 61*time.Second || burst[119] >= 62*time.Second {
		t.Errorf("boundary-burst: %d requests from %s to %s, then %s to %s; want 60 in [59s,60s) and 60 in [61s,62s)", len(burst), burst[0], burst[59], burst[60], burst[119])
	}
	s1, _ := Generate(Spiky, r, period, 5*period, 1)
	s2, _ := Generate(Spiky, r, period, 5*period, 2)
	if slices.Equal(s1, s2) {
		t.Error("spiky: seeds 1 and 2 gave the same traffic")
	}
}

func TestGenerateRefusesMoreRequestsThanItReplays(t *testing.T) {
	_, err := Generate(Steady, 1_000_000, time.Second, time.Hour, 1)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("err = %v, want a refusal naming the bound", err)
	}
	if _, err := ParsePattern("bursty"); err == nil || !strings.Contains(err.Error(), "boundary-burst") {
		t.Errorf("ParsePattern(bursty) = %v, want an error listing the patterns", err)
	}
}

func TestReadCSV(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []time.Duration
	}{
		{"seconds since the start, sorted", "1.5\n0\n59.000001\n", []time.Duration{0, 1500 * time.Millisecond, 59*time.Second + time.Microsecond}},
		{"a header, comments, blank lines and extra columns are skipped", "timestamp,path\n# the attack\n\n59,/a\n61,/b\n", []time.Duration{59 * time.Second, 61 * time.Second}},
		{"RFC 3339 timestamps are relative to the earliest", "2026-03-01T12:00:01.5Z\n2026-03-01T12:00:00Z\n2026-03-01T13:00:00+01:00\n", []time.Duration{0, 0, 1500 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCSV(strings.NewReader(tc.in), "in.csv")
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("ReadCSV = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestReadCSVNamesTheLineOfABadRow(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a word after the header", "timestamp\n1\nsoon\n", "in.csv:3:"},
		{"a negative time", "1\n-2\n", "in.csv:2:"},
		{"seconds after timestamps", "2026-03-01T12:00:00Z\n5\n", "in.csv:2:"},
		{"timestamps after seconds", "# c\n5\n2026-03-01T12:00:00Z\n", "in.csv:3:"},
		{"an unterminated quote", "1\n\"2\n", "in.csv"},
		{"nothing at all", "timestamp\n# none\n", "in.csv: no timestamps"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadCSV(strings.NewReader(tc.in), "in.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSimulateRejectsWhatItCannotRun(t *testing.T) {
	ok := []time.Duration{0, time.Second}
	for name, cfg := range map[string]Config{
		"no arrivals":              {Rate: 1, Period: time.Second},
		"arrivals out of order":    {Rate: 1, Period: time.Second, Arrivals: []time.Duration{time.Second, 0}},
		"a rate of zero":           {Rate: 0, Period: time.Second, Arrivals: ok},
		"a period below 1ms":       {Rate: 1, Period: time.Microsecond, Arrivals: ok},
		"a negative bucket":        {Rate: 1, Period: time.Second, Burst: -1, Arrivals: ok},
		"a sub-microsecond period": {Rate: 1, Period: time.Second + 1, Arrivals: ok},
	} {
		if _, err := Simulate(cfg); err == nil {
			t.Errorf("%s: Simulate accepted it", name)
		}
	}
}

func TestBusiestWindowCountsHalfOpenSpans(t *testing.T) {
	s := time.Second
	times := []time.Duration{0, 1 * s, 2 * s, 3 * s, 10 * s, 10 * s, 10 * s}
	if got := busiestWindow(times, 3*s); got != 3 {
		t.Errorf("busiest 3s = %d, want 3 (the three at 10s; 0,1,2 and 1,2,3 are also 3)", got)
	}
	if got := busiestWindow(times, 3*s+1); got != 4 {
		t.Errorf("busiest 3s+1ns = %d, want 4 (0..3s)", got)
	}
}

func TestWindowEnvelopeKeepsPeaksBetweenColumns(t *testing.T) {
	// Five requests at one instant in the middle of a column, a window
	// much shorter than a column: the column must still show 5.
	times := []time.Duration{505 * time.Millisecond, 505 * time.Millisecond, 505 * time.Millisecond, 505 * time.Millisecond, 505 * time.Millisecond}
	env := windowEnvelope(times, time.Millisecond, 10*time.Second, 10)
	want := []int{5, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if !slices.Equal(env, want) {
		t.Errorf("envelope = %v, want %v", env, want)
	}
	env = windowEnvelope([]time.Duration{0, time.Second}, 3*time.Second, 5*time.Second, 5)
	// (t−3s, t]: the request at 0 leaves at 3s, the one at 1s at 4s.
	if want := []int{1, 2, 2, 1, 0}; !slices.Equal(env, want) {
		t.Errorf("envelope = %v, want %v", env, want)
	}
}

func TestChartIsDeterministicValidXMLWithTheLimitAndPeaks(t *testing.T) {
	run := mustRun(t, BoundaryBurst, 60, time.Minute, 0, 1)
	opts := SVGOptions{Title: "a <b> & c", Generated: "Code generated by rl-exporter simulate --pattern boundary-burst; DO NOT EDIT."}
	var a, b bytes.Buffer
	if err := run.WriteSVG(&a, opts); err != nil {
		t.Fatal(err)
	}
	if err := run.WriteSVG(&b, opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two charts of one run differ")
	}
	first, _, _ := strings.Cut(a.String(), "\n")
	if !strings.HasPrefix(first, "<!-- Code generated by") || !strings.HasSuffix(first, "DO NOT EDIT. -->") {
		t.Errorf("first line %q, want the generated-code comment", first)
	}
	dec := xml.NewDecoder(bytes.NewReader(a.Bytes()))
	dec.Strict = true
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(cd)) != "" {
			texts = append(texts, string(cd))
		}
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"a <b> & c", "fixed_window", "let through 120, rejected 0, busiest 1m: 2.00× the limit", "let through 60, rejected 60, busiest 1m: 1.00× the limit", "the limit (60)", "2×  120"} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
}

// TestMemoryPerKeyMatchesTheStore measures what a MemoryStore holds for
// many keys and compares it with the documented estimate.
func TestMemoryPerKeyMatchesTheStore(t *testing.T) {
	const keys = 10000
	measure := func(alg limiter.Algorithm, perKey int, keyPad string) float64 {
		now := time.Unix(1_800_000_000, 0)
		store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: func() time.Time { return now }, MaxKeys: 2 * keys})
		lim := limiter.Limit{Algorithm: alg, Rate: 64, Period: time.Hour}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range keys {
			k := fmt.Sprintf("key-%06d%s", i, keyPad)
			for j := range perKey {
				now = time.Unix(1_800_000_000, int64(j)*int64(time.Millisecond))
				if d, _ := store.Decide(t.Context(), k, lim, 1); !d.Allowed {
					t.Fatalf("%s: request %d of %s rejected", alg, j, k)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(store)
		return float64(after.HeapAlloc-before.HeapAlloc) / keys
	}
	long := strings.Repeat("x", 100) // kept outside the slot
	for _, tc := range []struct {
		alg      limiter.Algorithm
		perKey   int
		capacity int
		keyPad   string
	}{
		{limiter.TokenBucket, 1, 0, ""},
		{limiter.FixedWindow, 1, 0, ""},
		{limiter.SlidingLog, 64, 64, ""},
		{limiter.GCRA, 1, 0, long},
	} {
		got := measure(tc.alg, tc.perKey, tc.keyPad)
		want := float64(MemoryPerKey(tc.alg, len("key-000000")+len(tc.keyPad), tc.capacity))
		// A Go map holds between 7/16 and 7/8 of its slots, and the
		// allocator rounds sizes up: allow the estimate to be off by -20%/+60%.
		if got < 0.8*want || got > 1.6*want {
			t.Errorf("%s, %d-byte keys: measured %.0f bytes per key, estimate %.0f", tc.alg, len("key-000000")+len(tc.keyPad), got, want)
		} else {
			t.Logf("%s, %d-byte keys: measured %.0f bytes per key, estimate %.0f", tc.alg, len("key-000000")+len(tc.keyPad), got, want)
		}
	}
}
