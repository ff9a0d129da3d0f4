package collector_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rl-exporter/rl-exporter/collector"
)

func TestRegionMetricsExistAtZeroForEveryPeerAndModeAndCountWhatTheRegionsReport(t *testing.T) {
	r, err := collector.NewRegion(collector.RegionConfig{Peers: []string{"ap-northeast-1", "eu-west-1"}, Modes: []string{"strict", "async"}})
	if err != nil {
		t.Fatal(err)
	}
	zero := `
# HELP rate_limit_region_decisions_total Decisions of limits in a region mode other than local, by mode and by where they ran: home local (this region's Redis) or remote (a peer's).
# TYPE rate_limit_region_decisions_total counter
rate_limit_region_decisions_total{home="local",mode="async"} 0
rate_limit_region_decisions_total{home="local",mode="strict"} 0
rate_limit_region_decisions_total{home="remote",mode="async"} 0
rate_limit_region_decisions_total{home="remote",mode="strict"} 0
# HELP rate_limit_region_sync_errors_total Sync rounds with the peer region that failed (shipping counts to it or reading its counts).
# TYPE rate_limit_region_sync_errors_total counter
rate_limit_region_sync_errors_total{peer_region="ap-northeast-1"} 0
rate_limit_region_sync_errors_total{peer_region="eu-west-1"} 0
`
	names := []string{"rate_limit_region_decisions_total", "rate_limit_region_sync_errors_total", "rate_limit_region_sync_lag_seconds"}
	if err := testutil.CollectAndCompare(r, strings.NewReader(zero), names...); err != nil {
		t.Errorf("before any observation (no lag is known yet): %v", err)
	}

	r.ObserveSync("ap-northeast-1", 150*time.Millisecond, nil)
	r.ObserveSync("eu-west-1", 2*time.Second, errors.New("i/o timeout"))
	r.ObserveSync("eu-west-1", 3*time.Second, errors.New("i/o timeout"))
	r.ObserveSync("mars", time.Second, errors.New("not a configured peer")) // not counted
	r.ObserveDecision("strict", collector.HomeRemote)
	r.ObserveDecision("strict", collector.HomeLocal)
	r.ObserveDecision("async", collector.HomeLocal)
	r.ObserveDecision("hybrid", collector.HomeRemote) // a mode not configured is counted from its first decision
	r.ObserveRTT("ap-northeast-1", 80*time.Millisecond)
	r.ObserveRTT("ap-northeast-1", 300*time.Millisecond)
	after := `
# HELP rate_limit_region_decisions_total Decisions of limits in a region mode other than local, by mode and by where they ran: home local (this region's Redis) or remote (a peer's).
# TYPE rate_limit_region_decisions_total counter
rate_limit_region_decisions_total{home="local",mode="async"} 1
rate_limit_region_decisions_total{home="local",mode="strict"} 1
rate_limit_region_decisions_total{home="remote",mode="async"} 0
rate_limit_region_decisions_total{home="remote",mode="hybrid"} 1
rate_limit_region_decisions_total{home="remote",mode="strict"} 1
# HELP rate_limit_region_sync_errors_total Sync rounds with the peer region that failed (shipping counts to it or reading its counts).
# TYPE rate_limit_region_sync_errors_total counter
rate_limit_region_sync_errors_total{peer_region="ap-northeast-1"} 0
rate_limit_region_sync_errors_total{peer_region="eu-west-1"} 2
# HELP rate_limit_region_sync_lag_seconds Age of the newest counts known from the peer region, as of the last sync round with it (async and hybrid modes).
# TYPE rate_limit_region_sync_lag_seconds gauge
rate_limit_region_sync_lag_seconds{peer_region="ap-northeast-1"} 0.15
rate_limit_region_sync_lag_seconds{peer_region="eu-west-1"} 3
`
	if err := testutil.CollectAndCompare(r, strings.NewReader(after), names...); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(r, "rate_limit_region_rtt_seconds"); n != 2 {
		t.Errorf("%d rtt histograms, want one per configured peer", n)
	}
	rtt := `
# HELP rate_limit_region_rtt_seconds Round-trip time of the decisions made on a peer region's Redis (strict and hybrid modes), failures included.
# TYPE rate_limit_region_rtt_seconds histogram
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.005"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.01"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.025"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.05"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.1"} 1
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.15"} 1
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.25"} 1
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="0.5"} 2
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="1"} 2
rate_limit_region_rtt_seconds_bucket{peer_region="ap-northeast-1",le="+Inf"} 2
rate_limit_region_rtt_seconds_sum{peer_region="ap-northeast-1"} 0.38
rate_limit_region_rtt_seconds_count{peer_region="ap-northeast-1"} 2
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.005"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.01"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.025"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.05"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.1"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.15"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.25"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="0.5"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="1"} 0
rate_limit_region_rtt_seconds_bucket{peer_region="eu-west-1",le="+Inf"} 0
rate_limit_region_rtt_seconds_sum{peer_region="eu-west-1"} 0
rate_limit_region_rtt_seconds_count{peer_region="eu-west-1"} 0
`
	if err := testutil.CollectAndCompare(r, strings.NewReader(rtt), "rate_limit_region_rtt_seconds"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(r)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

func TestRegionMetricsTakeConcurrentObservationsAndScrapes(t *testing.T) {
	r, err := collector.NewRegion(collector.RegionConfig{Peers: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				r.ObserveDecision("async", collector.HomeLocal)
				r.ObserveSync("b", time.Duration(i)*time.Millisecond, nil)
				r.ObserveRTT("b", time.Millisecond)
				if i%100 == 0 {
					testutil.CollectAndCount(r)
				}
			}
		}()
	}
	wg.Wait()
	want := `
# HELP rate_limit_region_decisions_total Decisions of limits in a region mode other than local, by mode and by where they ran: home local (this region's Redis) or remote (a peer's).
# TYPE rate_limit_region_decisions_total counter
rate_limit_region_decisions_total{home="local",mode="async"} 2000
`
	if err := testutil.CollectAndCompare(r, strings.NewReader(want), "rate_limit_region_decisions_total"); err != nil {
		t.Error(err)
	}
}

func TestRegionRefusesAPeerListedTwice(t *testing.T) {
	if _, err := collector.NewRegion(collector.RegionConfig{Peers: []string{"b", "b"}}); err == nil || !strings.Contains(err.Error(), `"b" listed twice`) {
		t.Errorf("err = %v", err)
	}
}
