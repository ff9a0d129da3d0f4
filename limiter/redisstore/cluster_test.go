package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/limitertest"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// awkwardKeys are user keys with braces, colons, percent signs, unicode
// and the empty key; several would collide or share a slot if they were
// written into Redis key names unescaped.
var awkwardKeys = []string{
	"", "{", "}", "{}", "}{", "{a}", "a", "%7Ba%7D", "%", "%25", "%00",
	"user:42", "user:{42}", "{user}:42", "{user}:43", "a:b:c", "::",
	"ключ", "键{値}", "🔑", "tenant{x}:user:1", "tenant{x}:user:2",
}

// TestCluster runs the conformance suite on a real 3-master Redis Cluster
// and checks how keys are spread over its slots.
func TestCluster(t *testing.T) {
	cl := redistest.Cluster(t, 3)
	store, batches := newCountingStore(t, redisstore.ClientConfig{ClusterAddrs: cl.Addrs}, redisstore.Config{})
	ctx := context.Background()

	t.Run("conformance", func(t *testing.T) {
		limitertest.Run(t, func(*testing.T) limiter.Store { return store })
	})

	t.Run("a set across slots never overshoots, and leaves each count at what it admitted", func(t *testing.T) {
		crossSlotSet(t, cl, store)
	})

	t.Run("allow-at-most from many goroutines admits exactly the quota of a key", func(t *testing.T) {
		t.Logf("units admitted: %v", limitertest.AtMostContention(t, []limiter.Store{store, store}, 16))
	})

	t.Run("reserve and commit from many goroutines settle each reservation once", func(t *testing.T) {
		for _, r := range limitertest.ReserveContention(t, []limiter.Store{store, store}, 16) {
			t.Logf("%s: %d units settled of a quota of %d (bound %d)", r.Algorithm, r.Settled, r.Quota, r.Bound)
		}
	})

	t.Run("a key's reservation records are in its slot, as Redis computes it", func(t *testing.T) {
		for _, key := range awkwardKeys {
			for _, a := range limiter.AllAlgorithms() {
				state, err := cl.KeySlot(store.Keys(key, a)[0])
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range store.ReservationKeys(key, a) {
					if s, _ := cl.KeySlot(k); s != state {
						t.Fatalf("user key %q, %s: state in slot %d but %q in slot %d", key, a, state, k, s)
					}
				}
			}
		}
	})

	t.Run("every key of one decision is in the same slot, as Redis computes it", func(t *testing.T) {
		for _, key := range awkwardKeys {
			keys := store.Keys(key, limiter.SlidingLog)
			first, err := cl.KeySlot(keys[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys[1:] {
				if s, _ := cl.KeySlot(k); s != first {
					t.Fatalf("user key %q: %q in slot %d but %q in slot %d", key, keys[0], first, k, s)
				}
			}
			for _, a := range limiter.AllAlgorithms() {
				if s, _ := cl.KeySlot(store.Keys(key, a)[0]); s != first {
					t.Fatalf("user key %q: %s state in slot %d, sliding_log in %d", key, a, s, first)
				}
			}
		}
	})

	t.Run("the store groups batches by the slot Redis computes for each key", func(t *testing.T) {
		for i, key := range append(awkwardKeys, "a", "user:1", "user:2", "x{y}z") {
			k := store.Keys(key, limiter.GCRA)[0]
			want, err := cl.KeySlot(k)
			if err != nil {
				t.Fatal(err)
			}
			if got := redisstore.KeySlot(k); int64(got) != want {
				t.Fatalf("key %d %q: slot %d, Redis says %d", i, k, got, want)
			}
		}
	})

	t.Run("concurrent decisions on many keys, batched per slot and pipelined per node, admit exactly each key's quota", func(t *testing.T) {
		const keys, quota, callers = 60, 3, 48
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		for _, a := range []limiter.Algorithm{limiter.GCRA, limiter.SlidingLog, limiter.FixedWindow} {
			lim := limiter.Limit{Algorithm: a, Rate: quota, Period: time.Hour}
			var admitted [keys]atomic.Int64
			before := batches.Batched()
			var wg sync.WaitGroup
			for g := 0; g < callers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 2*keys*quota/callers+keys/callers+1; i++ {
						k := (g*7 + i) % keys
						d, err := store.Decide(ctx, "many:"+run+":"+strconv.Itoa(k), lim, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted[k].Add(1)
						}
					}
				}()
			}
			wg.Wait()
			for k := range admitted {
				if n := admitted[k].Load(); n != quota {
					t.Errorf("%s key %d: admitted %d, want exactly %d", a, k, n, quota)
				}
			}
			if batches.Batched() == before {
				t.Errorf("%s: no decision shared a batch", a)
			}
		}
	})

	t.Run("a key's shard is the master that holds its slot", func(t *testing.T) {
		shards := map[string]bool{}
		for i, key := range append(awkwardKeys, "a", "user:1", "user:2", "x{y}z", "k3", "k4", "k5", "k6", "k7", "k8") {
			slot := redisstore.KeySlot(store.Keys(key, limiter.GCRA)[0])
			want := cl.Addrs[cl.OwnerAtStart(slot)]
			if got := store.Shard(key); got != want {
				t.Fatalf("key %d %q in slot %d: shard %q, want the master %s", i, key, slot, got, want)
			}
			shards[want] = true
		}
		if len(shards) != 3 {
			t.Fatalf("keys landed on %d shards, want the 3 masters", len(shards))
		}
	})

	t.Run("decisions on a slot that moved to another master follow the redirection", func(t *testing.T) {
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		// Keys of one slot that holds no key yet (an earlier subtest's key
		// may share a slot: the move needs an empty one), and its owner.
		var moved []string
		slot := -1
		for i := 0; len(moved) < 8 && i < 2_000_000; i++ {
			k := "moved:" + run + ":" + strconv.Itoa(i)
			s := redisstore.KeySlot(store.Keys(k, limiter.GCRA)[0])
			if slot < 0 {
				n, err := cl.Nodes[cl.OwnerAtStart(s)].Do("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(s))
				if err != nil {
					t.Fatalf("CLUSTER COUNTKEYSINSLOT %d: %v", s, err)
				}
				if n != int64(0) {
					continue
				}
				slot = s
			}
			if s == slot {
				moved = append(moved, k)
			}
		}
		if len(moved) < 8 {
			t.Fatalf("found %d keys of slot %d, want 8", len(moved), slot)
		}
		from := cl.OwnerAtStart(slot)
		// Route the slot through the store once, so its map is the old one.
		if store.Shard(moved[0]) != cl.Addrs[from] {
			t.Fatalf("shard of %q = %q before the move, want %s", moved[0], store.Shard(moved[0]), cl.Addrs[from])
		}
		if err := cl.MoveEmptySlot(slot, (from+1)%3); err != nil {
			t.Fatal(err)
		}
		lim := limiter.Limit{Algorithm: limiter.GCRA, Rate: 2, Period: time.Hour}
		var admitted [8]atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 4; i++ {
					k := (g + i) % len(moved)
					d, err := store.Decide(ctx, moved[k], lim, 1)
					if err != nil {
						t.Errorf("decision on the moved slot: %v", err)
						return
					}
					if d.Allowed {
						admitted[k].Add(1)
					}
				}
			}()
		}
		wg.Wait()
		for k := range admitted {
			if n := admitted[k].Load(); n != 2 {
				t.Errorf("key %d of the moved slot: admitted %d, want exactly 2", k, n)
			}
		}
		// The state is on the new owner.
		if n, err := cl.Nodes[(from+1)%3].Do("EXISTS", store.Keys(moved[0], limiter.GCRA)[0]); err != nil || n != int64(1) {
			t.Errorf("EXISTS on the new owner = %v, %v; want 1", n, err)
		}
	})

	t.Run("braces in a user key do not pick the slot", func(t *testing.T) {
		slots := map[int64]bool{}
		for i := 0; i < 32; i++ {
			s, err := cl.KeySlot(store.Keys(fmt.Sprintf("{tenant}:user:%d", i), limiter.GCRA)[0])
			if err != nil {
				t.Fatal(err)
			}
			slots[s] = true
		}
		if len(slots) < 8 {
			t.Fatalf("32 keys sharing the text {tenant} landed in %d slots: the user's braces chose the slot", len(slots))
		}
	})

	t.Run("decisions on the cluster keep every awkward key apart", func(t *testing.T) {
		for _, a := range []limiter.Algorithm{limiter.SlidingLog, limiter.FixedWindow, limiter.GCRA} {
			lim := limiter.Limit{Algorithm: a, Rate: 1, Period: time.Minute}
			for _, key := range awkwardKeys {
				d, err := store.Decide(ctx, key, lim, 1)
				if err != nil {
					t.Fatalf("%s key %q: %v", a, key, err)
				}
				if !d.Allowed {
					t.Fatalf("%s key %q: first request rejected: its state collides with another key's", a, key)
				}
			}
			for _, key := range awkwardKeys {
				if d, err := store.Decide(ctx, key, lim, 1); err != nil || d.Allowed {
					t.Fatalf("%s key %q: second request of a limit of 1: %+v, %v", a, key, d, err)
				}
			}
		}
	})
}

var _ limiter.ShardRefresher = (*redisstore.Store)(nil)
