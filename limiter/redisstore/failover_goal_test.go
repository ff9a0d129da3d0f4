//go:build !race

package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// failoverMargin is how much later than its deadline a decision may end
// during a failover run: enough for a loaded machine's scheduling stalls
// (up to ~0.8 s seen with a load average of 18 on 2 cores), far less than
// a dial timeout or a wait on a dead node.
const failoverMargin = time.Second

// A Redis Cluster of 3 masters with a replica each (cluster-node-timeout
// 2 s, cluster-require-full-coverage no), 100 callers on keys spread over
// every slot, one master SIGKILLed: decisions on the healthy masters' keys
// keep succeeding (≤ 1 % fail), those on the dead master's slots are back
// within 2 s of its replica's promotion, and no decision outlives its
// deadline.
func TestGoalClusterMasterKilledUnderLoadFailsOnlyItsSlotsUntilThePromotion(t *testing.T) {
	r := clusterFailover(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second, PartialCoverage: true}, func(addrs []string) *redisstore.Store {
		return newStore(t, redisstore.ClientConfig{ClusterAddrs: addrs})
	}, nil, 100, 4*time.Second)
	if r.stats.lostFailed == 0 {
		t.Fatalf("no decision on the killed master's slots failed: the kill did not take effect")
	}
	if s := r.stats.healthyShare(); s > 0.01 {
		t.Errorf("%.2f%% of the decisions on healthy masters' keys failed (%d of %d), want ≤ 1%%", 100*s, r.stats.healthyFailed, r.stats.healthyTotal)
	}
	back := lostBack(r.outs, r.lost, r.promotedAfter) - r.promotedAfter
	t.Logf("decisions on the killed master's slots back %s after the promotion", back)
	if back > 2*time.Second {
		t.Errorf("decisions on the killed master's slots failed wholesale until %s after its replica's promotion, want ≤ 2s", back)
	}
	checkBackAfter(t, r.outs, r.lost, r.promotedAfter+2*time.Second, "from 2s after the promotion on, on the killed master's slots")
	checkDeadlines(t, r.outs)
}

// The same with cluster-require-full-coverage yes (the Redis default):
// from the moment the masters agree the dead one failed until its replica
// is promoted, every master answers CLUSTERDOWN, which no client can
// avoid; the healthy masters' keys are back within 2 s of the promotion
// all the same, and no decision outlives its deadline.
func TestGoalClusterWithFullCoverageRecoversEveryMasterWithinSecondsOfThePromotion(t *testing.T) {
	r := clusterFailover(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second}, func(addrs []string) *redisstore.Store {
		return newStore(t, redisstore.ClientConfig{ClusterAddrs: addrs})
	}, nil, 100, 4*time.Second)
	for g := 0; g < 3; g++ {
		back := lostBack(r.outs, g, r.promotedAfter) - r.promotedAfter
		t.Logf("master %d's keys back %s after the promotion", g, back)
		if back > 2*time.Second {
			t.Errorf("master %d's keys failed wholesale until %s after the promotion, want ≤ 2s", g, back)
		}
		checkBackAfter(t, r.outs, g, r.promotedAfter+2*time.Second, "from 2s after the promotion on, on master "+strconv.Itoa(g)+"'s keys")
	}
	checkDeadlines(t, r.outs)
}

// A primary with a replica watched by Sentinel (down-after 1 s), 100
// callers through a failover client, the primary SIGKILLed: decisions are
// back within 2 s of the Sentinel naming the replica (go-redis asks the
// Sentinel on every new connection, and re-dials a pool whose dials all
// failed once a second), and no decision outlives its deadline.
func TestGoalSentinelPrimaryKilledUnderLoadIsFollowedWithinSeconds(t *testing.T) {
	r := sentinelFailover(t, time.Second, redisstore.Config{}, 100, 3*time.Second, (*redistest.SentinelServers).KillPrimary)
	if r.stats.lostFailed == 0 {
		t.Fatalf("no decision failed: the kill did not take effect")
	}
	back := lostBack(r.outs, 0, r.switchedAfter) - r.switchedAfter
	t.Logf("decisions back %s after the Sentinel named the new primary", back)
	if back > 2*time.Second {
		t.Errorf("decisions failed wholesale until %s after the Sentinel named the new primary, want ≤ 2s", back)
	}
	checkBackAfter(t, r.outs, 0, r.switchedAfter+2*time.Second, "from 2s after the switch on")
	checkDeadlines(t, r.outs)
}

// checkDeadlines fails the test when a decision took longer than the
// limiter's deadline plus failoverMargin.
func checkDeadlines(t *testing.T, outs []outcome) {
	t.Helper()
	late := 0
	var worst time.Duration
	for _, o := range outs {
		if d := o.end - o.start; d > limiter.DefaultTimeout+failoverMargin {
			late++
			worst = max(worst, d)
		}
	}
	if late > 0 {
		t.Errorf("%d decisions took longer than the %s deadline (+%s), the slowest %s", late, limiter.DefaultTimeout, failoverMargin, worst)
	}
}
