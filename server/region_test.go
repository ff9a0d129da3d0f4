package server_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/region"
)

// decisionsSeen counts the region decisions by mode and home.
type decisionsSeen struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *decisionsSeen) ObserveSync(string, time.Duration, error) {}
func (d *decisionsSeen) ObserveRTT(string, time.Duration)         {}
func (d *decisionsSeen) ObserveRejectedSlots(string, int)         {}
func (d *decisionsSeen) ObserveDecision(m region.Mode, home string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[string(m)+"/"+home]++
}

func (d *decisionsSeen) get(k string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[k]
}

func TestAReloadMovesAClassBetweenRegionModesWithoutARestart(t *testing.T) {
	own, peer := redistest.Single(t), redistest.Single(t)
	conf := func(mode string) *config.Config {
		c, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
store: {type: redis, redis: {url: %q}}
region: {name: a, peers: {b: {url: %q}}, tier_homes: {default: b}}
classes: {api: {region_mode: %s, limits: {default: {algorithm: fixed_window, rate: 3, period: 1h}}}}
`, own.URL(), peer.URL(), mode)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	seen := &decisionsSeen{}
	srv, err := app.Build(conf("local"), app.Deps{Region: seen})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	h := srv.Middleware().Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	request := func(client string) int {
		r := httptest.NewRequest("GET", "/x", nil)
		r.RemoteAddr = client + ":1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	dbsize := func(s *redistest.Server) int64 {
		n, err := s.Do("DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		return n.(int64)
	}

	if code := request("192.0.2.1"); code != 200 || dbsize(peer) != 0 || seen.get("strict/remote") != 0 {
		t.Fatalf("local: status %d, %d keys on the peer, %d remote decisions; want 200 decided here", code, dbsize(peer), seen.get("strict/remote"))
	}
	if err := srv.Reload(conf("strict")); err != nil {
		t.Fatalf("reload to strict: %v", err)
	}
	for i, want := range []int{200, 200, 200, 429} {
		if code := request("192.0.2.2"); code != want {
			t.Errorf("strict request %d: status %d, want %d", i+1, code, want)
		}
	}
	if seen.get("strict/remote") != 4 || dbsize(peer) == 0 {
		t.Errorf("after the reload: %d strict decisions on the peer (home b, pinned), %d keys there; want 4 and some", seen.get("strict/remote"), dbsize(peer))
	}
	if err := srv.Reload(conf("local")); err != nil {
		t.Fatalf("reload back to local: %v", err)
	}
	if code := request("192.0.2.2"); code != 200 || seen.get("strict/remote") != 4 {
		t.Errorf("back to local: status %d (a budget of this region's own), %d remote decisions; want 200 and still 4", code, seen.get("strict/remote"))
	}
}

func TestAReloadGivingAClassARegionModeToAProcessStartedWithoutRegionsIsRejected(t *testing.T) {
	own, peer := redistest.Single(t), redistest.Single(t)
	start, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
store: {type: redis, redis: {url: %q}}
classes: {api: {limits: {default: {algorithm: fixed_window, rate: 3, period: 1h}}}}
`, own.URL())))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(start, app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	withRegions, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
store: {type: redis, redis: {url: %q}}
region: {name: a, peers: {b: {url: %q}}}
classes: {api: {region_mode: async, limits: {default: {algorithm: fixed_window, rate: 3, period: 1h}}}}
`, own.URL(), peer.URL())))
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Reload(withRegions)
	if err == nil || !strings.Contains(err.Error(), "classes.api: region_mode async") || !strings.Contains(err.Error(), "restart") {
		t.Errorf("reload error %v, want one naming classes.api, its mode and the restart it takes", err)
	}
	if _, failed := srv.ConfigMetrics().Reloads(); failed != 1 {
		t.Errorf("%d failed reloads counted, want 1", failed)
	}
}

func TestALiveChangeToAnAlgorithmTheTiersModeCannotEnforceIsLeftOut(t *testing.T) {
	own, peer := redistest.Single(t), redistest.Single(t)
	for _, hset := range [][]string{
		{"HSET", "rl:config:good:default", "max_requests", "7"},
		{"HSET", "rl:config:bad:default", "algorithm", "sliding_log", "max_requests", "9"},
	} {
		if _, err := own.Do(hset...); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
store: {type: redis, redis: {url: %q}}
region: {name: a, peers: {b: {url: %q}}}
classes:
  good: {routes: ["/good"], region_mode: async, limits: {default: {algorithm: fixed_window, rate: 3, period: 1h}}}
  bad:  {routes: ["/bad"], region_mode: async, limits: {default: {algorithm: fixed_window, rate: 3, period: 1h}}}
default_class: good
`, own.URL(), peer.URL())))
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var logMu sync.Mutex
	srv, err := app.Build(cfg, app.Deps{Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	h := srv.Middleware().Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for path, want := range map[string]string{"/good": "7", "/bad": "3"} {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != want {
			t.Errorf("%s: status %d, X-RateLimit-Limit %q; want 200 and %s", path, w.Code, w.Header().Get("X-RateLimit-Limit"), want)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "live limit left out") || !strings.Contains(logs.String(), "class bad tier default: region_mode async does not support algorithm sliding_log") {
		t.Errorf("the log does not say which live limit was left out and why:\n%s", logs.String())
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
