package redisstore_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// countingReplObserver counts the unreplicated writes it is told of.
type countingReplObserver struct{ n atomic.Int64 }

func (o *countingReplObserver) ObserveUnreplicated(n int, _ error) { o.n.Add(int64(n)) }

// With durability wait, a decision is answered once the replica holds its
// write: the replica, read right after, has every admission the primary
// counted, made alone or batched. With the replica stopped, decisions are
// still answered (and counted) after the durability timeout, and every one
// of them is reported unreplicated.
const durabilityTimeout = 250 * time.Millisecond

func TestDurabilityWaitAnswersOnceAReplicaHoldsTheWrite(t *testing.T) {
	sn := redistest.SentinelWith(t, redistest.SentinelConfig{Replicas: 1})
	obs := new(countingReplObserver)
	store := redisstore.NewTestStore(t, redisstore.ClientConfig{URL: sn.Primary.URL()}, redisstore.Config{
		// Long enough for a loaded machine's replica to acknowledge in time.
		Durability: redisstore.DurabilityWait, DurabilityTimeout: durabilityTimeout, ReplicationObserver: obs,
	})
	replica := sn.Replicas[0]
	// The link being up is not enough for what follows: the replica must
	// also acknowledge writes, which it can start doing a moment later.
	eventually(t, 10*time.Second, func() string { return "the replica acknowledges no write" }, func() bool {
		if _, err := sn.Primary.Do("SET", "durability-probe", "1"); err != nil {
			return false
		}
		n, err := sn.Primary.Do("WAIT", "1", "100")
		return err == nil && n == int64(1)
	})
	ro := redisstore.NewTestStore(t, redisstore.ClientConfig{URL: replica.URL()}, redisstore.Config{Batch: redisstore.BatchConfig{Disabled: true}})
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx := context.Background()

	t.Run("alone", func(t *testing.T) {
		key := run + ":alone"
		for i := 1; i <= 20; i++ {
			if _, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, time.Second); err != nil {
				t.Fatal(err)
			}
			if got := replicaCount(t, ro, key, lim); got != int64(i) {
				t.Fatalf("after %d admissions answered, the replica counts %d", i, got)
			}
		}
	})
	t.Run("batched", func(t *testing.T) {
		const callers, each = 16, 20
		var wg sync.WaitGroup
		for c := 0; c < callers; c++ {
			wg.Go(func() {
				key := run + ":b" + strconv.Itoa(c)
				for i := 1; i <= each; i++ {
					if _, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, time.Second); err != nil {
						t.Error(err)
						return
					}
					if got := replicaCount(t, ro, key, lim); got < int64(i) {
						t.Errorf("key %s: after %d admissions answered, the replica counts %d", key, i, got)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	if n := store.Unreplicated(); n != 0 || obs.n.Load() != 0 {
		t.Fatalf("%d writes (%d observed) unreplicated with the replica up", n, obs.n.Load())
	}

	t.Run("replica stopped", func(t *testing.T) {
		replica.Freeze()
		defer replica.Thaw()
		key := run + ":frozen"
		const n = 5
		for i := 0; i < n; i++ {
			start := time.Now()
			d, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, time.Second)
			if err != nil || !d.Allowed {
				t.Fatalf("decision with the replica stopped: %+v, %v", d, err)
			}
			if took := time.Since(start); took < durabilityTimeout || took > durabilityTimeout+500*time.Millisecond {
				t.Fatalf("decision took %s with the replica stopped, want the durability timeout (%s) and little more", took, durabilityTimeout)
			}
		}
		if got := store.Unreplicated(); got != n || obs.n.Load() != n {
			t.Fatalf("%d writes unreplicated (%d observed), want %d", got, obs.n.Load(), n)
		}
	})
}

// replicaCount is what ro, a store on the replica, holds for key: the
// limit less the remaining that a peek reads.
func replicaCount(t *testing.T, ro *redisstore.Store, key string, lim limiter.Limit) int64 {
	t.Helper()
	d, err := ro.DecideMode(context.Background(), key, lim, 1, limiter.ModePeek, time.Second)
	if err != nil {
		t.Errorf("peek on the replica: %v", err)
	}
	return lim.Rate - d.Remaining
}

// A primary without a replica (a newly promoted one, before Sentinel
// points the old primary at it) has nothing to WAIT for: under durability
// wait its decisions are answered at once, alone and batched, each counted
// unreplicated, instead of each waiting out the durability timeout and
// queueing the next ones past the decision timeout.
func TestDurabilityWaitSkipsWaitOnAPrimaryWithoutReplica(t *testing.T) {
	srv := redistest.Single(t)
	obs := new(countingReplObserver)
	store := redisstore.NewTestStore(t, redisstore.ClientConfig{URL: srv.URL()}, redisstore.Config{
		Durability: redisstore.DurabilityWait, DurabilityTimeout: durabilityTimeout, ReplicationObserver: obs,
	})
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx := context.Background()
	const timeout = 100 * time.Millisecond // less than the durability timeout
	// The store learns that the primary has no replica from its first
	// exchanges; from then on nothing waits.
	eventually(t, 10*time.Second, func() string { return "decisions still wait for a replica that is not there" }, func() bool {
		start := time.Now()
		_, err := store.DecideMode(ctx, run+":learn", lim, 1, limiter.ModeConsume, time.Second)
		return err == nil && time.Since(start) < durabilityTimeout/5
	})
	before := store.Unreplicated()
	const callers, each = 8, 25
	var wg sync.WaitGroup
	var slow atomic.Int64
	for c := range callers {
		wg.Go(func() {
			key := run + ":" + strconv.Itoa(c)
			for range each {
				start := time.Now()
				d, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, timeout)
				if err != nil || !d.Allowed {
					t.Errorf("decision on a primary without replica: %+v, %v", d, err)
					return
				}
				if time.Since(start) >= durabilityTimeout {
					slow.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := slow.Load(); n > 0 {
		t.Errorf("%d decisions waited out the durability timeout on a primary without replica", n)
	}
	if got := store.Unreplicated() - before; got != callers*each {
		t.Errorf("%d writes counted unreplicated, want %d", got, callers*each)
	}
	if store.Unreplicated() != obs.n.Load() {
		t.Errorf("store counts %d unreplicated, observer told of %d", store.Unreplicated(), obs.n.Load())
	}
}

// WAIT never outlives the decision: with the replica connected but
// silent and a durability timeout longer than the decision's, the
// decision is answered within its timeout, counted unreplicated, not
// failed.
func TestDurabilityWaitIsBoundedByTheDecisionTimeout(t *testing.T) {
	sn := redistest.SentinelWith(t, redistest.SentinelConfig{Replicas: 1})
	obs := new(countingReplObserver)
	store := redisstore.NewTestStore(t, redisstore.ClientConfig{URL: sn.Primary.URL()}, redisstore.Config{
		Durability: redisstore.DurabilityWait, DurabilityTimeout: time.Second, ReplicationObserver: obs,
	})
	lim := limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	key := strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx := context.Background()
	if _, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, time.Second); err != nil {
		t.Fatal(err)
	}
	replica := sn.Replicas[0]
	replica.Freeze()
	defer replica.Thaw()
	before := store.Unreplicated()
	const n, timeout = 5, 200 * time.Millisecond
	for i := range n {
		start := time.Now()
		d, err := store.DecideMode(ctx, key, lim, 1, limiter.ModeConsume, timeout)
		if err != nil || !d.Allowed {
			t.Fatalf("decision %d with the replica stopped: %+v, %v", i, d, err)
		}
		// Redis ends a blocked WAIT on its event loop's tick (up to 100 ms
		// late): the reply may come at the deadline, not past it by more.
		if took := time.Since(start); took > timeout+100*time.Millisecond {
			t.Fatalf("decision %d took %s, past its timeout %s", i, took, timeout)
		}
	}
	if got := store.Unreplicated() - before; got != n {
		t.Fatalf("%d writes counted unreplicated, want %d", got, n)
	}
}
