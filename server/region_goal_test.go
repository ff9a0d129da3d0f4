//go:build !race

package server_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

func TestGoalAsyncAcrossTwoRegionsAdmitsWithinTheDocumentedOvershootBound(t *testing.T) {
	regions := startTwoRegions(t)
	cold := time.Now()
	regions.waitForShipping(t)
	t.Logf("shipping between the regions established %s after start", time.Since(cold).Round(time.Millisecond))
	const n, limit = 60, 40
	got, took := driveBoth(t, regions.urls, n, 10*time.Millisecond, "POST /async", "ta", "user:async")
	// The other region's admitted rate, as driven (an upper bound: it
	// stops admitting at the limit), and the links' one-way latency plus
	// 25ms for a loaded machine's scheduling.
	otherRate := float64(n) / took.Seconds()
	bound := region.OvershootBound(region.ModeAsync, limiter.Limit{Algorithm: limiter.FixedWindow, Rate: limit, Period: time.Hour},
		2, otherRate, oneWay+25*time.Millisecond, 50*time.Millisecond, 0)
	most := int(math.Floor(bound * limit))
	t.Logf("async: %v in %s; other region's rate %.0f/s; bound %.3f× = at most %d admitted", got, took.Round(time.Millisecond), otherRate, bound, most)
	if got["allowed"] < limit || got["allowed"] > most {
		t.Errorf("async admitted %d over both regions, want %d to %d (the limit, up to the overshoot bound %.3f; local mode would admit %d)",
			got["allowed"], limit, most, bound, 2*limit)
	}
}

func TestGoalWithThePeerLinkCutAsyncDecisionsDoNotWaitOnThePeer(t *testing.T) {
	regions := startTwoRegions(t)
	c := &http.Client{Timeout: 10 * time.Second}
	decide(t, c, regions.urls[0], "POST /async", "ta", "user:warm") // connections open
	regions.aToB.BlackHole()
	defer regions.aToB.Restore()
	var slowest time.Duration
	// One decision every 10ms, across several shipping rounds, each stuck
	// on the cut link; a ticker keeps that pace whatever a decision costs.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < 45; i++ {
		if i > 0 {
			<-tick.C
		}
		t0 := time.Now()
		decide(t, c, regions.urls[0], "POST /async", "ta", "user:async-cut")
		slowest = max(slowest, time.Since(t0))
	}
	t.Logf("slowest async decision with the link cut: %s", slowest)
	if slowest > 50*time.Millisecond {
		t.Errorf("the slowest async decision with the link cut took %s; nothing should wait on the peer (one-way latency %s, sync_timeout 300ms)", slowest, oneWay)
	}
}
