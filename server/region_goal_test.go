//go:build !race

package server_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/region"
)

func TestGoalAsyncAcrossTwoRegionsAdmitsWithinTheDocumentedOvershootBound(t *testing.T) {
	regions := startTwoRegions(t)
	cold := time.Now()
	regions.waitForShipping(t)
	t.Logf("shipping between the regions established %s after start", time.Since(cold).Round(time.Millisecond))
	const n, limit = 60, 40
	// Until a region's first round of the drive lands, its lag is the
	// idle time since the warm-up, not a staleness any decision saw.
	lags := sampleSyncLag(regions, 150*time.Millisecond)
	got, took := driveBoth(t, regions.urls, n, 10*time.Millisecond, "POST /async", "ta", "user:async")
	worst := lags()
	// The other region's admitted rate, as driven (an upper bound: it
	// stops admitting at the limit), and how stale one region's view of
	// the other's count got: the links' one-way latency, or the largest
	// sync lag the regions reported while they were driven when a loaded
	// machine made shipping later than that.
	otherRate := float64(n) / took.Seconds()
	stale := max(oneWay, worst)
	bound := region.OvershootBound(region.ModeAsync, limiter.Limit{Algorithm: limiter.FixedWindow, Rate: limit, Period: time.Hour},
		2, otherRate, stale, 50*time.Millisecond, 0)
	most := int(math.Floor(bound * limit))
	t.Logf("async: %v in %s; other region's rate %.0f/s; largest sync lag %s; bound %.3f× = at most %d admitted",
		got, took.Round(time.Millisecond), otherRate, worst.Round(time.Millisecond), bound, most)
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

// sampleSyncLag scrapes both regions' rate_limit_region_sync_lag_seconds
// every 5ms from after until the returned function is called, which
// returns the largest lag seen. A scrape that fails is skipped: the
// sample is a measurement of the run, not an assertion.
func sampleSyncLag(r twoRegions, after time.Duration) func() time.Duration {
	stop := make(chan struct{})
	done := make(chan time.Duration)
	go func() {
		var worst time.Duration
		select {
		case <-stop:
			done <- 0
			return
		case <-time.After(after):
		}
		c := &http.Client{Timeout: time.Second}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, side := range []struct {
				p    *proc
				peer string
			}{{r.a, "b"}, {r.b, "a"}} {
				if lag, ok := syncLag(c, side.p.url("main", "/metrics"), side.peer); ok {
					worst = max(worst, lag)
				}
			}
			select {
			case <-stop:
				done <- worst
				return
			case <-tick.C:
			}
		}
	}()
	return func() time.Duration {
		close(stop)
		return <-done
	}
}

func syncLag(c *http.Client, url, peer string) (time.Duration, bool) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, false
	}
	for _, m := range fams["rate_limit_region_sync_lag_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "peer_region" && l.GetValue() == peer {
				return time.Duration(m.GetGauge().GetValue() * float64(time.Second)), true
			}
		}
	}
	return 0, false
}
