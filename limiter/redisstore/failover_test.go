package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// failoverPace is how often each caller of a failover run decides: 100
// callers make up to 10,000 decisions a second, which leaves a shared
// 2-core machine room for the Redis servers.
const failoverPace = 10 * time.Millisecond

// outcome is one decision made during a failover run.
type outcome struct {
	start, end time.Duration // since the kill
	group      int           // the slot owner's index at start (-1: a Sentinel run)
	err        error
}

// failoverLoad runs callers goroutines, each making one decision on a
// random key of keys every pace, until stop is closed; group maps a key to
// its slot owner. It returns every outcome, timed from the instant
// returned by the kill function, which the load calls after warmup.
type failoverLoad struct {
	store   *redisstore.Store
	keys    []string
	group   func(key string) int
	callers int
	pace    time.Duration
	timeout time.Duration
	// decide, when set, makes each decision instead of the store (a
	// Limiter on it, say); a non-nil error is a failed decision.
	decide func(ctx context.Context, key string) error
}

func (fl failoverLoad) run(warmup time.Duration, kill func() time.Time, until func(killedAt time.Time)) []outcome {
	lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 1_000_000, Period: time.Second}
	groups := make([]int, len(fl.keys))
	for i, k := range fl.keys {
		groups[i] = fl.group(k)
	}
	var (
		mu       sync.Mutex
		all      []outcome
		wg       sync.WaitGroup
		stop     = make(chan struct{})
		killedAt time.Time
		ready    = make(chan struct{})
		origin   = time.Now()
	)
	for g := 0; g < fl.callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var mine []outcome
			tick := time.NewTicker(fl.pace)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
					return
				case <-tick.C:
				}
				i := rng.IntN(len(fl.keys))
				start := time.Now()
				var err error
				if fl.decide != nil {
					err = fl.decide(context.Background(), fl.keys[i])
				} else {
					_, err = fl.store.DecideMode(context.Background(), fl.keys[i], lim, 1, limiter.ModeConsume, fl.timeout)
				}
				end := time.Now()
				mine = append(mine, outcome{start: start.Sub(origin), end: end.Sub(origin), group: groups[i], err: err})
			}
		}()
	}
	time.Sleep(warmup) // not synchronisation: traffic flows this long before the kill
	killedAt = kill()
	close(ready)
	until(killedAt)
	close(stop)
	wg.Wait()
	shift := killedAt.Sub(origin)
	for i := range all {
		all[i].start -= shift
		all[i].end -= shift
	}
	sort.Slice(all, func(i, j int) bool { return all[i].start < all[j].start })
	return all
}

// failoverStats summarises outcomes: the share of failed decisions of the
// healthy groups and of the lost one, from the kill on, and when the lost
// group's last failure ended.
type failoverStats struct {
	healthyTotal, healthyFailed int
	lostTotal, lostFailed       int
	lastLostFailure             time.Duration // since the kill; 0: none
	lastHealthyFailure          time.Duration
	kinds                       map[string]int
}

func summarise(outs []outcome, lost int) failoverStats {
	st := failoverStats{kinds: map[string]int{}}
	for _, o := range outs {
		if o.start < 0 {
			continue
		}
		if o.group == lost {
			st.lostTotal++
		} else {
			st.healthyTotal++
		}
		if o.err == nil {
			continue
		}
		st.kinds[errClass(o.err)]++
		if o.group == lost {
			st.lostFailed++
			st.lastLostFailure = max(st.lastLostFailure, o.end)
		} else {
			st.healthyFailed++
			st.lastHealthyFailure = max(st.lastHealthyFailure, o.end)
		}
	}
	return st
}

// lostBack is when the lost group's decisions came back after from (the
// promotion): the end of the last 100 ms window from then on in which
// more than half of them failed other than by a timeout, or from itself
// when none did. A stale route to a killed node fails every decision of
// its group at once (connection refused; CLUSTERDOWN while the cluster is
// down); a loaded machine times a few out here and there, or a burst,
// which this does not mistake for the outage.
func lostBack(outs []outcome, lost int, from time.Duration) time.Duration {
	const window = 100 * time.Millisecond
	n, failed := map[time.Duration]int{}, map[time.Duration]int{}
	for _, o := range outs {
		if o.group != lost || o.start < from {
			continue
		}
		w := (o.start - from) / window
		n[w]++
		if o.err != nil && limiter.ErrorKind(o.err) != "timeout" {
			failed[w]++
		}
	}
	back := from
	for w, f := range failed {
		if 2*f > n[w] {
			back = max(back, from+(w+1)*window)
		}
	}
	return back
}

// lostShareAfter is, for the lost group's decisions started at or after
// from, the share that failed other than by a timeout (what a stale route
// or a cluster still down gives: refused connections, CLUSTERDOWN, MOVED
// ...), the share that failed at all (timeouts too, which a loaded machine
// gives now and then), and how many there were.
func lostShareAfter(outs []outcome, lost int, from time.Duration) (notTimeout, all float64, n int) {
	var failed, other int
	for _, o := range outs {
		if o.group != lost || o.start < from {
			continue
		}
		n++
		if o.err != nil {
			failed++
			if limiter.ErrorKind(o.err) != "timeout" {
				other++
			}
		}
	}
	return float64(other) / float64(max(n, 1)), float64(failed) / float64(max(n, 1)), n
}

// checkBackAfter fails the test when, from from on, more than 1 % of
// group's decisions failed other than by a timeout, or more than 5 % at
// all.
func checkBackAfter(t *testing.T, outs []outcome, group int, from time.Duration, what string) {
	t.Helper()
	other, all, n := lostShareAfter(outs, group, from)
	if other > 0.01 {
		t.Errorf("%s: %.2f%% of %d decisions failed other than by a timeout, want ≤ 1%%", what, 100*other, n)
	}
	if all > 0.05 {
		t.Errorf("%s: %.2f%% of %d decisions failed, want ≤ 5%%", what, 100*all, n)
	}
}

func (st failoverStats) healthyShare() float64 {
	return float64(st.healthyFailed) / float64(max(st.healthyTotal, 1))
}

// errClass names an error for the summary: its kind and a hint of the
// cause.
func errClass(err error) string {
	s := err.Error()
	for _, hint := range []string{"CLUSTERDOWN", "connection refused", "deadline exceeded", "i/o timeout", "EOF", "connection reset", "READONLY", "MOVED", "TRYAGAIN", "closed"} {
		if strings.Contains(s, hint) {
			return limiter.ErrorKind(err) + ": " + hint
		}
	}
	return limiter.ErrorKind(err) + ": other"
}

// timeline logs, per bucket since the kill, the share of failed decisions
// of the healthy groups and of the lost one.
func timeline(t testing.TB, outs []outcome, lost int, bucket time.Duration, marks map[string]time.Duration) {
	type cell struct{ hn, hf, ln, lf int }
	cells := map[int]*cell{}
	lo, hi := 0, 0
	for _, o := range outs {
		b := int(o.start / bucket)
		if o.start < 0 {
			b--
		}
		c := cells[b]
		if c == nil {
			c = &cell{}
			cells[b] = c
		}
		lo, hi = min(lo, b), max(hi, b)
		failed := o.err != nil
		if o.group == lost {
			c.ln++
			if failed {
				c.lf++
			}
		} else {
			c.hn++
			if failed {
				c.hf++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%9s %22s %22s\n", "t-failure", "healthy failed", "lost failed")
	for i := lo; i <= hi; i++ {
		c := cells[i]
		if c == nil {
			continue
		}
		at := time.Duration(i) * bucket
		var note []string
		for name, m := range marks {
			if m >= at && m < at+bucket {
				note = append(note, name)
			}
		}
		sort.Strings(note)
		fmt.Fprintf(&b, "%9s %6d/%-6d %6.1f%% %6d/%-6d %6.1f%% %s\n", at,
			c.hf, c.hn, 100*float64(c.hf)/float64(max(c.hn, 1)),
			c.lf, c.ln, 100*float64(c.lf)/float64(max(c.ln, 1)), strings.Join(note, " "))
	}
	t.Log("\n" + b.String())
}

// clusterFailover is one run: a 3-master cluster with a replica each
// (cluster-node-timeout nodeTimeout), callers deciding on keys spread over
// every slot, master 1 killed after a warm-up; the load goes on until
// after its replica's promotion. It returns the outcomes, the lost
// group (1) and the promotion's time since the kill.
type clusterRun struct {
	outs          []outcome
	lost          int
	promotedAfter time.Duration
	stats         failoverStats
}

// via, when set, makes the decisions on the store (a Limiter on it), a
// non-nil error meaning a failed one; nil: the store decides directly.
func clusterFailover(t *testing.T, cfg redistest.ClusterConfig, store func(addrs []string) *redisstore.Store, via func(*redisstore.Store) func(context.Context, string) error, callers int, after time.Duration) clusterRun {
	t.Helper()
	cfg.Replicas = 1
	cl := redistest.ClusterWith(t, cfg)
	st := store(cl.Addrs)
	keys := make([]string, 3000)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range keys {
		keys[i] = "failover:" + run + ":" + strconv.Itoa(i)
	}
	group := func(k string) int {
		return cl.OwnerAtStart(redisstore.KeySlot(st.Keys(k, limiter.GCRA)[0]))
	}
	const lost = 1
	var promoted time.Duration
	fl := failoverLoad{store: st, keys: keys, group: group, callers: callers, pace: failoverPace, timeout: limiter.DefaultTimeout}
	if via != nil {
		fl.decide = via(st)
	}
	outs := fl.run(time.Second, func() time.Time { return cl.KillMaster(lost) }, func(killed time.Time) {
		at, err := cl.WaitPromoted(lost, 30*time.Second)
		if err != nil {
			t.Errorf("%v", err)
			return
		}
		promoted = at.Sub(killed)
		time.Sleep(after) // not synchronisation: traffic goes on this long after the switch
	})
	stats := summarise(outs, lost)
	timeline(t, outs, lost, 500*time.Millisecond, map[string]time.Duration{"<-kill": 0, "<-promoted": promoted})
	t.Logf("replica promoted %s after the kill; from the kill on: healthy masters' keys %d/%d failed (%.2f%%), last at %s; lost master's keys %d/%d failed, last at %s (%s after the promotion); errors: %v",
		promoted, stats.healthyFailed, stats.healthyTotal, 100*stats.healthyShare(), stats.lastHealthyFailure,
		stats.lostFailed, stats.lostTotal, stats.lastLostFailure, stats.lastLostFailure-promoted, stats.kinds)
	return clusterRun{outs: outs, lost: lost, promotedAfter: promoted, stats: stats}
}

// TestClusterMasterKilledWithoutBatchingFailsOnlyItsOwnSlotsForAWhile
// runs a failover with every decision its own call, under the race
// detector too, with loose bounds: decisions on the dead master's slots
// come back after the promotion, and the healthy masters' keys are not
// failed wholesale. (The goal, with batching, is checked without -race in
// TestGoalClusterMasterKilledUnderLoadFailsOnlyItsSlotsUntilThePromotion.)
func TestClusterMasterKilledWithoutBatchingFailsOnlyItsOwnSlotsForAWhile(t *testing.T) {
	callers := 100
	if raceEnabled {
		callers = 30
	}
	r := clusterFailover(t, redistest.ClusterConfig{NodeTimeout: 2 * time.Second, PartialCoverage: true}, func(addrs []string) *redisstore.Store {
		return redisstore.NewTestStore(t, redisstore.ClientConfig{ClusterAddrs: addrs}, redisstore.Config{Batch: redisstore.BatchConfig{Disabled: true}})
	}, nil, callers, 3*time.Second)
	if r.stats.lostFailed == 0 {
		t.Fatalf("no decision on the killed master's slots failed: the kill did not take effect")
	}
	if back := lostBack(r.outs, r.lost, r.promotedAfter) - r.promotedAfter; back > 2500*time.Millisecond {
		t.Errorf("decisions on the killed master's slots still failed wholesale %s after the promotion", back)
	}
	if s := r.stats.healthyShare(); s > 0.10 {
		t.Errorf("%.1f%% of the decisions on healthy masters' keys failed", 100*s)
	}
}

// sentinelRun is one Sentinel failover run: a primary with a replica
// watched by one Sentinel (down-after downAfter), callers deciding on
// many keys through a failover client, trigger (killing the primary, or
// asking for a failover) called after a warm-up; the load goes on for
// after once the Sentinel names the replica.
type sentinelRun struct {
	outs           []outcome
	switchedAfter  time.Duration // since the kill: the Sentinel names the replica
	stats          failoverStats // every key is in group 0, the lost one
	lastFailureEnd time.Duration
}

func sentinelFailover(t *testing.T, downAfter time.Duration, cfg redisstore.Config, callers int, after time.Duration, trigger func(*redistest.SentinelServers) time.Time) sentinelRun {
	t.Helper()
	sn := redistest.SentinelWith(t, redistest.SentinelConfig{Replicas: 1, DownAfter: downAfter})
	st := redisstore.NewTestStore(t, redisstore.ClientConfig{SentinelAddrs: sn.SentinelAddrs, MasterName: sn.MasterName}, cfg)
	keys := make([]string, 1000)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range keys {
		keys[i] = "sentinel-failover:" + run + ":" + strconv.Itoa(i)
	}
	var switched time.Duration
	fl := failoverLoad{store: st, keys: keys, group: func(string) int { return 0 }, callers: callers, pace: failoverPace, timeout: limiter.DefaultTimeout}
	outs := fl.run(time.Second, func() time.Time { return trigger(sn) }, func(killed time.Time) {
		at, err := sn.WaitMaster(sn.Replicas[0].Addr(), 30*time.Second)
		if err != nil {
			t.Errorf("%v", err)
			return
		}
		switched = at.Sub(killed)
		time.Sleep(after) // not synchronisation: traffic goes on this long after the switch
	})
	stats := summarise(outs, 0)
	timeline(t, outs, 0, 500*time.Millisecond, map[string]time.Duration{"<-failure": 0, "<-sentinel switched": switched})
	t.Logf("sentinel named the replica %s after the kill; from the kill on %d/%d decisions failed, the last ending %s after the kill (%s after the switch); errors: %v",
		switched, stats.lostFailed, stats.lostTotal, stats.lastLostFailure, stats.lastLostFailure-switched, stats.kinds)
	return sentinelRun{outs: outs, switchedAfter: switched, stats: stats}
}

// TestSentinelManualFailoverUnderLoadIsFollowed asks Sentinel for a
// failover while the primary is up (it becomes a replica, answering
// writes with READONLY), under the race detector too, with loose bounds:
// decisions move to the new primary. (The goal, with the primary killed,
// is checked without -race in
// TestGoalSentinelPrimaryKilledUnderLoadIsFollowedWithinSeconds.)
func TestSentinelManualFailoverUnderLoadIsFollowed(t *testing.T) {
	callers := 100
	if raceEnabled {
		callers = 30
	}
	r := sentinelFailover(t, 5*time.Second, redisstore.Config{}, callers, 2*time.Second, func(sn *redistest.SentinelServers) time.Time {
		at := time.Now()
		if err := sn.Failover(); err != nil {
			t.Fatal(err)
		}
		return at
	})
	if back := lostBack(r.outs, 0, r.switchedAfter) - r.switchedAfter; back > 3*time.Second {
		t.Errorf("decisions still failed wholesale %s after the Sentinel named the new primary", back)
	}
	// The new primary holds decisions made after the switch.
	if r.stats.lostTotal-r.stats.lostFailed == 0 {
		t.Errorf("no decision succeeded after the failover")
	}
}
