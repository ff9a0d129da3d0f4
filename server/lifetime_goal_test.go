//go:build !race

package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// lifetimeStores are the stores a reservation's or lease's lifetime is held on: memory, and a
// private Redis.
var lifetimeStores = []struct {
	name string
	open func(t *testing.T) limiter.Store
}{
	{"memory", func(*testing.T) limiter.Store { return limiter.NewMemoryStore(limiter.MemoryConfig{}) }},
	{"redis", func(t *testing.T) limiter.Store {
		srv := redistest.Single(t)
		client, err := redisstore.ClientConfig{URL: srv.URL()}.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		rs, err := redisstore.New(client, redisstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}},
}

// slowSSEUpstream streams SSE chunks for d, one every 100 ms, then a usage chunk of used tokens.
func slowSSEUpstream(t *testing.T, d time.Duration, used int64) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(d); time.Now().Before(end); {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", used)
	}))
	t.Cleanup(up.Close)
	return up
}

// TestGoalAStreamLongerThanItsHoldIsChargedItsReportedCost: an SSE answer of 5 s on a class
// with hold 2s reports 5,000 tokens in its last chunk. The proxy renews the reservation while
// the answer streams, so the 5,000 are charged whatever the expiry policy (refund would have
// charged nothing, charge the estimate of 10), on memory and on Redis: the next request sees
// 100,000 − 5,000 − its own 10 remaining, and the metrics count 5,000 committed, none expired.
func TestGoalAStreamLongerThanItsHoldIsChargedItsReportedCost(t *testing.T) {
	const used, estimate, quota = 5000, 10, 100000
	for _, st := range lifetimeStores {
		for _, policy := range []limiter.ExpiryPolicy{limiter.ExpireRefund, limiter.ExpireCharge} {
			t.Run(st.name+" on_expiry "+policy.String(), func(t *testing.T) {
				t.Parallel()
				up := slowSSEUpstream(t, 5*time.Second, used)
				cl := costClass("chat", httplimit.CostFrom{JSON: "usage.total_tokens"}, estimate,
					limiter.Limit{Algorithm: limiter.FixedWindow, Rate: quota, Period: time.Hour}, "/")
				cl.Hold, cl.OnExpiry = 2*time.Second, policy
				p := startCostProxy(t, up.URL, st.open(t), cl)
				start := time.Now()
				req, _ := http.NewRequest(http.MethodGet, p.base+"/v1/stream", nil)
				req.Header.Set("X-API-Key", "k1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if took := time.Since(start); resp.StatusCode != 200 || took < 5*time.Second {
					t.Fatalf("the stream: %d after %s, want 200 after 5s", resp.StatusCode, took)
				}
				// Settled once the handler returns, which may be after the client read the end.
				committed := series("rate_limit_cost_total", "endpoint", "/", "plan_tier", "default", "phase", "committed")
				settled := series("rate_limit_cost_total", "endpoint", "/", "plan_tier", "default", "phase", "refunded")
				eventually.True(t, 5*time.Second, "the stream's reservation settled", func() bool {
					s := parseSamples(t, scrape(t, p.metrics, nil))
					return s[committed] > 0 || s[settled] > 0 || s[series("rate_limit_cost_total", "endpoint", "/", "plan_tier", "default", "phase", "expired")] > 0
				})
				req, _ = http.NewRequest(http.MethodGet, p.base+"/v1/next", nil)
				req.Header.Set("X-API-Key", "k1")
				resp, err = http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				remaining, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Remaining"), 10, 64)
				t.Logf("after a 5s stream on hold 2s (%s) reporting %d: the next request saw %d remaining", policy, used, remaining)
				if want := int64(quota - used - estimate); remaining != want {
					t.Fatalf("remaining %d after the stream, want %d (its %d charged, then the next request's estimate)", remaining, want, used)
				}
				s := parseSamples(t, scrape(t, p.metrics, nil))
				if v := s.get(t, series("rate_limit_cost_total", "endpoint", "/", "plan_tier", "default", "phase", "expired")); v != 0 {
					t.Errorf("rate_limit_cost_total{phase=expired} = %g, want 0: the reservation was renewed", v)
				}
				if v := s.get(t, series("rate_limit_cost_total", "endpoint", "/", "plan_tier", "default", "phase", "committed")); v < used {
					t.Errorf("rate_limit_cost_total{phase=committed} = %g, want the stream's %d", v, used)
				}
			})
		}
	}
}

// TestGoalARequestLongerThanItsLeaseTTLKeepsInFlightWithinTheLimit: concurrency limit 2,
// lease_ttl 1s, an upstream that holds each request 2.2 s (a 10 s lease_ttl and a 22 s request,
// scaled down tenfold), 64 clients on one key for 5.5 s: the proxy renews each lease while its request
// runs, so the upstream never sees more than 2 at once and no lease expires, on memory and Redis.
func TestGoalARequestLongerThanItsLeaseTTLKeepsInFlightWithinTheLimit(t *testing.T) {
	const clients, limit, ttl, hold, duration = 64, 2, time.Second, 2200 * time.Millisecond, 5500 * time.Millisecond
	for _, st := range lifetimeStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			up := newCountingUpstream(t, hold)
			cl := httplimit.Class{Name: "slow", Routes: []string{"/"},
				Leases: map[string]limiter.LeaseLimit{"default": {Limit: limit, TTL: ttl}}}
			p := startCostProxy(t, up.URL, st.open(t), cl)
			var admitted, refused atomic.Int64
			deadline := time.Now().Add(duration)
			var wg sync.WaitGroup
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			defer client.CloseIdleConnections()
			for range clients {
				wg.Go(func() {
					backoff := time.NewTicker(50 * time.Millisecond) // a refused client's pace
					defer backoff.Stop()
					for time.Now().Before(deadline) {
						req, _ := http.NewRequest(http.MethodGet, p.base+"/x", nil)
						req.Header.Set("X-API-Key", "one-key")
						resp, err := client.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						switch resp.StatusCode {
						case http.StatusOK:
							admitted.Add(1)
						case http.StatusTooManyRequests:
							refused.Add(1)
							<-backoff.C
						default:
							t.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
			}
			wg.Wait()
			s := parseSamples(t, scrape(t, p.metrics, nil))
			expired := s[series("rate_limit_leases_expired_total", "endpoint", "/", "plan_tier", "default")] // absent: none
			t.Logf("%s: %d clients for %s on limit %d, lease_ttl %s, requests of %s: %d admitted, %d refused, at most %d in flight at the upstream, %g leases expired",
				st.name, clients, duration, limit, ttl, hold, admitted.Load(), refused.Load(), up.max.Load(), expired)
			if m := up.max.Load(); m > limit {
				t.Fatalf("%d requests in flight at the upstream, over the limit of %d", m, limit)
			}
			if admitted.Load() < limit {
				t.Fatalf("%d admitted: the limit is not used", admitted.Load())
			}
			if expired != 0 {
				t.Fatalf("rate_limit_leases_expired_total = %g, want 0: every lease was renewed while its request ran", expired)
			}
		})
	}
}
