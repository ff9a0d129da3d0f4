package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
)

func TestEveryRequestSeesOneWholeConfigWhileReloadsRun(t *testing.T) {
	conf := func(rate int) *config.Config {
		c, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
classes:
  default:
    limits: {default: {algorithm: token_bucket, rate: %d, period: 1s, burst: %d}}
`, rate, rate)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := conf(1000), conf(2000)
	srv, err := app.Build(a, app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	h := srv.Middleware().Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	var stop atomic.Bool
	var served atomic.Int64
	var seen sync.Map
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				r := httptest.NewRequest("GET", "/x", nil)
				r.RemoteAddr = fmt.Sprintf("192.0.2.%d:1", g)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				limit, policy := w.Header().Get("X-RateLimit-Limit"), w.Header().Get("RateLimit-Policy")
				// Both headers come from one policy: the quota in RateLimit-Policy is the limit.
				if !strings.Contains(policy, "q="+limit+";") {
					t.Errorf("X-RateLimit-Limit %s with RateLimit-Policy %s: two configs in one response", limit, policy)
					return
				}
				seen.Store(limit, true)
				served.Add(1)
			}
		}()
	}
	// Each reload happens while requests are being decided.
	progress := func() {
		for n := served.Load(); served.Load() < n+4; {
			runtime.Gosched()
		}
	}
	for i := 0; i < 100; i++ {
		progress()
		c := a
		if i%2 == 0 {
			c = b
		}
		if err := srv.Reload(c); err != nil {
			t.Fatal(err)
		}
	}
	bad := conf(1000)
	bad.Classes["default"].Limits["default"] = config.Limit{Algorithm: "magic", Rate: 1, Period: 1}
	if err := srv.Reload(bad); err == nil {
		t.Error("an invalid config was applied")
	}
	stop.Store(true)
	wg.Wait()
	for _, q := range []string{"1000", "2000"} {
		if _, ok := seen.Load(q); !ok {
			t.Errorf("no request saw the limit %s", q)
		}
	}
	if ok, failed := srv.ConfigMetrics().Reloads(); ok != 100 || failed != 1 {
		t.Errorf("reloads: %d success, %d error; want 100 and 1", ok, failed)
	}
}
