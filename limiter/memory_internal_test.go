package limiter

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Keys whose 64-bit hashes collide share a probe run: each keeps its own
// state, and removing one leaves the others reachable.
func TestMemoryShardKeepsCollidingKeysApart(t *testing.T) {
	var sh memShard
	const h = 0xDEADBEEF
	long := strings.Repeat("k", inlineKeyMax+1)
	keys := []string{"a", "b", "c", "d", "", long, long[1:], long + "x"}
	for i, k := range keys {
		sh.insert(h, indexOf(GCRA), k, 0, 100).units = int64(i + 1)
	}
	if sh.n != len(keys) {
		t.Fatalf("%d entries, want %d", sh.n, len(keys))
	}
	checkControlBytes(t, &sh)
	get := func(alg algorithmIndex, k string) *memSlot {
		if i := sh.find(h, alg, k); i >= 0 {
			return sh.slot(i)
		}
		return nil
	}
	for i, k := range keys {
		if e := get(indexOf(GCRA), k); e == nil || e.units != int64(i+1) || sh.slot(sh.find(h, indexOf(GCRA), k)).keyString() != k {
			t.Fatalf("key %q: entry %+v, want its own with b=%d", k, e, i+1)
		}
	}
	if e := get(indexOf(GCRA), "e"); e != nil {
		t.Fatalf("an absent key with a colliding hash found %+v", e)
	}
	if e := get(indexOf(TokenBucket), "a"); e != nil {
		t.Fatalf("another algorithm's state found %+v", e)
	}
	for _, k := range []string{"b", "", long, "a", long + "x"} {
		sh.remove(sh.find(h, indexOf(GCRA), k))
		if get(indexOf(GCRA), k) != nil {
			t.Fatalf("key %q still found after removal", k)
		}
		checkControlBytes(t, &sh)
	}
	if e := get(indexOf(GCRA), long[1:]); e == nil || e.units != 7 {
		t.Fatalf("a remaining long key: %+v", e)
	}
	if e := get(indexOf(GCRA), "c"); e == nil || e.units != 3 || sh.n != 3 {
		t.Fatalf("a remaining key: %+v, %d entries", e, sh.n)
	}
	if e := get(indexOf(GCRA), "d"); e == nil || e.units != 4 {
		t.Fatalf("a remaining key: %+v", e)
	}
}

// checkControlBytes fails unless each slot's control byte says what the
// slot holds: 0 for an empty slot, else the byte of the slot's hash.
func checkControlBytes(t *testing.T, sh *memShard) {
	t.Helper()
	if len(sh.ctrl) != sh.size {
		t.Fatalf("%d control bytes for %d slots", len(sh.ctrl), sh.size)
	}
	for i := 0; i < sh.size; i++ {
		want := uint8(0)
		if s := sh.slot(i); s.tag != 0 {
			want = ctrlOf(s.hash)
		}
		if sh.ctrl[i] != want {
			t.Fatalf("slot %d: control byte %#x, want %#x", i, sh.ctrl[i], want)
		}
	}
}

// Random inserts, removals and sweeps, with hashes squeezed into a few
// values so that probe runs are long and wrap around the table, agree with
// a Go map at every step.
func TestMemoryShardAgreesWithAMap(t *testing.T) {
	var sh memShard
	want := map[string]int64{}
	idleAt := map[string]int64{}
	rng := rand.New(rand.NewPCG(5, 6))
	hashOf := func(k string) uint64 { return uint64(len(k)%5) * 0x9E3779B97F4A7C15 }
	for step := 0; step < 4000; step++ {
		k := strconv.Itoa(rng.IntN(300))
		if len(k) == 3 && k[0] == '1' {
			k = strings.Repeat(k, 25) // longer than a slot holds
		}
		switch op := rng.IntN(10); {
		case op < 6:
			if i := sh.find(hashOf(k), indexOf(FixedWindow), k); i >= 0 {
				sh.slot(i).units++
				want[k]++
			} else {
				if _, ok := want[k]; ok {
					t.Fatalf("step %d: key %q present in the map but not found", step, k)
				}
				e := sh.insert(hashOf(k), indexOf(FixedWindow), k, 0, 1<<30)
				e.units, e.idleAt = 1, int64(rng.IntN(100))
				want[k], idleAt[k] = 1, e.idleAt
			}
		case op < 9:
			if i := sh.find(hashOf(k), indexOf(FixedWindow), k); i >= 0 {
				sh.remove(i)
				delete(want, k)
			} else if _, ok := want[k]; ok {
				t.Fatalf("step %d: key %q present in the map but not found", step, k)
			}
		default:
			cut := int64(rng.IntN(20))
			dropped := sh.sweep(cut)
			n := 0
			for k := range want {
				i := sh.find(hashOf(k), indexOf(FixedWindow), k)
				if idle := idleAt[k] <= cut; idle != (i < 0) {
					t.Fatalf("step %d: sweep at %d: key %q idle at %d, found %v", step, cut, k, idleAt[k], i >= 0)
				}
				if i < 0 {
					delete(want, k)
					n++
				}
			}
			if n != dropped {
				t.Fatalf("step %d: sweep reported %d dropped, %d keys gone", step, dropped, n)
			}
		}
		if sh.n != len(want) {
			t.Fatalf("step %d: %d entries, the map has %d", step, sh.n, len(want))
		}
		checkControlBytes(t, &sh)
		for k, v := range want {
			i := sh.find(hashOf(k), indexOf(FixedWindow), k)
			if i < 0 || sh.slot(i).units != v {
				t.Fatalf("step %d: key %q: slot %d, want count %d", step, k, i, v)
			}
		}
	}
}

// The default clock reads the current instant: it follows the wall clock
// to well within a millisecond and never goes backwards.
func TestMemoryStoreDefaultClockFollowsTheWallClock(t *testing.T) {
	s := NewMemoryStore(MemoryConfig{})
	prev := s.nowUS()
	for i := 0; i < 1000; i++ {
		before := time.Now().UnixMicro()
		got := s.nowUS()
		after := time.Now().UnixMicro()
		if got < prev {
			t.Fatalf("clock went backwards: %d after %d", got, prev)
		}
		if got < before-1000 || got > after+1000 {
			t.Fatalf("clock read %d, wall clock between %d and %d", got, before, after)
		}
		prev = got
	}
}

func TestSlotsAndShardsAreLaidOutForTheCacheLines(t *testing.T) {
	var s memSlot
	if size := unsafe.Sizeof(s); size != 128 {
		t.Fatalf("memSlot is %d bytes; the documented memory per key assumes 128", size)
	}
	for name, off := range map[string]uintptr{
		"hash": unsafe.Offsetof(s.hash), "stamp": unsafe.Offsetof(s.stamp), "units": unsafe.Offsetof(s.units),
		"idleAt": unsafe.Offsetof(s.idleAt), "extra": unsafe.Offsetof(s.extra), "tag": unsafe.Offsetof(s.tag),
		"klen": unsafe.Offsetof(s.klen),
	} {
		if off >= 64 {
			t.Errorf("memSlot.%s at offset %d, outside the first 64 bytes", name, off)
		}
	}
	if size := unsafe.Sizeof(memShard{}); size != 128 {
		t.Errorf("memShard is %d bytes, want 128 so that shards never share a pair of cache lines", size)
	}
	if inLine := 64 - unsafe.Offsetof(s.kin); inLine < 22 {
		t.Errorf("only %d bytes of an inline key share the first cache line, want 22", inLine)
	}
}

// Shards that grow past chunkSlots take the chunks other shards gave up:
// every key keeps its own state through the growths, and a table built
// from reused chunks starts empty.
func TestTablesBuiltFromReusedChunksKeepEveryKeyApart(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := NewMemoryStore(MemoryConfig{Shards: 4, Now: func() time.Time { return now }})
	b := &memoryBinding{store: s, limit: compileLimit(PerMinute(FixedWindow, 5))}
	const keys = 20_000 // about 5,000 per shard: tables of 8,192 slots, 16 chunks
	decideAll := func(wantRemaining int64) {
		t.Helper()
		for i := range keys {
			if d, _ := b.decide(context.Background(), "client-"+strconv.Itoa(i), 1, ModeConsume, 0); d.Remaining != wantRemaining {
				t.Fatalf("key %d: remaining %d, want %d", i, d.Remaining, wantRemaining)
			}
		}
	}
	decideAll(4)
	decideAll(3)
	if s.shards[0].pool == nil || s.shards[0].size < chunkSlots {
		t.Fatalf("shard 0 has a table of %d slots; the test needs chunked tables", s.shards[0].size)
	}
	// All windows pass: a sweep empties every table and its chunks go to
	// the pool, from which the tables are built again.
	now = now.Add(2 * time.Minute)
	if n := s.Sweep(); n != keys || s.Len() != 0 {
		t.Fatalf("the sweep dropped %d keys and left %d, want %d and 0", n, s.Len(), keys)
	}
	decideAll(4)
	decideAll(3)
	for i := range s.shards {
		checkControlBytes(t, &s.shards[i])
	}
}

// slotsRead is how many slots a lookup of the key in slot i reads: those
// of its probe run, from its home to i, whose control byte matches.
func slotsRead(sh *memShard, i int) (read, run int) {
	h := sh.slot(i).hash
	for j := sh.home(h); ; j = (j + 1) & (sh.size - 1) {
		run++
		if sh.ctrl[j] == ctrlOf(h) {
			read++
		}
		if j == i {
			return read, run
		}
	}
}

// A lookup of an existing key reads its own slot and almost never another,
// whatever the length of its probe run: a slot is a cache miss when there
// are many keys, and a cache line moved from another core when cores take
// turns on the keys.
func TestALookupReadsOneSlotPerKey(t *testing.T) {
	s := NewMemoryStore(MemoryConfig{})
	b := &memoryBinding{store: s, limit: compileLimit(PerMinute(GCRA, 10))}
	const keys = 10_000
	for i := range keys {
		b.decide(context.Background(), "client-"+strconv.Itoa(i), 1, ModeConsume, 0)
	}
	read, run := 0, 0
	for k := range s.shards {
		sh := &s.shards[k]
		for i := 0; i < sh.size; i++ {
			if sh.ctrl[i] != 0 {
				r, n := slotsRead(sh, i)
				read, run = read+r, run+n
			}
		}
	}
	perKey := float64(read) / keys
	t.Logf("%d keys: %.3f slots read per lookup, over probe runs of %.3f slots", keys, perKey, float64(run)/keys)
	if perKey > 1.05 {
		t.Errorf("a lookup reads %.3f slots on average, want at most 1.05", perKey)
	}
}
