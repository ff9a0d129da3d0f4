//go:build !race

package server_test

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// The concurrency goal: two serve replicas on one Redis, limit 5 on one
// key, 64 clients on that key against an upstream that holds each request
// 200 ms: the upstream never sees more than 5 at once. Then a replica
// holding 5 leases is SIGKILLed: its leases block the key until their
// lease_ttl (2 s), then the other replica admits again and counts them in
// rate_limit_leases_expired_total.
func TestGoalConcurrencyLeasesHoldAcrossReplicasAndOutliveNoCrashedReplica(t *testing.T) {
	rdb := redistest.Single(t)
	up := newCountingUpstream(t, 200*time.Millisecond)
	cfg := leaseConfigFile(t, "5")
	a := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL, "--redis-url", rdb.URL())
	b := startServe(t, []string{"main"}, "--config", cfg, "--upstream", up.URL, "--redis-url", rdb.URL())

	const clients, duration = 64, 3 * time.Second
	var admitted, refused atomic.Int64
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	for i := range clients {
		p, method := a, "GET"
		if i%2 == 1 {
			p = b
		}
		if i%4 >= 2 {
			method = "POST"
		}
		wg.Go(func() {
			backoff := time.NewTicker(20 * time.Millisecond) // a refused client's pace
			defer backoff.Stop()
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest(method, p.url("main", "/x"), strings.NewReader("body"))
				if method == "GET" {
					req.Body, req.ContentLength = nil, 0
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					admitted.Add(1)
				case 429:
					refused.Add(1)
					if resp.Header.Get("Retry-After") != "1" {
						t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
						return
					}
					<-backoff.C
				default:
					t.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d clients for %s: %d admitted, %d refused, at most %d in flight at the upstream", clients, duration, admitted.Load(), refused.Load(), up.max.Load())
	if m := up.max.Load(); m > 5 {
		t.Fatalf("%d requests in flight at the upstream, over the limit of 5", m)
	}
	// 5 slots × 3 s / 200 ms is 75 requests at most; the limit must be used, not starved.
	if up.max.Load() != 5 || admitted.Load() < 40 {
		t.Fatalf("the limit is not used: at most %d in flight, %d admitted", up.max.Load(), admitted.Load())
	}

	// Replica a takes all 5 leases and dies holding them.
	for range 5 {
		go func() {
			if resp, err := http.Get(a.url("main", "/hold")); err == nil {
				resp.Body.Close()
			}
		}()
	}
	eventually.True(t, 5*time.Second, "5 requests held at the upstream through a", func() bool { return up.inFlight.Load() == 5 })
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.done
	if s := statusOf(t, "GET", b.url("main", "/now")); s != http.StatusTooManyRequests {
		t.Fatalf("right after the kill: %d, want 429 (the dead replica's leases hold the key)", s)
	}
	freed := eventually.True(t, 5*time.Second, "the key admits again once the dead replica's leases expire", func() bool {
		return statusOf(t, "GET", b.url("main", "/now")) == http.StatusOK
	})
	took := time.Since(killed)
	t.Logf("the key admitted again %s after the SIGKILL (lease_ttl 2s; polled for %s)", took.Round(time.Millisecond), freed.Round(time.Millisecond))
	if took > 2*time.Second+250*time.Millisecond {
		t.Fatalf("the dead replica's leases were freed %s after the kill, want within lease_ttl (2s)", took)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("the key admitted %s after the kill, before the leases' TTL: were they the dead replica's?", took)
	}
	// The dead replica took its leases over a few ms, and each expires its TTL after it was
	// taken; a lease call sweeps those then past it, so the call that first admitted again may
	// have found only some expired, and a later call finds the rest.
	expired := series("rate_limit_leases_expired_total", "endpoint", "/", "plan_tier", "default")
	var s samples
	eventually.Within(2*time.Second, func() bool {
		statusOf(t, "GET", b.url("main", "/now"))
		s = parseSamples(t, scrape(t, b.url("main", "/metrics"), nil))
		return s.get(t, expired) >= 5
	})
	if v := s.get(t, expired); v != 5 {
		t.Fatalf("rate_limit_leases_expired_total = %g on the surviving replica, want the dead one's 5", v)
	}
	if v := s.get(t, series("rate_limit_in_flight", "endpoint", "/", "plan_tier", "default")); v != 0 {
		t.Fatalf("rate_limit_in_flight = %g on the surviving replica, want 0", v)
	}
}
