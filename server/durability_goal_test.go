//go:build !race

package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// A timing goal (the replica must acknowledge within the durability
// timeout), so it runs in the non-race step. With store.redis.durability wait, a decision whose write no replica
// acknowledged in time is counted in
// rate_limit_redis_unreplicated_writes_total on /metrics: the series is 0
// while the replica answers, and rises by one per decision once it stops,
// the decisions still answered.
func TestGoalUnreplicatedWritesAreCountedOnMetricsWhileTheReplicaIsStopped(t *testing.T) {
	sn := redistest.SentinelWith(t, redistest.SentinelConfig{Replicas: 1})
	in := buildInstance(t, fmt.Sprintf(`
live: {enabled: false}
reload: {watch: false}
store: {type: redis, timeout: 1s, fail_policy: closed, redis: {url: %q, durability: wait, durability_timeout: 250ms}}
classes:
  default:
    limits: {default: {algorithm: fixed_window, rate: 1000000, period: 1h}}
`, sn.Primary.URL()))
	const name = "rate_limit_redis_unreplicated_writes_total"
	if !in.hasSeries(t, name) {
		t.Fatalf("%s is missing from /metrics", name)
	}
	ctx := context.Background()
	decide := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if a, code := in.decide(ctx, t, "k"); code != http.StatusOK || a.Status != "allowed" {
				t.Fatalf("decision %d: status %d %q, want 200 allowed", i, code, a.Status)
			}
		}
	}

	// The link being up is not enough: the replica must also acknowledge
	// writes, which it can start doing a moment later.
	if !eventually.Within(10*time.Second, func() bool {
		if _, err := sn.Primary.Do("SET", "durability-probe", "1"); err != nil {
			return false
		}
		n, err := sn.Primary.Do("WAIT", "1", "250")
		return err == nil && n == int64(1)
	}) {
		t.Fatal("the replica acknowledges no write")
	}
	decide(20)
	if got := in.metric(t, name, `store="redis"`); got != 0 {
		t.Fatalf("%s = %v with the replica up, want 0", name, got)
	}

	replica := sn.Replicas[0]
	replica.Freeze()
	defer replica.Thaw()
	const stopped = 5
	start := time.Now()
	decide(stopped)
	if took := time.Since(start); took < stopped*250*time.Millisecond {
		t.Fatalf("%d decisions took %s with the replica stopped: they did not wait for it", stopped, took)
	}
	if got := in.metric(t, name, `store="redis"`); got != stopped {
		t.Fatalf("%s = %v after %d decisions with the replica stopped, want %d", name, got, stopped, stopped)
	}
}
