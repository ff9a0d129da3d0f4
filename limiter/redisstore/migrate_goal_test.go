//go:build !race

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

// slotKeys returns n user keys whose state lives in slot (their escaped
// form is themselves: no '%', '{' or '}').
func slotKeys(slot, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := "m" + strconv.Itoa(i)
		if redisstore.KeySlot("{"+k+"}") == slot {
			keys = append(keys, k)
		}
	}
	return keys
}

// A Redis Cluster of 3 masters, 48 callers on 200 keys of one slot (gcra
// and sliding_log, whose keys come in pairs) and on keys of other slots,
// batching on (the default): the slot is migrated to another master by
// hand, 10 keys per MIGRATE with a pause after each, so that for seconds
// its keys are split between the two masters and a batch script call
// holding keys of both sides is answered TRYAGAIN. At most 0.1 % of the
// decisions on the slot's keys made during the migration fail (a failed
// decision is one a Limiter fails open), and the source holds none of the
// slot's keys afterwards.
func TestGoalClusterSlotMigratedUnderLoadFailsAlmostNoDecisionOfItsKeys(t *testing.T) {
	cl := redistest.Cluster(t, 3)
	store := newStore(t, redisstore.ClientConfig{ClusterAddrs: cl.Addrs})
	slot := redisstore.KeySlot("{m0}")
	from := cl.OwnerAtStart(slot)
	to := (from + 1) % 3
	keys := slotKeys(slot, 200)
	others := make([]string, 200)
	for i := range others {
		others[i] = "o" + strconv.Itoa(i)
	}
	algs := []limiter.Algorithm{limiter.GCRA, limiter.SlidingLog}
	lim := func(a limiter.Algorithm) limiter.Limit {
		return limiter.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Hour}
	}
	ctx := context.Background()
	// The keys exist on the source before the migration starts.
	for _, k := range keys {
		for _, a := range algs {
			if _, err := store.DecideMode(ctx, k, lim(a), 1, limiter.ModeConsume, time.Second); err != nil {
				t.Fatalf("warm-up decision on %s: %v", k, err)
			}
		}
	}

	var migrating atomic.Bool
	var total, failed, admitted atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 48; c++ {
		wg.Go(func() {
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := algs[i%2]
				k, mine := others[(i*7)%len(others)], false
				if i%4 != 0 {
					k, mine = keys[(i*13+c)%len(keys)], true
				}
				during := migrating.Load()
				d, err := store.DecideMode(ctx, k, lim(a), 1, limiter.ModeConsume, 100*time.Millisecond)
				if !mine || !during {
					continue
				}
				total.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	migrating.Store(true)
	start := time.Now()
	err := cl.MigrateSlot(slot, to, redistest.MigrateConfig{Chunk: 10, Pause: 25 * time.Millisecond})
	took := time.Since(start)
	migrating.Store(false)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	n, f := total.Load(), failed.Load()
	t.Logf("slot %d migrated from master %d to %d in %s: %d of %d decisions on its keys failed (%.2f%%); first error: %v",
		slot, from, to, took.Round(time.Millisecond), f, n, 100*float64(f)/float64(max(n, 1)), firstErr.Load())
	if n < 1000 {
		t.Fatalf("only %d decisions on the slot's keys during the migration: no load", n)
	}
	if float64(f) > 0.001*float64(n) {
		t.Errorf("%d of %d decisions (%.2f%%) on the migrating slot's keys failed, want ≤ 0.1%%", f, n, 100*float64(f)/float64(n))
	}
	// Every key now lives on the target, with its count intact.
	if owner, err := cl.KeySlot(store.Keys(keys[0], limiter.GCRA)[0]); err != nil || owner != int64(slot) {
		t.Fatalf("KEYSLOT: %d, %v", owner, err)
	}
	left, err := cl.Nodes[from].Do("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot))
	if err != nil || left != int64(0) {
		t.Fatalf("source still holds %v keys of slot %d (%v)", left, slot, err)
	}
}
