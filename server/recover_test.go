package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// A panic while serving is answered, never an empty reply: a 500 JSON answer, or on /v1/auth
// the refusal a gateway passes on (reason internal), logged once with its stack and counted.
func TestAPanicOnAnyListenerIsAnsweredLoggedOnceAndCounted(t *testing.T) {
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []httplimit.Class{{Name: "default", Limits: map[string]limiter.Limit{
			"default": limiter.PerSecond(limiter.GCRA, 1_000_000),
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The cost of a request to /boom panics, in the proxy's middleware and in /v1/auth alike.
	mw, err := httplimit.New(httplimit.Config{Policy: p, Cost: func(r *http.Request) int64 {
		if r.URL.Path == "/boom" {
			panic("boom: a bug in the cost function")
		}
		return 1
	}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	boom := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom: a bug in an admin handler") })
	srv := startServer(t, server.Config{
		Middleware: mw, Upstream: readingUpstream(t, 0), Logger: slog.New(slog.NewTextHandler(logs, nil)),
		MetricsListen: "127.0.0.1:0", MetricsHandler: boom,
		AdminListen: "127.0.0.1:0", AdminHandlers: map[string]http.Handler{"/debug/boom": boom},
	})
	do := func(listener, path string, hdr map[string]string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+srv.Addr(listener)+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v (an empty reply?)", listener, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, c := range []struct{ listener, path string }{{"main", "/boom"}, {"metrics", "/metrics"}, {"admin", "/debug/boom"}} {
		code, hdr, body := do(c.listener, c.path, nil)
		var e struct{ Error string }
		if code != http.StatusInternalServerError || hdr.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &e) != nil || e.Error != "internal" {
			t.Errorf("%s %s: %d %s %q, want a 500 JSON answer with error internal", c.listener, c.path, code, hdr.Get("Content-Type"), body)
		}
	}
	code, _, body := do("main", "/v1/auth", map[string]string{"X-Original-URI": "/boom", httplimit.DenyStatusHeader: "403"})
	if code != http.StatusForbidden || !strings.Contains(body, `"error":"internal"`) {
		t.Errorf("/v1/auth on a panic: %d %q, want 403 with error internal", code, body)
	}
	if got := serverMetric(t, srv, "rate_limit_auth_denied_total", "reason", "internal"); got != 1 {
		t.Errorf(`rate_limit_auth_denied_total{reason="internal"} %g, want 1`, got)
	}
	for listener, want := range map[string]float64{"main": 2, "metrics": 1, "admin": 1} {
		if got := serverMetric(t, srv, "rl_exporter_panics_total", "listener", listener); got != want {
			t.Errorf("rl_exporter_panics_total{listener=%q} %g, want %g", listener, got, want)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "panic serving a request"); n != 4 {
		t.Errorf("%d panic lines logged, want 4 (one per panic):\n%s", n, out)
	}
	if !strings.Contains(out, "goroutine ") || !strings.Contains(out, "recover_test.go") {
		t.Errorf("the panic lines hold no stack:\n%s", out)
	}
}
