package simulate

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

// regionsConfig is 3 regions each sending the whole limit (100/s) on one
// key, 50ms apart, shipping every 100ms.
func regionsConfig(alg limiter.Algorithm) RegionsConfig {
	return RegionsConfig{
		Regions: 3, PerRegion: 100, Algorithm: alg, Rate: 100, Period: time.Second,
		OneWay: 50 * time.Millisecond, SyncInterval: 100 * time.Millisecond,
	}
}

func mustSimulateRegions(t *testing.T, c RegionsConfig) *RegionsRun {
	t.Helper()
	run, err := SimulateRegions(c)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func modeResult(t *testing.T, run *RegionsRun, m region.Mode) RegionsResult {
	t.Helper()
	res, ok := run.Result(m)
	if !ok {
		t.Fatalf("no %s result", m)
	}
	return res
}

func TestStrictAdmitsExactlyTheLimitWhereverTheRequestsComeFrom(t *testing.T) {
	for _, alg := range RegionAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			res := modeResult(t, mustSimulateRegions(t, regionsConfig(alg)), region.ModeStrict)
			if res.MaxRatio != 1 {
				t.Errorf("busiest window %.3f× the limit, want exactly 1.00× (windows %v)", res.MaxRatio, res.Windows)
			}
			if res.MeanRatio < 0.98 {
				t.Errorf("mean window %.3f× the limit, want the whole limit used (0.98× or more) under 3× the traffic", res.MeanRatio)
			}
		})
	}
}

func TestLocalAdmitsTheLimitOncePerRegion(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		for _, alg := range RegionAlgorithms {
			t.Run(fmt.Sprintf("%d regions, %s", n, alg), func(t *testing.T) {
				c := regionsConfig(alg)
				c.Regions = n
				res := modeResult(t, mustSimulateRegions(t, c), region.ModeLocal)
				if res.MaxRatio != float64(n) {
					t.Errorf("busiest window %.3f× the limit, want %d.00×", res.MaxRatio, n)
				}
				if res.Bound != float64(n) {
					t.Errorf("documented bound %v, want %d", res.Bound, n)
				}
			})
		}
	}
}

// The async overshoot stays within region.OvershootBound (one request of
// rounding allowed), and does overshoot: the model is not strict in
// disguise.
func TestAsyncOvershootsWithinTheDocumentedBound(t *testing.T) {
	type setup struct {
		regions      int
		perRegion    float64
		oneWay, sync time.Duration
	}
	setups := []setup{
		{2, 100, 10 * time.Millisecond, 50 * time.Millisecond},
		{3, 100, 50 * time.Millisecond, 100 * time.Millisecond},
		{3, 50, 50 * time.Millisecond, 100 * time.Millisecond},
		{5, 200, 150 * time.Millisecond, 250 * time.Millisecond},
	}
	for _, s := range setups {
		for _, alg := range RegionAlgorithms {
			t.Run(fmt.Sprintf("%d regions at %v/s, one-way %s, sync %s, %s", s.regions, s.perRegion, s.oneWay, s.sync, alg), func(t *testing.T) {
				c := regionsConfig(alg)
				c.Regions, c.PerRegion, c.OneWay, c.SyncInterval = s.regions, s.perRegion, s.oneWay, s.sync
				run := mustSimulateRegions(t, c)
				res := modeResult(t, run, region.ModeAsync)
				want := region.OvershootBound(region.ModeAsync, limiter.Limit{Algorithm: alg, Rate: c.Rate, Period: c.Period},
					c.Regions, c.PerRegion*float64(c.Regions-1), c.OneWay, c.SyncInterval, 0)
				if res.Bound != want {
					t.Errorf("reported bound %v, region.OvershootBound says %v", res.Bound, want)
				}
				if res.MaxRatio > want+1/float64(c.Quota()) {
					t.Errorf("busiest window %.3f× the limit, over the documented bound %.3f× (windows %v)", res.MaxRatio, want, res.Windows)
				}
				if strict := modeResult(t, run, region.ModeStrict); alg == limiter.FixedWindow && res.MaxRatio <= strict.MaxRatio {
					t.Errorf("async %.3f× is no more than strict %.3f×: the other regions' counts arrive late, so async overshoots", res.MaxRatio, strict.MaxRatio)
				}
			})
		}
	}
}

func TestHybridStaysCloseToTheLimitWhenTheUnseenTrafficFitsAboveTheThreshold(t *testing.T) {
	// Unseen by a region: 2 × 50/s × (100ms + 50ms) = 15 requests, less
	// than the 20 between the threshold (80) and the limit (100).
	for _, alg := range RegionAlgorithms {
		t.Run(string(alg), func(t *testing.T) {
			c := regionsConfig(alg)
			c.PerRegion = 50
			run := mustSimulateRegions(t, c)
			res := modeResult(t, run, region.ModeHybrid)
			if res.MaxRatio > 1.02 {
				t.Errorf("hybrid busiest window %.3f× the limit, want close to 1 (1.02× at most; windows %v)", res.MaxRatio, res.Windows)
			}
			if res.MaxRatio > res.Bound+1/float64(c.Quota()) {
				t.Errorf("hybrid %.3f× over its documented bound %.3f×", res.MaxRatio, res.Bound)
			}
			if async := modeResult(t, run, region.ModeAsync); alg == limiter.FixedWindow && res.MaxRatio >= async.MaxRatio {
				t.Errorf("hybrid %.3f× is no better than async %.3f×", res.MaxRatio, async.MaxRatio)
			}
			// A window starts empty, so hybrid decides at home only once a
			// window is 80 % full; a bucket under sustained load stays
			// near empty, so hybrid stays strict, as strict as strict.
			strict := modeResult(t, run, region.ModeStrict).CrossShare
			if alg.IsBucket() && res.CrossShare != strict {
				t.Errorf("hybrid sends %.1f%% of decisions to the home region, want %.1f%% as strict: the bucket is never below the threshold", 100*res.CrossShare, 100*strict)
			}
			if !alg.IsBucket() && (res.CrossShare == 0 || res.CrossShare >= strict) {
				t.Errorf("hybrid sends %.1f%% of decisions to the home region, want some, and fewer than strict", 100*res.CrossShare)
			}
		})
	}
}

func TestLatencyAndCrossingFollowWhereDecisionsRun(t *testing.T) {
	tests := []struct {
		name     string
		regions  int
		mode     region.Mode
		cross    float64
		p50, p99 time.Duration
	}{
		{"strict with 3 regions: two requests in three cross, 2 × one-way each", 3, region.ModeStrict, 2.0 / 3, 100 * time.Millisecond, 100 * time.Millisecond},
		{"strict with one region: the home decides everything", 1, region.ModeStrict, 0, 0, 0},
		{"async never waits on a peer", 3, region.ModeAsync, 0, 0, 0},
		{"local never waits on a peer", 3, region.ModeLocal, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := regionsConfig(limiter.FixedWindow)
			c.Regions = tt.regions
			res := modeResult(t, mustSimulateRegions(t, c), tt.mode)
			if d := res.CrossShare - tt.cross; d > 0.001 || d < -0.001 {
				t.Errorf("crossing share %.4f, want %.4f", res.CrossShare, tt.cross)
			}
			if res.LatencyP50 != tt.p50 || res.LatencyP99 != tt.p99 {
				t.Errorf("added latency p50 %s p99 %s, want %s and %s", res.LatencyP50, res.LatencyP99, tt.p50, tt.p99)
			}
		})
	}
}

func TestSimulateRegionsRefusesWhatItCannotRunNamingTheField(t *testing.T) {
	tests := []struct {
		name   string
		change func(*RegionsConfig)
		want   string
	}{
		{"no region", func(c *RegionsConfig) { c.Regions = 0 }, "regions"},
		{"no traffic", func(c *RegionsConfig) { c.PerRegion = 0 }, "rate per region"},
		{"an algorithm async cannot replicate", func(c *RegionsConfig) { c.Algorithm = limiter.SlidingLog }, "algorithm"},
		{"a zero limit", func(c *RegionsConfig) { c.Rate = 0 }, "limit"},
		{"a negative latency", func(c *RegionsConfig) { c.OneWay = -time.Millisecond }, "one-way"},
		{"no sync interval", func(c *RegionsConfig) { c.SyncInterval = 0 }, "sync interval"},
		{"a threshold over the limit", func(c *RegionsConfig) { c.HybridThreshold = 1.5 }, "hybrid threshold"},
		{"a span shorter than a window", func(c *RegionsConfig) { c.Duration = time.Millisecond }, "duration"},
		{"more requests than a simulation replays", func(c *RegionsConfig) { c.PerRegion = 1e6; c.Duration = time.Hour }, "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := regionsConfig(limiter.FixedWindow)
			tt.change(&c)
			if _, err := SimulateRegions(c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

func TestRegionsChartIsDeterministicValidXMLWithAPanelPerMode(t *testing.T) {
	run := mustSimulateRegions(t, regionsConfig(limiter.FixedWindow))
	opts := SVGOptions{Title: "regions <3>", Generated: "Code generated by rl-exporter simulate -regions 3; DO NOT EDIT."}
	var a, b bytes.Buffer
	if err := run.WriteSVG(&a, opts); err != nil {
		t.Fatal(err)
	}
	if err := run.WriteSVG(&b, opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two renderings of the same run differ")
	}
	dec := xml.NewDecoder(bytes.NewReader(a.Bytes()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	for _, m := range region.AllModes() {
		if !strings.Contains(a.String(), fmt.Sprintf(`font-weight="bold" fill="#222">%s</text>`, m)) {
			t.Errorf("no panel for %s", m)
		}
	}
	if !strings.Contains(a.String(), "up to 3.00× the limit per 1s") {
		t.Error("the local panel does not say it let through 3× the limit")
	}
}

// With one region there is nothing to merge: every mode decides as the
// memory store alone does, which Simulate drives through the Limiter. So
// the regional simulation admits exactly what Simulate admits for the same
// requests, for the window algorithms (the buckets start empty across
// regions, full in Simulate).
func TestOneRegionAdmitsWhatTheMemoryStoreAdmits(t *testing.T) {
	for _, alg := range []limiter.Algorithm{limiter.FixedWindow, limiter.SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			c := regionsConfig(alg)
			c.Regions, c.PerRegion = 1, 170
			run := mustSimulateRegions(t, c)
			single, err := Simulate(Config{Rate: c.Rate, Period: c.Period, Arrivals: run.Arrivals, Duration: c.Duration})
			if err != nil {
				t.Fatal(err)
			}
			var want []time.Duration
			for _, r := range single.Results {
				if r.Algorithm == alg {
					want = r.Passed
				}
			}
			if len(want) == 0 || len(want) == len(run.Arrivals) {
				t.Fatalf("Simulate admitted %d of %d requests: the limit is not reached, nothing is compared", len(want), len(run.Arrivals))
			}
			for _, m := range region.AllModes() {
				got := modeResult(t, run, m).Admitted
				if !slices.Equal(got, want) {
					t.Errorf("%s admitted %d requests, the memory store %d (first times %v, want %v)", m, len(got), len(want), head(got), head(want))
				}
			}
		})
	}
}

func head(ts []time.Duration) []time.Duration { return ts[:min(len(ts), 5)] }
