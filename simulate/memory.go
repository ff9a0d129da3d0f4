package simulate

import (
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// The sizes behind MemoryPerKey, read off limiter.MemoryStore's types on a
// 64-bit platform.
const (
	// slotBytes is one slot of a shard's hash table: the hash, the
	// algorithm, a key of up to inlineKeyMax bytes kept in the slot itself,
	// and the state record (four 8-byte numbers, a pointer to the sliding
	// log and the string header of a longer key) — 128 bytes.
	slotBytes = 128
	// tableShare is a key's share of the table at its fullest: slots are
	// kept at most 3/4 full, so a key takes 4/3 of a slot. Just after a
	// table doubled it is 3/8 full, so real figures range up to about twice
	// this share.
	tableShare = slotBytes * 4 / 3
	// inlineKeyMax is the longest key the slot holds itself; a longer one
	// is a string of its own on the heap.
	inlineKeyMax = 62
	// logHeaderBytes is sliding_log's ring header: a slice header (24) and
	// three 8-byte counters.
	logHeaderBytes = 48
	// logEntryBytes is one (timestamp, units) pair of the sliding log.
	logEntryBytes = 16
)

// MemoryPerKey estimates, in bytes, what limiter.MemoryStore holds for one
// key of keyLen bytes under algorithm a: the key's share of its shard's
// table of slots, each holding the state record and a key of up to 62
// bytes, plus the bytes of a longer key. Five algorithms keep only that
// record (a few numbers); sliding_log also keeps a ring of (timestamp,
// units) pairs, one per distinct admission time inside the window, which
// grows by doubling (4, 8, 16, … up to Rate pairs) and never shrinks while
// the key lives: logCapacity is that ring's length, and it is what makes
// sliding_log's memory grow with the limit. The figure leaves out the
// allocator's rounding and the Go runtime's own overhead. It is a pure
// function.
func MemoryPerKey(a limiter.Algorithm, keyLen int, logCapacity int) int64 {
	n := int64(tableShare)
	if keyLen > inlineKeyMax {
		n += int64(keyLen)
	}
	if a == limiter.SlidingLog {
		n += logHeaderBytes + logEntryBytes*int64(logCapacity)
	}
	return n
}

// logSize mirrors the memory store's sliding-log ring for one key: which
// distinct admission times it holds and how long its ring has grown.
type logSize struct {
	times    []time.Duration // distinct admission times still in the window
	capacity int
}

// admit records an admission at at, expiring entries at or before at−period
// first, as the store does, and grows the capacity as the store's ring does.
func (l *logSize) admit(at, period time.Duration, rate int64) {
	i := 0
	for i < len(l.times) && l.times[i] <= at-period {
		i++
	}
	l.times = l.times[i:]
	if n := len(l.times); n > 0 && l.times[n-1] == at {
		return // same microsecond: the store adds to the last pair
	}
	l.times = append(l.times, at)
	if size := len(l.times); size > l.capacity {
		l.capacity = max(min(2*l.capacity, int(rate)), 4, size)
	}
}
