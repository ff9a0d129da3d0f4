package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantilesAreWithinOnePercentOfTheExactValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name   string
		sample func() time.Duration
	}{
		{"sub-microsecond values", func() time.Duration { return time.Duration(r.IntN(1000)) }},
		{"log-normal latencies around a millisecond", func() time.Duration {
			return time.Duration(math.Exp(r.NormFloat64()*1.5) * float64(time.Millisecond))
		}},
		{"a bimodal mix of 50µs and 20ms", func() time.Duration {
			if r.IntN(100) < 97 {
				return 50*time.Microsecond + time.Duration(r.IntN(5000))
			}
			return 20*time.Millisecond + time.Duration(r.IntN(1e6))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			samples := make([]time.Duration, 100_000)
			for i := range samples {
				samples[i] = tc.sample()
				h.Record(samples[i])
			}
			slices.Sort(samples)
			if h.Count() != uint64(len(samples)) {
				t.Fatalf("Count = %d, want %d", h.Count(), len(samples))
			}
			if h.Min() != samples[0] || h.Max() != samples[len(samples)-1] {
				t.Fatalf("Min, Max = %s, %s; want %s, %s", h.Min(), h.Max(), samples[0], samples[len(samples)-1])
			}
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
				exact := samples[int(math.Ceil(q*float64(len(samples))))-1]
				got := h.Quantile(q)
				// Precision is relative above 128ns and exact below it.
				if diff := math.Abs(float64(got - exact)); diff > 0.01*float64(exact)+1 {
					t.Errorf("Quantile(%g) = %s, exact %s (off by %.2f%%)", q, got, exact, 100*diff/float64(exact))
				}
			}
		})
	}
}

func TestHistogramQuantilesNeverDecreaseWithQ(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(3, 4))
	for range 10_000 {
		h.Record(time.Duration(r.ExpFloat64() * float64(time.Millisecond)))
	}
	prev := time.Duration(-1)
	for q := 0.0; q <= 1.0; q += 0.0005 {
		got := h.Quantile(q)
		if got < prev {
			t.Fatalf("Quantile(%g) = %s is below the previous %s", q, got, prev)
		}
		prev = got
	}
}

func TestHistogramCountsHugeAndNegativeDurationsAtTheEdges(t *testing.T) {
	var h Histogram
	h.Record(-time.Second)
	h.Record(10 * time.Minute)
	if h.Min() != 0 || h.Max() != 10*time.Minute {
		t.Fatalf("Min, Max = %s, %s; want 0, 10m", h.Min(), h.Max())
	}
	if got := h.Quantile(1); got != 10*time.Minute {
		t.Fatalf("Quantile(1) = %s, want the exact maximum 10m", got)
	}
	if got := h.Quantile(0.99); got < 68*time.Second {
		t.Fatalf("Quantile(0.99) = %s, want the top bucket (≥ 68s)", got)
	}
}

func TestEmptyHistogramAnswersZero(t *testing.T) {
	var h Histogram
	if h.Quantile(0.99) != 0 || h.Mean() != 0 || h.Max() != 0 {
		t.Fatalf("empty histogram: p99 %s, mean %s, max %s; want zeros", h.Quantile(0.99), h.Mean(), h.Max())
	}
}

func TestMergeGivesTheSameQuantilesAsRecordingIntoOne(t *testing.T) {
	var a, b, all Histogram
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 50_000 {
		d := time.Duration(r.IntN(int(10 * time.Millisecond)))
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(&b)
	for _, q := range []float64{0, 0.5, 0.99, 0.999, 1} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("merged Quantile(%g) = %s, single histogram %s", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Count() != all.Count() || a.Mean() != all.Mean() {
		t.Errorf("merged count/mean %d/%s, single %d/%s", a.Count(), a.Mean(), all.Count(), all.Mean())
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	h := NewHistogram()
	d := 1234 * time.Microsecond
	if n := testing.AllocsPerRun(1000, func() { h.Record(d); d += 17 }); n != 0 {
		t.Fatalf("Record allocates %.1f times per call, want 0", n)
	}
}

func TestEveryBucketRoundTripsThroughItsBounds(t *testing.T) {
	for slot := range histogramSlots {
		low, width := slotBounds(slot)
		if got := slotOf(low); got != slot {
			t.Fatalf("slotOf(low of slot %d = %d) = %d", slot, low, got)
		}
		if slot < histogramSlots-1 {
			if got := slotOf(low + width); got != slot+1 {
				t.Fatalf("slotOf(%d), just past slot %d, = %d; want %d", low+width, slot, got, slot+1)
			}
		}
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	d := 250 * time.Microsecond
	b.ReportAllocs()
	for b.Loop() {
		h.Record(d)
		d = (d*7 + 13) % (50 * time.Millisecond)
	}
}
