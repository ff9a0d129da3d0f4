package rlqs

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/quota/redisquota"
	"github.com/rl-exporter/rl-exporter/rlqs/filtersim"
)

// redisStore is a quota store on rds with a client of its own, as one replica's.
func redisStore(t testing.TB, rds *redistest.Server) *redisquota.Store {
	t.Helper()
	opt, err := redis.ParseURL(rds.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return redisquota.New(rdb, "rl")
}

// TestReplicasOnOneRedisDivideByAllDemand: two services on one Redis, two Envoys on each
// offering 40, 40 | 40, 200 requests/s on a bucket of 100/s: every Envoy's token bucket is its
// share of the demand of all four (12.5, 12.5, 12.5, 62.5/s), not of its replica's two.
func TestReplicasOnOneRedisDivideByAllDemand(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	rds := redistest.Single(t)
	const interval = 500 * time.Millisecond
	a := startServer(t, Config{Interval: interval, Store: redisStore(t, rds)}, rules)
	b := startServer(t, Config{Interval: interval, Store: redisStore(t, rds)}, rules)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	offers := []float64{40, 40, 40, 200}
	var cs []*filtersim.Client
	for i, o := range offers {
		addr := a.addr
		if i >= 2 {
			addr = b.addr
		}
		c := client(t, interval, addr)
		c.Offer(ctx, chat, o)
		cs = append(cs, c)
	}
	eventually.True(t, 15*time.Second, "shares 12.5, 12.5, 12.5, 62.5 across both replicas", func() bool {
		total := 0.0
		for i, c := range cs {
			r := bucketRate(c, chat)
			if want := 100 * offers[i] / 320; math.Abs(r-want) > 0.10*want {
				return false
			}
			total += r
		}
		return total <= 100
	})
	sa, sb := a.svc.Stats(), b.svc.Stats()
	if sa.Streams != 2 || sb.Streams != 2 {
		t.Errorf("streams: %d and %d, want 2 on each replica", sa.Streams, sb.Streams)
	}
	// Each replica divides on the demands of the others' last exchange, up to an interval old:
	// their sum is the limit within 5 %, not exactly.
	if got := sa.Rules["chat.name_chat"].Assigned + sb.Rules["chat.name_chat"].Assigned; math.Abs(got-100) > 5 {
		t.Errorf("both replicas assigned %.2f/s in all, want the limit 100/s within 5%%", got)
	}
}

// TestDrainHandsTheSharesToTheOtherReplicaAtOnce: a replica that drains ends its streams and
// tells Redis they are gone, so that the other replica's Envoy takes the whole limit at that
// replica's next interval, not once the drained replica's entries go stale (3 intervals).
func TestDrainHandsTheSharesToTheOtherReplicaAtOnce(t *testing.T) {
	rules, _ := loadRules(t, chatRules)
	rds := redistest.Single(t)
	a := startServer(t, Config{Interval: time.Second, Store: redisStore(t, rds)}, rules)
	b := startServer(t, Config{Interval: time.Second, Store: redisStore(t, rds)}, rules)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x, y := client(t, time.Second, a.addr), client(t, time.Second, b.addr)
	x.Offer(ctx, chat, 40)
	y.Offer(ctx, chat, 120)
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.03*want }
	// Unequal demands: the shares are 25 and 75 only once both replicas know both demands.
	eventually.True(t, 10*time.Second, "shares 25 and 75", func() bool { return near(bucketRate(x, chat), 25) && near(bucketRate(y, chat), 75) })
	// As app does: a's intervals stop, then it drains.
	a.stopRun()
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	if err := a.svc.Drain(dctx); err != nil {
		t.Fatal(err)
	}
	if n := a.svc.Stats().Streams; n != 0 {
		t.Errorf("%d streams open on a after Drain, want 0", n)
	}
	took := eventually.True(t, 3*time.Second, "y alone takes the limit", func() bool { return near(bucketRate(y, chat), 100) })
	t.Logf("y took the whole limit %s after a drained (b's interval 1s; a's entries would go stale in 3s)", took.Round(time.Millisecond))
	if took > 1500*time.Millisecond {
		t.Errorf("y took the limit %s after a drained, want within b's next interval (1s)", took)
	}
	// A stream opened on a after Drain is refused: x's filter reports to a alone, and keeps failing.
	before := x.Streams()
	eventually.True(t, 3*time.Second, "x's filter opening another stream", func() bool { return x.Streams() > before })
	if n := a.svc.Stats().Streams; n != 0 {
		t.Errorf("a stream accepted after Drain: %d open", n)
	}
}
