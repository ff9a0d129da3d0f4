package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// costProxy is serve's proxy in front of an upstream, with the collector counting decisions and
// costs and serving /metrics on the main listener; clients are keyed by X-API-Key, else address.
type costProxy struct {
	base    string
	metrics string
}

func startCostProxy(t testing.TB, upstream string, store limiter.Store, classes ...httplimit.Class) costProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	// A loaded machine's slow store call fails closed, so that it is never an admission uncharged.
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{Classes: classes, Store: store, Timeout: 2 * time.Second, FailPolicy: limiter.FailClosed,
		Identity: httplimit.IdentityConfig{APIKeyHeaders: []string{"X-API-Key"}, AllowUnknownAPIKeys: true}})
	if err != nil {
		t.Fatal(err)
	}
	col, err := collector.New(collector.Config{Endpoints: p.Endpoints(), Tiers: p.Tiers()})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: p, Recorder: col, Costs: col})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Upstream: u, Middleware: mw, MetricsHandler: col.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	base := runServer(t, srv)
	return costProxy{base: base, metrics: base + server.MetricsPath}
}

// costClass is a class of routes whose cost is read from the response, estimated at estimate.
func costClass(name string, from httplimit.CostFrom, estimate int64, lim limiter.Limit, routes ...string) httplimit.Class {
	return httplimit.Class{Name: name, Routes: routes, Limits: map[string]limiter.Limit{"default": lim},
		CostFrom: from, Estimate: httplimit.Estimate{Default: estimate}}
}

// usageUpstream reports ?used=N as the cost of its answer in each way a class can read it: the
// X-Usage-Tokens header and trailer, an OpenAI-style JSON body, or a stream of SSE events ending
// with a usage chunk.
func usageUpstream(t testing.TB) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		used := r.URL.Query().Get("used")
		switch {
		case strings.HasPrefix(r.URL.Path, "/header"):
			w.Header().Set("X-Usage-Tokens", used)
			_, _ = io.WriteString(w, "answer\n")
		case strings.HasPrefix(r.URL.Path, "/trailer"):
			w.Header().Set("Trailer", "X-Usage-Tokens")
			_, _ = io.WriteString(w, "answer\n")
			w.(http.Flusher).Flush()
			w.Header().Set("X-Usage-Tokens", used)
		case strings.HasPrefix(r.URL.Path, "/json"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"total_tokens":%s}}`, used)
		case strings.HasPrefix(r.URL.Path, "/sse"):
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				_, _ = fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"%d\"}}],\"usage\":null}\n\n", i)
				w.(http.Flusher).Flush()
			}
			_, _ = fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"total_tokens\":%s}}\n\ndata: [DONE]\n\n", used)
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// send sends one request through the proxy, GET (the direct path) or POST with a body
// (ReverseProxy), reads its answer whole and returns its status.
func send(t testing.TB, method, target string) int {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"model":"m","max_tokens":100}`)
	}
	req, _ := http.NewRequest(method, target, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Both proxy paths settle every way of reporting a cost alike, and the cost metrics say so.
func TestTheProxySettlesTheCostEachResponseReportsOnBothPaths(t *testing.T) {
	up := usageUpstream(t)
	lim := limiter.PerMinute(limiter.FixedWindow, 100000)
	p := startCostProxy(t, up.URL, limiter.NewMemoryStore(limiter.MemoryConfig{}),
		costClass("hdr", httplimit.CostFrom{Header: "X-Usage-Tokens"}, 100, lim, "/header"),
		costClass("trl", httplimit.CostFrom{Trailer: "X-Usage-Tokens"}, 100, lim, "/trailer"),
		costClass("json", httplimit.CostFrom{JSON: "usage.total_tokens"}, 100, lim, "/json"),
		costClass("sse", httplimit.CostFrom{JSON: "usage.total_tokens"}, 100, lim, "/sse"))
	for _, path := range []string{"/header", "/trailer", "/json", "/sse"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			if code := send(t, method, p.base+path+"?used=40"); code != 200 {
				t.Fatalf("%s %s: status %d", method, path, code)
			}
			if code := send(t, method, p.base+path+"?used=250"); code != 200 {
				t.Fatalf("%s %s: status %d", method, path, code)
			}
		}
		want := map[string]float64{"reserved": 400, "committed": 580, "refunded": 120, "expired": 0}
		var s samples
		eventually.True(t, 5*time.Second, path+" settled", func() bool {
			s = parseSamples(t, scrape(t, p.metrics, nil))
			return s[series("rate_limit_reservations_open", "endpoint", path, "plan_tier", "default")] == 0 &&
				s[series("rate_limit_cost_total", "endpoint", path, "phase", "committed", "plan_tier", "default")] == 580
		})
		for phase, v := range want {
			if got := s.get(t, series("rate_limit_cost_total", "endpoint", path, "phase", phase, "plan_tier", "default")); got != v {
				t.Errorf("%s: rate_limit_cost_total{phase=%q} = %v, want %v", path, phase, got, v)
			}
		}
		if got := s.get(t, series("rate_limit_cost_estimate_ratio_count", "endpoint", path, "plan_tier", "default")); got != 4 {
			t.Errorf("%s: %v estimate errors observed, want 4", path, got)
		}
		if got := s.get(t, series("rate_limit_cost_estimate_ratio_bucket", "endpoint", path, "le", "0.5", "plan_tier", "default")); got != 2 {
			t.Errorf("%s: %v observations at most 0.5 (40 of 100), want 2", path, got)
		}
		if got := s.sum("rate_limit_cost_unknown_total{endpoint=\"" + path + "\""); got != 0 {
			t.Errorf("%s: %v responses counted without a cost", path, got)
		}
	}
}

// A response without a usable cost is committed at the estimate and counted by reason; an
// upstream that never answers gets the reservation back, on both paths.
func TestUnknownCostsCommitTheEstimateAndAFailedUpstreamCancels(t *testing.T) {
	up := usageUpstream(t)
	lim := limiter.PerMinute(limiter.FixedWindow, 100000)
	p := startCostProxy(t, up.URL, limiter.NewMemoryStore(limiter.MemoryConfig{}),
		costClass("json", httplimit.CostFrom{JSON: "usage.total_tokens"}, 100, lim, "/json"))
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		send(t, method, p.base+"/json?used=-5")        // invalid
		send(t, method, p.base+"/json?used=%22ten%22") // a string: invalid
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	d := startCostProxy(t, dead, limiter.NewMemoryStore(limiter.MemoryConfig{}),
		costClass("json", httplimit.CostFrom{JSON: "usage.total_tokens"}, 100, lim, "/json"))
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		if code := send(t, method, d.base+"/json"); code != http.StatusBadGateway {
			t.Fatalf("%s to a dead upstream: status %d, want 502", method, code)
		}
	}
	eventually.True(t, 5*time.Second, "settled", func() bool {
		a := parseSamples(t, scrape(t, p.metrics, nil))
		b := parseSamples(t, scrape(t, d.metrics, nil))
		return a[series("rate_limit_reservations_open", "endpoint", "/json", "plan_tier", "default")] == 0 &&
			b[series("rate_limit_reservations_open", "endpoint", "/json", "plan_tier", "default")] == 0 &&
			a[series("rate_limit_cost_total", "endpoint", "/json", "phase", "committed", "plan_tier", "default")] == 400 &&
			a[series("rate_limit_cost_unknown_total", "endpoint", "/json", "plan_tier", "default", "reason", "invalid")] == 4 &&
			b[series("rate_limit_cost_total", "endpoint", "/json", "phase", "refunded", "plan_tier", "default")] == 200 &&
			b[series("rate_limit_cost_total", "endpoint", "/json", "phase", "committed", "plan_tier", "default")] == 0
	})
}

// Through serve's decision API: a reserving check answers a token, /v1/commit settles it once,
// and the cost metrics count both.
func TestTheDecisionAPIReservesAndCommitsThroughServe(t *testing.T) {
	lim := limiter.PerMinute(limiter.FixedWindow, 1000)
	p := startCostProxy(t, usageUpstream(t).URL, limiter.NewMemoryStore(limiter.MemoryConfig{}),
		costClass("chat", httplimit.CostFrom{JSON: "usage.total_tokens"}, 300, lim, "POST /v1/chat"))
	post := func(path, body string) (int, map[string]any) {
		resp, err := http.Post(p.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out
	}
	code, got := post(httplimit.CheckPath, `{"key":"apikey:team-a","endpoint":"POST /v1/chat","reserve":true}`)
	tok, _ := got["reservation"].(string)
	if code != 200 || tok == "" || got["remaining"] != float64(700) {
		t.Fatalf("reserving check: %d %v", code, got)
	}
	if code, got = post(httplimit.CommitPath, `{"reservation":"`+tok+`","cost":420}`); code != 200 || got["charged"] != float64(120) {
		t.Fatalf("commit: %d %v", code, got)
	}
	if code, got = post(httplimit.CommitPath, `{"reservation":"`+tok+`","cost":420}`); code != http.StatusConflict {
		t.Fatalf("second commit: %d %v, want 409", code, got)
	}
	s := parseSamples(t, scrape(t, p.metrics, nil))
	for phase, want := range map[string]float64{"reserved": 300, "committed": 420, "refunded": 0} {
		if v := s.get(t, series("rate_limit_cost_total", "endpoint", "POST /v1/chat", "phase", phase, "plan_tier", "default")); v != want {
			t.Errorf("rate_limit_cost_total{phase=%q} = %v, want %v", phase, v, want)
		}
	}
	if v := s.get(t, series("rate_limit_reservations_open", "endpoint", "POST /v1/chat", "plan_tier", "default")); v != 0 {
		t.Errorf("rate_limit_reservations_open = %v after the commit", v)
	}
}
