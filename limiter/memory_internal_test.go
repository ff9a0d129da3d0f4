package limiter

import (
	"testing"
	"time"
)

// Keys whose 64-bit hashes collide are chained: each keeps its own state,
// and removing one leaves the others reachable.
func TestMemoryShardKeepsCollidingKeysApart(t *testing.T) {
	var sh memShard
	const h = 0xDEADBEEF
	keys := []string{"a", "b", "c", "d"}
	for i, k := range keys {
		e := sh.insert(gcraIndex, h, k, 0, 100)
		e.b = int64(i + 1)
	}
	if sh.n != len(keys) || len(sh.m[gcraIndex]) != 1 {
		t.Fatalf("%d entries in %d map slots, want %d chained in one", sh.n, len(sh.m[gcraIndex]), len(keys))
	}
	for i, k := range keys {
		if e := lookup(sh.m[gcraIndex], h, k); e == nil || e.b != int64(i+1) || e.key != k {
			t.Fatalf("key %q: entry %+v, want its own with b=%d", k, e, i+1)
		}
	}
	if e := lookup(sh.m[gcraIndex], h, "e"); e != nil {
		t.Fatalf("an absent key with a colliding hash found %+v", e)
	}
	if e := lookup(sh.m[tokenBucketIndex], h, "a"); e != nil {
		t.Fatalf("another algorithm's state found %+v", e)
	}
	// Remove from the middle, the head and the tail of the chain.
	for _, k := range []string{"b", "d", "a"} {
		sh.remove(sh.m[gcraIndex], h, lookup(sh.m[gcraIndex], h, k))
		if lookup(sh.m[gcraIndex], h, k) != nil {
			t.Fatalf("key %q still found after removal", k)
		}
	}
	if e := lookup(sh.m[gcraIndex], h, "c"); e == nil || e.b != 3 || sh.n != 1 {
		t.Fatalf("the remaining key: %+v, %d entries", e, sh.n)
	}
	sh.remove(sh.m[gcraIndex], h, lookup(sh.m[gcraIndex], h, "c"))
	if sh.n != 0 || len(sh.m[gcraIndex]) != 0 {
		t.Fatalf("%d entries and %d map slots left", sh.n, len(sh.m[gcraIndex]))
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
