package limiter

import (
	"math"
	"strings"
	"sync"
)

// memShard is one independently locked part of a MemoryStore: an
// open-addressing hash table (linear probing, backward-shift deletion)
// whose slots hold the entries themselves, so that finding a key's state
// reads one slot rather than following a map bucket to an entry
// elsewhere on the heap. The table grows by doubling when three quarters
// full. A table of chunkSlots slots or more is made of chunks of
// chunkSlots slots, which the store's chunkPool lends: the chunks a shard
// gives up when it grows are those the next shard to grow takes, so that
// the tables' memory is reused instead of left to the garbage collector
// (which, with GOGC=100, keeps up to the live heap again in garbage).
// All methods need mu held.
type memShard struct {
	mu     sync.Mutex
	chunks [][]memSlot // the table: one slice when smaller than chunkSlots, or nil
	// first is chunks[0]: the whole table when it has at most chunkSlots
	// slots, as most have, so that finding a slot reads one pointer fewer.
	first []memSlot
	size  int        // slots in the table, a power of two, or 0
	shift uint8      // 64 − log2(size)
	n     int        // slots in use
	pool  *chunkPool // nil: chunks are allocated and left to the GC
	// Pad to 128 bytes, so that neighbouring shards never share a cache
	// line, nor a pair of lines that the processor fetches together.
	_ [40]byte
}

// chunkShift sets the size of a table chunk: 512 slots, 64 KiB.
const (
	chunkShift = 9
	chunkSlots = 1 << chunkShift
	chunkMask  = chunkSlots - 1
)

// slot returns slot i of the table.
func (sh *memShard) slot(i int) *memSlot {
	if i < len(sh.first) {
		return &sh.first[i]
	}
	return &sh.chunks[i>>chunkShift][i&chunkMask]
}

// chunkPool holds the zeroed chunks of tables that shards of one store
// gave up, for the next table any of them builds. It is safe for
// concurrent use.
type chunkPool struct {
	mu   sync.Mutex
	free [][]memSlot
}

// table returns a zeroed table of size slots (a power of two).
func (p *chunkPool) table(size int) [][]memSlot {
	if size < chunkSlots {
		return [][]memSlot{make([]memSlot, size)}
	}
	t := make([][]memSlot, size/chunkSlots)
	reused := 0
	if p != nil {
		p.mu.Lock()
		for reused < len(t) && len(p.free) > 0 {
			last := len(p.free) - 1
			t[reused], p.free[last] = p.free[last], nil
			p.free = p.free[:last]
			reused++
		}
		p.mu.Unlock()
	}
	for i := reused; i < len(t); i++ {
		t[i] = make([]memSlot, chunkSlots)
	}
	return t
}

// release takes back the chunks of a table no longer used. The pool keeps
// at most twice as many chunks as the table had (enough for the next
// shard's growth) and leaves the rest to the garbage collector, so that
// memory freed by a sweep is not held forever.
func (p *chunkPool) release(t [][]memSlot) {
	if p == nil || len(t) == 0 || len(t[0]) < chunkSlots {
		return
	}
	for _, c := range t {
		clear(c)
	}
	p.mu.Lock()
	p.free = append(p.free, t...)
	if keep := 2 * len(t); len(p.free) > keep {
		clear(p.free[keep:])
		p.free = p.free[:keep]
	}
	p.mu.Unlock()
}

// memSlot is one slot, 128 bytes, holding one key's state: the hash of
// (algorithm, key), the algorithm's index + 1 (0 marks an empty slot), the
// key itself when it is short (so that comparing it reads the slot, not a
// string elsewhere on the heap) and the state. The fields a decision on a
// key of up to 22 bytes reads and writes (hash, the state's four numbers,
// tag, key) share the slot's first 64 bytes, so that such a decision
// touches one cache line; the rest (the key's tail, a long key, the log) is
// in the second. What stamp, units, extra and log hold for each algorithm
// is in its AlgorithmSpec (memoryState, AlgorithmSpec.MemoryState).
type memSlot struct {
	hash uint64
	// stamp is a time in µs: a window's start, a bucket's last update,
	// or the bits of gcra's theoretical arrival time.
	stamp int64
	// units is a number of units: a window's count or a bucket's level.
	units int64
	// idleAt is when the state becomes equivalent to a fresh key's (µs).
	idleAt int64
	// extra is an algorithm's third number: sliding_window's previous
	// count, fixed_window's window kind (read on every decision, so it
	// is in the first cache line).
	extra int64
	tag   uint8
	klen  uint8 // length of the key in kin, or longKey
	kin   [inlineKeyMax]byte
	key   string // the key when longer than inlineKeyMax
	log   *timestampLog
}

// inlineKeyMax is the longest key kept in the slot itself; longKey marks
// a slot whose key is in memSlot.key instead.
const (
	inlineKeyMax = 62
	longKey      = 255
)

// keyIs reports whether the slot holds key.
func (s *memSlot) keyIs(key string) bool {
	if s.klen != longKey {
		return int(s.klen) == len(key) && string(s.kin[:s.klen]) == key
	}
	return s.key == key
}

// keyString returns the slot's key (allocating for an inline one).
func (s *memSlot) keyString() string {
	if s.klen != longKey {
		return string(s.kin[:s.klen])
	}
	return s.key
}

// minTableSize is the size of a shard's table when it first holds a key.
const minTableSize = 8

// home is the slot where a key with hash h starts probing (Fibonacci
// hashing, so the table uses other bits of h than the shard index).
func (sh *memShard) home(h uint64) int {
	return int((h * 0x9E3779B97F4A7C15) >> sh.shift)
}

// find returns the slot of (alg, key) with hash h, or -1.
func (sh *memShard) find(h uint64, alg algorithmIndex, key string) int {
	if sh.n == 0 {
		return -1
	}
	mask := sh.size - 1
	tag := uint8(alg) + 1
	for i := sh.home(h); ; i = (i + 1) & mask {
		s := sh.slot(i)
		if s.tag == 0 {
			return -1
		}
		if s.hash == h && s.tag == tag && s.keyIs(key) {
			return i
		}
	}
}

// add puts a new entry for (alg, key) with hash h, which must not be
// present, growing the table when needed, and returns its slot.
func (sh *memShard) add(h uint64, alg algorithmIndex, key string) int {
	if (sh.n+1)*4 > sh.size*3 {
		sh.resize(max(minTableSize, 2*sh.size), nil)
	}
	i := sh.place(h)
	s := sh.slot(i)
	*s = memSlot{hash: h, tag: uint8(alg) + 1}
	if len(key) <= inlineKeyMax {
		s.klen = uint8(copy(s.kin[:], key))
	} else {
		s.klen, s.key = longKey, strings.Clone(key)
	}
	sh.n++
	return i
}

// place returns the first empty slot on h's probe sequence.
func (sh *memShard) place(h uint64) int {
	mask := sh.size - 1
	i := sh.home(h)
	for sh.slot(i).tag != 0 {
		i = (i + 1) & mask
	}
	return i
}

// resize rebuilds the table with size slots, keeping the entries for which
// keep (when not nil) returns true.
func (sh *memShard) resize(size int, keep func(*memSlot) bool) {
	old := sh.chunks
	sh.chunks = sh.pool.table(size)
	sh.first = sh.chunks[0]
	sh.size = size
	sh.shift = uint8(64 - bitsLen(size-1))
	sh.n = 0
	for _, c := range old {
		for i := range c {
			s := &c[i]
			if s.tag == 0 || (keep != nil && !keep(s)) {
				continue
			}
			*sh.slot(sh.place(s.hash)) = *s
			sh.n++
		}
	}
	sh.pool.release(old)
}

// bitsLen is the number of bits needed to represent x.
func bitsLen(x int) int {
	n := 0
	for ; x > 0; x >>= 1 {
		n++
	}
	return n
}

// remove empties slot i, shifting back the entries after it on the same
// probe run so that every entry stays reachable from its home slot.
func (sh *memShard) remove(i int) {
	mask := sh.size - 1
	for j := (i + 1) & mask; sh.slot(j).tag != 0; j = (j + 1) & mask {
		k := sh.home(sh.slot(j).hash)
		// The entry at j stays when its home k lies cyclically in (i, j].
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		*sh.slot(i) = *sh.slot(j)
		i = j
	}
	*sh.slot(i) = memSlot{}
	sh.n--
}

// sweep drops every entry idle at now and shrinks the table to fit the
// rest; it returns how many it dropped.
func (sh *memShard) sweep(now int64) int {
	before := sh.n
	live := 0
	for _, c := range sh.chunks {
		for i := range c {
			if s := &c[i]; s.tag != 0 && s.idleAt > now {
				live++
			}
		}
	}
	if live == before {
		return 0
	}
	size := minTableSize
	for size*3 < live*4+4 {
		size *= 2
	}
	if live == 0 {
		sh.pool.release(sh.chunks)
		sh.chunks, sh.first, sh.size, sh.shift, sh.n = nil, nil, 0, 0, 0
		return before
	}
	sh.resize(size, func(e *memSlot) bool { return e.idleAt > now })
	return before - sh.n
}

// insert adds a new entry for (alg, key) with hash h and returns it. It
// first looks at a few entries after a pseudo-random slot: those idle for
// over idleGrace are dropped and, when the shard still holds max entries,
// the one that becomes idle soonest is evicted.
func (sh *memShard) insert(h uint64, alg algorithmIndex, key string, now int64, max int) *memSlot {
	if sh.n > 0 {
		sh.evict(h, now, max)
	}
	return sh.slot(sh.add(h, alg, key))
}

func (sh *memShard) evict(h uint64, now int64, max int) {
	type sampled struct {
		hash uint64
		tag  uint8
		key  string
	}
	var idle [evictionSamples]sampled
	var victim sampled
	nIdle, seen := 0, 0
	victimAt := int64(math.MaxInt64)
	mask := sh.size - 1
	start := int(h>>7) & mask
	for k := 0; k <= mask && seen < evictionSamples; k++ {
		s := sh.slot((start + k) & mask)
		if s.tag == 0 {
			continue
		}
		seen++
		if s.idleAt+idleGrace <= now {
			idle[nIdle] = sampled{s.hash, s.tag, s.keyString()}
			nIdle++
		} else if s.idleAt < victimAt {
			victim, victimAt = sampled{s.hash, s.tag, s.keyString()}, s.idleAt
		}
	}
	// Removing shifts slots, so find each sampled entry again.
	for _, x := range idle[:nIdle] {
		if i := sh.find(x.hash, algorithmIndex(x.tag-1), x.key); i >= 0 {
			sh.remove(i)
		}
	}
	if sh.n >= max && victimAt != math.MaxInt64 {
		if i := sh.find(victim.hash, algorithmIndex(victim.tag-1), victim.key); i >= 0 {
			sh.remove(i)
		}
	}
}
