package rls_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/rls"
)

// TestHeadersMatchThoseOfServesHTTPPath puts the same limit (3 a day,
// windows aligned on the day, named fixed_daily) behind the HTTP middleware
// and behind the gRPC service, with every header family on, and checks that
// each answer carries the same headers with the same values, allowed and
// refused.
func TestHeadersMatchThoseOfServesHTTPPath(t *testing.T) {
	hc := httplimit.HeaderConfig{Legacy: true}
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 3, Period: 24 * time.Hour, AlignWindows: true}
	families := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit",
		"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"}
	dir := writeDir(t, map[string]string{"suite.yaml": suiteConfig})
	// The headers count seconds: both paths answer within one second.
	inOneSecond(t, func() (problems []string) {
		p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
			Classes: []httplimit.Class{{Name: "fixed_daily", Routes: []string{"/"}, Limits: map[string]limiter.Limit{"default": lim}}},
			Store:   limiter.NewMemoryStore(limiter.MemoryConfig{}), Headers: hc,
		})
		if err != nil {
			t.Fatal(err)
		}
		mw, err := httplimit.New(httplimit.Config{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		web := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, func(c *rls.Config) { c.Headers = hc })
		for i := range 4 {
			rec := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1"
			web.ServeHTTP(rec, r)
			grpcHeaders := headers(h.call(t, "suite", 0, desc("fixed", "a")))
			if rec.Header().Get("X-RateLimit-Limit") != "3" || rec.Header().Get("RateLimit-Reset") == "" {
				t.Fatalf("request %d: HTTP headers %v, want every family with a limit of 3", i+1, rec.Header())
			}
			for _, name := range families {
				if got, want := grpcHeaders.Get(name), rec.Header().Get(name); got != want {
					problems = append(problems, fmt.Sprintf("request %d: %s is %q over gRPC, %q over HTTP", i+1, name, got, want))
				}
			}
			if i == 3 && (rec.Code != http.StatusTooManyRequests || !strings.Contains(grpcHeaders.Get("RateLimit"), "r=0")) {
				problems = append(problems, fmt.Sprintf("the 4th request: HTTP %d, gRPC RateLimit %q; want both refused", rec.Code, grpcHeaders.Get("RateLimit")))
			}
		}
		return problems
	})
}

func TestPolicyNamesAreQuotedAndEscapedAsStructuredFieldStrings(t *testing.T) {
	dir := writeDir(t, map[string]string{"q.yaml": `
domain: q
descriptors:
  - key: a
    rate_limit: {unit: day, requests_per_unit: 2, name: 'say "hi"'}
`})
	h := start(t, limiter.NewMemoryStore(limiter.MemoryConfig{}), dir, nil)
	got := headers(h.call(t, "q", 0, desc("a", "x"))).Get("RateLimit-Policy")
	if want := `"say \"hi\"";q=2;w=86400`; got != want {
		t.Errorf("RateLimit-Policy %s, want %s", got, want)
	}
}
