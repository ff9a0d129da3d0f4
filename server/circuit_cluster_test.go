package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// circuitSeries returns the rate_limit_circuit_state samples of in's
// /metrics, by store label.
func circuitSeries(in *instance) map[string]string {
	rec := httptest.NewRecorder()
	in.tel.Collector.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]string{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		rest, ok := strings.CutPrefix(line, `rate_limit_circuit_state{store="`)
		if !ok {
			continue
		}
		store, value, _ := strings.Cut(rest, `"} `)
		out[store] = value
	}
	return out
}

func TestTheCircuitSeriesFollowTheClusterMastersThroughAFailover(t *testing.T) {
	cl := redistest.ClusterWith(t, redistest.ClusterConfig{Replicas: 1, NodeTimeout: time.Second, PartialCoverage: true})
	in := buildInstance(t, fmt.Sprintf(`
server: {listen: "127.0.0.1:0"}
live: {enabled: false}
reload: {watch: false}
store: {type: redis, timeout: 100ms, redis: {cluster_addrs: ["%s"], cluster: {reload_interval: 200ms}}}
classes:
  default:
    limits: {default: {algorithm: fixed_window, rate: 1000, period: 1m}}
`, strings.Join(cl.Addrs, `", "`)))
	ctx := context.Background()
	decideAll := func() {
		for i := range 60 {
			in.decide(ctx, t, fmt.Sprintf("client-%d", i))
		}
	}
	// waitFor polls cond, deciding in between, until it holds.
	waitFor := func(what string, timeout time.Duration, cond func(map[string]string) bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			decideAll()
			s := circuitSeries(in)
			if cond(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s: %s; series %v", timeout, what, s)
			}
		}
	}
	waitFor("every master has a closed circuit series", 10*time.Second, func(s map[string]string) bool {
		for _, a := range cl.Addrs {
			if s["redis/"+a] != "0" {
				return false
			}
		}
		return true
	})

	const lost = 1
	dead, promoted := "redis/"+cl.Addrs[lost], "redis/"+cl.Replicas[lost][0].Addr()
	cl.KillMaster(lost)
	waitFor("the dead master's circuit opens", 10*time.Second, func(s map[string]string) bool { return s[dead] == "2" })
	if _, err := cl.WaitPromoted(lost, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor("the dead master's series is dropped and the promoted replica's is closed", 15*time.Second, func(s map[string]string) bool {
		_, stale := s[dead]
		return !stale && s[promoted] == "0"
	})
	// The store's own breaker decides nothing on a Cluster: its series
	// would say "closed" throughout.
	if v, ok := circuitSeries(in)["redis"]; ok {
		t.Errorf(`rate_limit_circuit_state{store="redis"} = %s on a Cluster; want no such series, one per master only`, v)
	}
	for i, a := range cl.Addrs {
		if i != lost {
			if v := circuitSeries(in)["redis/"+a]; v != "0" {
				t.Errorf("surviving master %s: circuit %q, want 0", a, v)
			}
		}
	}
}
