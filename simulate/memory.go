package simulate

import (
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// The sizes behind MemoryPerKey, read off limiter.MemoryStore's types on a
// 64-bit platform (Go 1.26 swiss-table maps).
const (
	// entryBytes is the per-key state record: five 8-byte fields (two
	// window or bucket numbers, a previous count, a float TAT, an idle-at
	// time) and a pointer to the sliding log — 48 bytes, one allocation of
	// that size class.
	entryBytes = 48
	// mapSlotBytes is one map slot: the key (algorithm string header and
	// key string header, 2×16 bytes), the pointer to the entry (8) and a
	// control byte, divided by the 7/8 maximum load of a group:
	// (32+8+1)×8/7 ≈ 47. A map just after it grew holds half that load, so
	// real figures range up to about twice this share.
	mapSlotBytes = 47
	// logHeaderBytes is sliding_log's ring header: a slice header (24) and
	// three 8-byte counters.
	logHeaderBytes = 48
	// logEntryBytes is one (timestamp, units) pair of the sliding log.
	logEntryBytes = 16
)

// MemoryPerKey estimates, in bytes, what limiter.MemoryStore holds for one
// key of keyLen bytes under algorithm a: the state record, the key's share
// of the map and the key string itself. Five algorithms keep the same fixed
// record (a few numbers); sliding_log also keeps a ring of (timestamp, units)
// pairs, one per distinct admission time inside the window, which grows by
// doubling (4, 8, 16, … up to Rate pairs) and never shrinks while the key
// lives: logCapacity is that ring's length, and it is what makes sliding_log's
// memory grow with the limit. The figure leaves out the allocator's rounding
// and the Go runtime's own overhead. It is a pure function.
func MemoryPerKey(a limiter.Algorithm, keyLen int, logCapacity int) int64 {
	n := int64(entryBytes + mapSlotBytes + keyLen)
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
