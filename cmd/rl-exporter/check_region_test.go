package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

const threeRegions = `
store: {type: redis, redis: {url: "redis://127.0.0.1:1"}}
tiers: {names: [free, enterprise], default: free}
region:
  name: us-east-1
  sync_interval: 200ms
  peers:
    ap-northeast-1: {url: "redis://127.0.0.1:2"}
    eu-west-1: {url: "redis://127.0.0.1:3"}
  tier_homes: {enterprise: ap-northeast-1}
classes:
  billing: {region_mode: strict, limits: {free: {algorithm: gcra, rate: 100, period: 1m}}}
  public:
    region_mode: hybrid
    hybrid_threshold: 0.5
    limits:
      free: {algorithm: sliding_window, rate: 600, period: 1m, region_mode: async}
      enterprise: {algorithm: token_bucket, rate: 60, period: 1s}
  default: {limits: {free: {algorithm: sliding_log, rate: 10, period: 1s}}}
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCheckWithOneWayPrintsTheOvershootBoundOfEachAsyncAndHybridTierAndTheRateItAssumed(t *testing.T) {
	f := writeConfig(t, threeRegions)
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", f, "--one-way", "50ms"}, nil, &out, &errb); got != exitOK {
		t.Fatalf("exit %d; stderr %s", got, errb.String())
	}
	text := out.String()
	bound := func(m region.Mode, lim limiter.Limit, threshold float64) (float64, float64) {
		other := float64(lim.Rate) / lim.Period.Seconds() * 2 // three regions: two others
		return region.OvershootBound(m, lim, 3, other, 50*time.Millisecond, 200*time.Millisecond, threshold), other
	}
	freeBound, freeRate := bound(region.ModeAsync, limiter.PerMinute(limiter.SlidingWindow, 600), 0.5)
	entBound, entRate := bound(region.ModeHybrid, limiter.PerSecond(limiter.TokenBucket, 60), 0.5)
	for _, want := range []string{
		"region us-east-1 of 3 (ap-northeast-1, eu-west-1, us-east-1), sync_interval 200ms",
		"  billing/free: strict, gcra 100 per 1m0s\n",
		"  billing/enterprise: strict, gcra 100 per 1m0s, home ap-northeast-1 (region.tier_homes)\n",
		fmt.Sprintf("  public/free: async, sliding_window 600 per 1m0s: overshoot bound %.4g× (at most %.0f admitted where one Redis would admit 600), assuming the other 2 region(s) admit %.4g/s together\n", freeBound, math.Floor(freeBound*600+1e-9), freeRate),
		fmt.Sprintf("  public/enterprise: hybrid, token_bucket 60 per 1s, hybrid_threshold 0.5, home ap-northeast-1 (region.tier_homes): overshoot bound %.4g× (at most %.0f admitted where one Redis would admit 60), assuming the other 2 region(s) admit %.4g/s together\n", entBound, math.Floor(entBound*60+1e-9), entRate),
		"one-way latency of 50ms",
		"the limit's own rate × (regions − 1)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if freeRate != 20 || entRate != 120 {
		t.Errorf("assumed rates %g and %g, want 20/s (600/min × 2) and 120/s (60/s × 2)", freeRate, entRate)
	}
	if freeBound <= 1 || entBound <= 1 {
		t.Errorf("bounds %g and %g: an async or hybrid limit can overshoot, so its bound is above 1", freeBound, entBound)
	}
	// The region section (every limit is listed above it, local or not).
	section := text[strings.Index(text, "region us-east-1"):]
	if strings.Contains(section, "default/") {
		t.Errorf("a local class is listed:\n%s", section)
	}
}

func TestCheckWithoutOneWayListsTheModesWithoutBounds(t *testing.T) {
	f := writeConfig(t, threeRegions)
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", f}, nil, &out, &errb); got != exitOK {
		t.Fatalf("exit %d; stderr %s", got, errb.String())
	}
	if !strings.Contains(out.String(), "  public/free: async, sliding_window 600 per 1m0s\n") || strings.Contains(out.String(), "overshoot") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestCheckRegionProblemsAndFlags(t *testing.T) {
	unsupported := writeConfig(t, strings.Replace(threeRegions, "algorithm: sliding_window", "algorithm: sliding_log", 1))
	local := writeConfig(t, "classes: {api: {limits: {default: {algorithm: gcra, rate: 1, period: 1s}}}}\n")
	for _, c := range []struct {
		name        string
		args        []string
		want        int
		out, stderr string
	}{
		{"an algorithm the mode does not support is refused naming the class, the tier and what the mode supports",
			[]string{"check", "--config", unsupported}, exitFailure, "",
			"classes.public.limits.free: class public tier free: region_mode async does not support algorithm sliding_log; async supports "},
		{"a negative latency is a usage error", []string{"check", "--config", local, "--one-way", "-5ms"}, exitUsage, "", "want a duration >= 0"},
		{"a latency without a unit is a usage error", []string{"check", "--config", local, "--one-way", "50"}, exitUsage, "", "want a duration"},
		{"a config without regions has no overshoot to bound", []string{"check", "--config", local, "--one-way", "50ms"}, exitOK, "every class is local", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if got := run(context.Background(), c.args, nil, &out, &errb); got != c.want {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", got, c.want, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), c.out) || !strings.Contains(errb.String(), c.stderr) {
				t.Errorf("stdout %q stderr %q, want %q and %q", out.String(), errb.String(), c.out, c.stderr)
			}
		})
	}
}
