package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// regionConfig is the config of region name whose own Redis is ownURL and
// whose peer region peer is reached at peerURL. Both regions pin tier "ta"
// to region a and tier "tb" to region b, so a test knows each strict key's
// home.
func regionConfig(name, ownURL, peer, peerURL string) string {
	return fmt.Sprintf(`
store: {type: redis, redis: {url: %q}, timeout: 150ms}
tiers: {names: [ta, tb], default: ta}
region:
  name: %s
  sync_interval: 50ms
  sync_timeout: 300ms
  peers: {%s: {url: %q}}
  tier_homes: {ta: a, tb: b}
classes:
  strict: {routes: ["POST /strict"], region_mode: strict, limits: {ta: {algorithm: fixed_window, rate: 20, period: 1h}}}
  async:  {routes: ["POST /async"], region_mode: async, limits: {ta: {algorithm: fixed_window, rate: 40, period: 1h}}}
default_class: strict
`, ownURL, name, peer, peerURL)
}

// decide asks a region's decision API about key on endpoint for tier and
// returns the answer's status ("allowed", "rejected", "fail_open" ...).
func decide(t *testing.T, c *http.Client, url, endpoint, tier, key string) string {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"endpoint":%q,"plan_tier":%q}`, key, endpoint, tier)
	code, _, got := postCheck(t, c, url, body, nil)
	var r struct{ Status string }
	if err := json.Unmarshal([]byte(got), &r); err != nil || (code != 200 && code != 429) {
		t.Fatalf("POST %s %s: status %d, body %s", url, body, code, got)
	}
	return r.Status
}

// driveBoth sends n decisions of key to each region at once, one every
// pace per region, and returns the statuses counted over both regions and
// how long it took.
func driveBoth(t *testing.T, urls [2]string, n int, pace time.Duration, endpoint, tier, key string) (map[string]int, time.Duration) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for _, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 10 * time.Second}
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for i := 0; i < n; i++ {
				s := decide(t, c, u, endpoint, tier, key)
				mu.Lock()
				got[s]++
				mu.Unlock()
				<-tick.C
			}
		}()
	}
	wg.Wait()
	return got, time.Since(start)
}

// oneWay is the latency between the two regions of startTwoRegions.
const oneWay = 20 * time.Millisecond

// twoRegions is two serve processes as regions a and b, each with its own
// redis-server, each reaching the other's through a link oneWay long.
type twoRegions struct {
	a, b       *proc
	urls       [2]string // the decision API of a, then b
	aToB, bToA *redistest.Link
}

func startTwoRegions(t *testing.T) twoRegions {
	t.Helper()
	redisA, redisB := redistest.Single(t), redistest.Single(t)
	r := twoRegions{aToB: redistest.Relay(t, redisB.Addr()), bToA: redistest.Relay(t, redisA.Addr())}
	r.aToB.SetLatency(oneWay)
	r.bToA.SetLatency(oneWay)
	r.a = startServe(t, []string{"main"}, "--config", writeConfig(t, regionConfig("a", redisA.URL(), "b", r.aToB.URL())))
	r.b = startServe(t, []string{"main"}, "--config", writeConfig(t, regionConfig("b", redisB.URL(), "a", r.bToA.URL())))
	r.urls = [2]string{r.a.url("main", "/v1/check"), r.b.url("main", "/v1/check")}
	return r
}

// waitForShipping returns once each region has received counts shipped by
// the other (its sync lag for the other is under 4 sync intervals): the
// first rounds also dial, greet and load the merge script across the link.
func (r twoRegions) waitForShipping(t *testing.T) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	for _, u := range r.urls {
		decide(t, c, u, "POST /async", "ta", "user:warm-up") // something to ship
	}
	for _, side := range []struct {
		p    *proc
		peer string
	}{{r.a, "b"}, {r.b, "a"}} {
		eventually.True(t, 10*time.Second, "counts from region "+side.peer, func() bool {
			s := parseSamples(t, scrape(t, side.p.url("main", "/metrics"), nil))
			lag, ok := s[series("rate_limit_region_sync_lag_seconds", "peer_region", side.peer)]
			return ok && lag < 0.2
		})
	}
}

func TestTheFirstStrictDecisionHomedAcrossADistantLinkIsDecidedNotFailedOpen(t *testing.T) {
	// A one-way latency of 40 ms: 80 ms a round trip, against the store's
	// 150 ms timeout. A cold first call (the dial, the client's greeting,
	// the script missing, then sent) takes several round trips.
	redisA, redisB := redistest.Single(t), redistest.Single(t)
	bToA := redistest.Relay(t, redisA.Addr())
	bToA.SetLatency(40 * time.Millisecond)
	b := startServe(t, []string{"main"}, "--config", writeConfig(t, regionConfig("b", redisB.URL(), "a", bToA.URL())))
	c := &http.Client{Timeout: 10 * time.Second}
	if got := decide(t, c, b.url("main", "/v1/check"), "POST /strict", "ta", "user:first"); got != "allowed" {
		t.Errorf("region b's first strict decision on a key homed in region a: %q, want allowed\n%s", got, b.log())
	}
}

func TestTwoRegionsShareOneStrictLimitExactlyAndAnAsyncOneAndSurviveACutLink(t *testing.T) {
	regions := startTwoRegions(t)
	procA, procB, urls, aToB := regions.a, regions.b, regions.urls, regions.aToB

	t.Run("strict: the limit is admitted exactly once over both regions, whichever region is the key's home", func(t *testing.T) {
		for _, tier := range []string{"ta", "tb"} {
			got, _ := driveBoth(t, urls, 25, time.Millisecond, "POST /strict", tier, "user:strict-"+tier)
			if got["allowed"] != 20 || got["rejected"] != 30 {
				t.Errorf("tier %s (home %s): %v over both regions, want exactly 20 allowed and 30 rejected", tier, tier[1:], got)
			}
		}
	})

	t.Run("async: both regions count against one limit (the bound is TestGoalAsync...)", func(t *testing.T) {
		regions.waitForShipping(t)
		const n, limit = 60, 40
		got, _ := driveBoth(t, urls, n, 10*time.Millisecond, "POST /async", "ta", "user:async")
		if got["allowed"] < limit || got["allowed"] >= 2*limit {
			t.Errorf("async admitted %d over both regions, want at least the limit %d and less than local mode's %d", got["allowed"], limit, 2*limit)
		}
	})

	t.Run("the region metrics are on /metrics with their labels", func(t *testing.T) {
		s := parseSamples(t, scrape(t, procA.url("main", "/metrics"), nil))
		for _, want := range []struct {
			series string
			min    float64
		}{
			{series("rate_limit_region_decisions_total", "mode", "strict", "home", "local"), 25},  // tier ta, homed here
			{series("rate_limit_region_decisions_total", "mode", "strict", "home", "remote"), 25}, // tier tb, homed in b
			{series("rate_limit_region_decisions_total", "mode", "async", "home", "local"), 60},
			{series("rate_limit_region_rtt_seconds_count", "peer_region", "b"), 25},
			{series("rate_limit_region_sync_errors_total", "peer_region", "b"), 0},
			{series("rate_limit_region_sync_lag_seconds", "peer_region", "b"), 0},
		} {
			if v := s.get(t, want.series); v < want.min {
				t.Errorf("%s = %g, want at least %g", want.series, v, want.min)
			}
		}
		rtt := s.get(t, series("rate_limit_region_rtt_seconds_sum", "peer_region", "b")) / s.get(t, series("rate_limit_region_rtt_seconds_count", "peer_region", "b"))
		if rtt < (2 * oneWay).Seconds() {
			t.Errorf("mean cross-region round trip %.3fs, below the links' two one-way latencies %s", rtt, 2*oneWay)
		}
		if lag := s.get(t, series("rate_limit_region_sync_lag_seconds", "peer_region", "b")); lag > 5 {
			t.Errorf("sync lag %gs with a healthy link", lag)
		}
	})

	t.Run("a cut link: strict keys homed there fail open with a reason, the others and async keep deciding", func(t *testing.T) {
		aToB.BlackHole()
		defer aToB.Restore()
		c := &http.Client{Timeout: 10 * time.Second}
		metrics := procA.url("main", "/metrics")
		failOpen := func() float64 {
			return parseSamples(t, scrape(t, metrics, nil)).sum("rate_limit_fail_open_total{endpoint=\"POST /strict\"")
		}
		before := failOpen()
		for i := 0; i < 8; i++ {
			if s := decide(t, c, urls[0], "POST /strict", "tb", "user:cut"); s != "fail_open" {
				t.Fatalf("decision %d of a key homed in the cut-off region: %s, want fail_open (store.fail_policy open)", i+1, s)
			}
		}
		if got := failOpen() - before; got != 8 {
			t.Errorf("rate_limit_fail_open_total for POST /strict grew by %g, want 8", got)
		}
		s := parseSamples(t, scrape(t, metrics, nil))
		reasons := 0.0
		for _, r := range []string{"timeout", "circuit_open", "error"} {
			reasons += s[series("rate_limit_fail_open_total", "endpoint", "POST /strict", "reason", r)]
		}
		if reasons < 8 {
			t.Errorf("fail-open decisions counted with a reason: %g, want 8", reasons)
		}
		// The breaker of home region b opened; this region's own did not.
		if v := s[series("rate_limit_circuit_state", "store", "redis/region/b")]; v != 2 {
			t.Errorf(`rate_limit_circuit_state{store="redis/region/b"} = %g, want 2 (open)`, v)
		}
		if v := s[series("rate_limit_circuit_state", "store", "redis")]; v != 0 {
			t.Errorf(`rate_limit_circuit_state{store="redis"} = %g, want 0 (closed)`, v)
		}
		if st := decide(t, c, urls[0], "POST /strict", "ta", "user:cut"); st != "allowed" {
			t.Errorf("a strict key homed here: %s, want allowed", st)
		}
		// Async decides on this region's Redis with b's last known counts,
		// up to the limit.
		statuses := map[string]int{}
		for i := 0; i < 45; i++ {
			statuses[decide(t, c, urls[0], "POST /async", "ta", "user:async-cut")]++
		}
		if statuses["allowed"] != 40 || statuses["rejected"] != 5 {
			t.Errorf("async with the link cut: %v, want 40 allowed then 5 rejected", statuses)
		}
		if !eventually.Within(5*time.Second, func() bool {
			return parseSamples(t, scrape(t, metrics, nil))[series("rate_limit_region_sync_errors_total", "peer_region", "b")] > 0
		}) {
			t.Errorf("no sync error counted for peer b within 5s of the cut")
		}
	})
	if t.Failed() {
		for _, p := range []*proc{procA, procB} {
			if l := p.log(); strings.Contains(l, "error") {
				t.Logf("serve log:\n%s", l)
			}
		}
	}
}
