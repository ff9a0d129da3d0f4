package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
)

func overloadConfig(t *testing.T, upstream, overload string) *config.Config {
	t.Helper()
	c, err := config.Parse("rl.yaml", []byte(fmt.Sprintf(`
server: {listen: "127.0.0.1:0", upstream: %q, overload: {%s}}
live: {enabled: false}
reload: {watch: false}
tiers: {names: [free, enterprise], default: free, header: X-Plan-Tier}
identity: {trusted_header_peers: [127.0.0.1/32]}
classes:
  default:
    priority: sheddable
    limits:
      free: {algorithm: fixed_window, rate: 100000, period: 1m}
      enterprise: {algorithm: fixed_window, rate: 100000, period: 1m, priority: critical}
`, upstream, overload)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shedCounts reads rate_limit_shed_total by "priority/reason", and the limit gauge.
func shedCounts(t *testing.T, srv *app.Built) (map[string]float64, float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(srv.OverloadMetrics()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	shed, limit := map[string]float64{}, -1.0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			switch f.GetName() {
			case "rate_limit_shed_total":
				shed[l["priority"]+"/"+l["reason"]] = m.GetCounter().GetValue()
			case "rate_limit_overload_limit":
				limit = m.GetGauge().GetValue()
			}
		}
	}
	return shed, limit
}

func TestOverloadShedsSheddableFirstAndKeepsCriticalItsShare(t *testing.T) {
	up, arrived, release := slowUpstream(t)
	// A fixed limit of 2, half of it kept for critical requests.
	srv, err := app.Build(overloadConfig(t, up.URL, "enabled: true, min_limit: 2, max_limit: 2, initial_limit: 2, critical_reserve: 0.5, retry_after: 3s"), app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	url := "http://" + srv.Addr("main") + "/slow"
	critical := map[string]string{"X-Plan-Tier": "enterprise"}
	held := make(chan *http.Response, 2)
	hold := func(hdr map[string]string) {
		go func() { held <- get(t, url, hdr) }()
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("a request admitted under the limit did not reach the upstream")
		}
	}
	shed := func(what string, hdr map[string]string, priority string) {
		t.Helper()
		resp := get(t, url, hdr)
		body := readBody(resp)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "3" ||
			!strings.Contains(body, `"overloaded"`) || !strings.Contains(body, priority) {
			t.Fatalf("%s: %d, Retry-After %q, %s; want 503 overloaded for %s with Retry-After 3", what, resp.StatusCode, resp.Header.Get("Retry-After"), body, priority)
		}
	}
	hold(nil)
	shed("a second sheddable request with the sheddable share in use", nil, "sheddable")
	hold(critical)
	shed("a critical request with the whole limit in use", critical, "critical")
	shed("a sheddable request with the whole limit in use", nil, "sheddable")
	release()
	for range 2 {
		if resp := <-held; resp.StatusCode != http.StatusOK {
			t.Fatalf("a held request ended %d, want 200", resp.StatusCode)
		}
	}
	if resp := get(t, url, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a sheddable request with nothing in flight: %d, want 200", resp.StatusCode)
	}
	counts, limit := shedCounts(t, srv)
	want := map[string]float64{"sheddable/reserved": 1, "sheddable/limit": 1, "critical/limit": 1, "critical/reserved": 0, "default/limit": 0, "default/reserved": 0}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("rate_limit_shed_total %s = %v, want %v (all: %v)", k, counts[k], v, counts)
		}
	}
	if limit != 2 {
		t.Errorf("rate_limit_overload_limit = %v, want 2", limit)
	}
}

func TestWithoutOverloadNothingIsShedAndNoSeriesExported(t *testing.T) {
	up := upstream(t)
	srv, err := app.Build(overloadConfig(t, up.URL, ""), app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	if resp := get(t, "http://"+srv.Addr("main")+"/x", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if counts, limit := shedCounts(t, srv); len(counts) != 0 || limit != -1 {
		t.Fatalf("overload off: shed %v, limit %v; want no series", counts, limit)
	}
}

func TestAReloadChangesPriorities(t *testing.T) {
	up, arrived, release := slowUpstream(t)
	cfg := overloadConfig(t, up.URL, "enabled: true, min_limit: 2, max_limit: 2, initial_limit: 2, critical_reserve: 0.5")
	srv, err := app.Build(cfg, app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	url := "http://" + srv.Addr("main") + "/slow"
	done := make(chan *http.Response, 1)
	go func() { done <- get(t, url, nil) }()
	<-arrived
	if resp := get(t, url, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("sheddable with its share in use: %d, want 503", resp.StatusCode)
	}
	next := overloadConfig(t, up.URL, "enabled: true, min_limit: 2, max_limit: 2, initial_limit: 2, critical_reserve: 0.5")
	cl := next.Classes["default"]
	cl.Priority = "critical"
	next.Classes["default"] = cl
	if err := srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	go func() { done <- get(t, url, nil) }()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("after the reload made the class critical, its request was not admitted into the reserved share")
	}
	release()
	for range 2 {
		if resp := <-done; resp.StatusCode != http.StatusOK {
			t.Fatalf("held request: %d", resp.StatusCode)
		}
	}
}

func TestServeExportsTheOverloadSeriesOnMetrics(t *testing.T) {
	up := upstream(t)
	host := strings.TrimPrefix(up.URL, "http://")
	p := startServe(t, []string{"main"}, "--config", writeConfig(t, fmt.Sprintf(`
server: {upstream: %q, overload: {enabled: true, initial_limit: 30}}
live: {enabled: false}
reload: {watch: false}
`, up.URL)))
	if resp := get(t, p.url("main", "/x"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("proxied: %d", resp.StatusCode)
	}
	if v := metric(t, p, fmt.Sprintf(`rate_limit_overload_limit{upstream=%q}`, host)); v != 30 {
		t.Errorf("rate_limit_overload_limit = %v, want the initial 30", v)
	}
	if v := metric(t, p, fmt.Sprintf(`rate_limit_shed_total{priority="critical",reason="limit",upstream=%q}`, host)); v != 0 {
		t.Errorf("rate_limit_shed_total{critical,limit} = %v, want 0 from the start", v)
	}
}
