package region_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

func TestParseMode(t *testing.T) {
	tests := []struct {
		name, in string
		want     region.Mode
		err      bool
	}{
		{"an empty mode is local", "", region.ModeLocal, false},
		{"each mode parses to itself", "strict", region.ModeStrict, false},
		{"async parses", "async", region.ModeAsync, false},
		{"hybrid parses", "hybrid", region.ModeHybrid, false},
		{"a mis-cased mode is refused", "Strict", "", true},
		{"an unknown mode is refused", "global", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := region.ParseMode(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("ParseMode(%q) = %q, %v", tt.in, got, err)
			}
			if err != nil {
				for _, want := range []string{tt.in, "local", "strict", "async", "hybrid"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error %q does not name %q", err, want)
					}
				}
			}
		})
	}
}

func TestSupportsAgreesWithAlgorithms(t *testing.T) {
	for _, m := range region.AllModes() {
		for _, a := range limiter.AllAlgorithms() {
			if got, listed := region.Supports(m, a), slices.Contains(region.Algorithms(m), a); got != listed {
				t.Errorf("Supports(%s, %s) = %v but Algorithms lists it: %v", m, a, got, listed)
			}
		}
	}
	if got := region.Algorithms(region.ModeStrict); !slices.Equal(got, limiter.AllAlgorithms()) {
		t.Errorf("strict supports %v, want all six", got)
	}
	want := []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow, limiter.TokenBucket, limiter.GCRA}
	for _, m := range []region.Mode{region.ModeAsync, region.ModeHybrid} {
		got := region.Algorithms(m)
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s supports %v, want %v", m, got, w)
		}
	}
	if region.Supports("global", limiter.GCRA) {
		t.Error("an unknown mode supports gcra")
	}
}

// The pinned scenario: 2 regions at 200 req/s each, 600 per 60 s, sync
// 100 ms, one-way 50 ms.
func TestOvershootBoundOfThePinnedScenario(t *testing.T) {
	fixed := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 600, Period: time.Minute}
	gcra := limiter.Limit{Algorithm: limiter.GCRA, Rate: 600, Period: time.Minute}
	const sync, oneWay = 100 * time.Millisecond, 50 * time.Millisecond
	tests := []struct {
		name string
		mode region.Mode
		lim  limiter.Limit
		want float64
	}{
		{"local admits the limit in each region", region.ModeLocal, fixed, 2},
		{"strict admits the limit once", region.ModeStrict, fixed, 1},
		// 200 req/s × 150 ms = 30 unseen units on 600.
		{"async admits what the other region sent in sync + one-way more", region.ModeAsync, fixed, 1.05},
		{"async on a bucket counts the same units on its quota", region.ModeAsync, gcra, 1.05},
		// 2·s·R = 2 × 0.15 × 400 = 120 = (1 − 0.8) × 600: nothing late.
		{"hybrid's strict stretch outlasts the async tail", region.ModeHybrid, fixed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := region.OvershootBound(tt.mode, tt.lim, 2, 200, oneWay, sync, 0.8)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("OvershootBound = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOvershootBoundOfHybrid(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 600, Period: time.Minute}
	tests := []struct {
		name      string
		otherRate float64
		threshold float64
		want      float64
	}{
		// s = 0.15 s, R = 1000: late = 2·0.15·1000 − 120 = 180, unseen = 75.
		{"with fast traffic the async tail is the bound", 500, 0.8, 1 + 75.0/600},
		// R = 500: late = 150 − 120 = 30 < unseen 37.5.
		{"with medium traffic only the part that outruns the strict stretch", 250, 0.8, 1.05},
		{"a lower threshold leaves a longer strict stretch", 250, 0.5, 1},
		{"a threshold out of range is the default", 250, 0, 1.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := region.OvershootBound(region.ModeHybrid, lim, 2, tt.otherRate, 50*time.Millisecond, 100*time.Millisecond, tt.threshold)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("OvershootBound = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOvershootBoundOfOddInputs(t *testing.T) {
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 600, Period: time.Minute}
	if got := region.OvershootBound(region.ModeAsync, lim, 1, 200, 0, time.Second, 0); got != 1 {
		t.Errorf("one region in async = %v, want 1", got)
	}
	if got := region.OvershootBound("global", lim, 2, 200, 0, time.Second, 0); !math.IsNaN(got) {
		t.Errorf("an unknown mode = %v, want NaN", got)
	}
	if got := region.OvershootBound(region.ModeLocal, lim, 3, 0, 0, 0, 0); got != 3 {
		t.Errorf("local with 3 regions = %v, want 3", got)
	}
}

func TestHomeIsStableAndMovesFewKeysWhenARegionIsAdded(t *testing.T) {
	two := newSetOnly(t, "us-east-1", "us-east-1", "eu-west-1")
	three := newSetOnly(t, "us-east-1", "us-east-1", "eu-west-1", "ap-northeast-1")
	counts := map[string]int{}
	moved := 0
	const keys = 3000
	for i := range keys {
		k := fmt.Sprintf("client-%d", i)
		h2, h3 := two.Home(k), three.Home(k)
		if h2 != two.Home(k) {
			t.Fatalf("Home(%q) changed between calls", k)
		}
		counts[h3]++
		if h2 != h3 {
			moved++
			if h3 != "ap-northeast-1" {
				t.Fatalf("key %q moved from %s to %s, not to the new region", k, h2, h3)
			}
		}
	}
	// A third of the keys move to the new region, none elsewhere.
	if moved < keys/4 || moved > keys*5/12 {
		t.Errorf("%d of %d keys moved to the new region, want about a third", moved, keys)
	}
	for r, n := range counts {
		if n < keys/4 || n > keys*5/12 {
			t.Errorf("region %s is home of %d of %d keys, want about a third", r, n, keys)
		}
	}
}
