package limiter

import (
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
//
// Two kinds of lock guard a shard:
//
//   - mu guards its structure: which key is in which slot, n, and the
//     table itself. Adding, moving, removing a key, and replacing the
//     table, need it. The methods of memShard need it held.
//   - each slot's lock (a bit of its meta) guards the slot's state and
//     its key. A decision holds it while it decides; whoever moves or
//     empties a slot that holds a key also takes it first, and a slot
//     left behind in a replaced table is marked dead and stays locked.
//
// A decision on a key the shard holds (lockKey) finds it without mu,
// reading only each probed slot's hash and meta (atomically), and locks
// its slot: it writes no cache line but the slot's own, so that deciding
// on unrelated keys of one shard from several CPUs does not move the
// shard's line between them. When it cannot be sure (the key is absent,
// its slot locked or dead, the table replaced meanwhile), it takes mu and
// looks again. Nobody waits for a slot's lock while a decision holds it
// for anything but the slot, so the two kinds cannot deadlock: a
// decision holds one slot and waits for nothing; mu's holder waits only
// for slots.
type memShard struct {
	mu sync.Mutex
	// table is nil until the shard holds a key. It is replaced, under mu,
	// when it grows or a sweep shrinks it; a table never changes size.
	table atomic.Pointer[memTable]
	n     int        // slots in use
	pool  *chunkPool // nil: chunks are allocated and left to the GC
	// Pad to 128 bytes, so that neighbouring shards never share a cache
	// line, nor a pair of lines that the processor fetches together.
	_ [96]byte
}

// memTable is a shard's table: size slots, a power of two, in chunks of
// at most chunkSlots. It does not change once published.
type memTable struct {
	chunks [][]memSlot
	size   int
	shift  uint8 // 64 − log2(size)
}

// chunkShift sets the size of a table chunk: 512 slots, 64 KiB.
const (
	chunkShift = 9
	chunkSlots = 1 << chunkShift
	chunkMask  = chunkSlots - 1
)

// slot returns slot i of the table.
func (t *memTable) slot(i int) *memSlot {
	return &t.chunks[i>>chunkShift][i&chunkMask]
}

// home is the slot where a key with hash h starts probing (Fibonacci
// hashing, so the table uses other bits of h than the shard index).
func (t *memTable) home(h uint64) int {
	return int((h * 0x9E3779B97F4A7C15) >> t.shift)
}

// slot returns slot i of the shard's table.
func (sh *memShard) slot(i int) *memSlot { return sh.table.Load().slot(i) }

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

// release takes back the chunks of a table no longer used, every slot of
// which is empty or dead (so that no decision reads or writes it, though
// one that looked the key up in the old table may still read its hash and
// meta). The pool keeps
// at most twice as many chunks as the table had (enough for the next
// shard's growth) and leaves the rest to the garbage collector, so that
// memory freed by a sweep is not held forever.
func (p *chunkPool) release(t [][]memSlot) {
	if p == nil || len(t) == 0 || len(t[0]) < chunkSlots {
		return
	}
	for _, c := range t {
		for i := range c {
			c[i].clear()
		}
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
// (algorithm, key), its meta (the algorithm's index + 1, 0 marking an
// empty slot; the key's length; the slot's lock), the key itself when it
// is short (so that comparing it reads the slot, not a string elsewhere
// on the heap) and the state. The fields a decision on a key of up to 20
// bytes reads and writes (hash, the state's four numbers, meta, key)
// share the slot's first 64 bytes, so that such a decision touches one
// cache line; the rest (the key's tail, a long key, the log) is in the
// second. What stamp, units, extra and log hold for each algorithm is in
// its AlgorithmSpec (memoryState, AlgorithmSpec.MemoryState).
//
// hash and meta are read without any lock (by lockKey) and so are only
// read and written atomically, but for reads under the shard's lock,
// which only the shard's lock holder writes. The rest is read and written
// only under the slot's lock, or, for a slot without a key, the shard's.
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
	meta  uint32 // metaTag | klen<<metaKlenShift | slotLocked | slotDead
	kin   [inlineKeyMax]byte
	key   string // the key when longer than inlineKeyMax
	log   *timestampLog
}

// The bits of memSlot.meta.
const (
	// metaTag is the algorithm's index + 1; 0: the slot is empty.
	metaTag = 0xFF
	// The key's length in kin, or longKey, is in the next 8 bits.
	metaKlenShift = 8
	// slotLocked: someone holds the slot's lock.
	slotLocked = 1 << 16
	// slotDead: the slot belongs to a replaced table; its key, if any, is
	// in the new one. A dead slot stays locked.
	slotDead = 1 << 17
)

// inlineKeyMax is the longest key kept in the slot itself; longKey marks
// a slot whose key is in memSlot.key instead.
const (
	inlineKeyMax = 60
	longKey      = 255
)

// keyIs reports whether the slot, whose meta is m, holds key.
func (s *memSlot) keyIs(key string, m uint32) bool {
	if klen := uint8(m >> metaKlenShift); klen != longKey {
		return int(klen) == len(key) && string(s.kin[:klen]) == key
	}
	return s.key == key
}

// keyString returns the key of the slot, whose meta is m (allocating for
// an inline one).
func (s *memSlot) keyString(m uint32) string {
	if klen := uint8(m >> metaKlenShift); klen != longKey {
		return string(s.kin[:klen])
	}
	return s.key
}

// lock takes the lock of the slot, which holds a key in the shard's
// current table, waiting for whoever holds it (a decision, which holds it
// briefly and waits for nothing meanwhile) by yielding the processor, as
// lockBriefly does. It returns the slot's meta without the lock, which
// unlock restores.
func (s *memSlot) lock() uint32 {
	for {
		m := atomic.LoadUint32(&s.meta)
		if m&slotLocked == 0 && atomic.CompareAndSwapUint32(&s.meta, m, m|slotLocked) {
			return m
		}
		runtime.Gosched()
	}
}

// unlock releases the slot's lock; m is what lock returned.
func (s *memSlot) unlock(m uint32) { atomic.StoreUint32(&s.meta, m) }

// moveTo moves the slot's entry, whose meta is m, into dst, which is
// empty or holds the lock of an entry being overwritten, and publishes it
// there with dst's lock released. The caller holds the shard's lock and
// s's lock, which it keeps.
func (s *memSlot) moveTo(dst *memSlot, m uint32) {
	dst.stamp, dst.units, dst.idleAt, dst.extra = s.stamp, s.units, s.idleAt, s.extra
	dst.kin, dst.key, dst.log = s.kin, s.key, s.log
	atomic.StoreUint64(&dst.hash, s.hash)
	atomic.StoreUint32(&dst.meta, m)
}

// clear empties the slot, releasing its lock (or ending its death: only
// for a slot no decision can still lock).
func (s *memSlot) clear() {
	s.stamp, s.units, s.idleAt, s.extra = 0, 0, 0, 0
	s.key, s.log = "", nil
	atomic.StoreUint64(&s.hash, 0)
	atomic.StoreUint32(&s.meta, 0)
}

// minTableSize is the size of a shard's table when it first holds a key.
const minTableSize = 8

// lockKey finds the entry of tag (the algorithm's index + 1) and key,
// with hash h, in the table without the shard's lock, and returns its
// slot locked and its meta (unlocked). When another decision holds the
// slot it waits for it a little, as that decision holds it briefly. It
// returns nil when it cannot be sure: the key is absent, its slot dead
// (left behind in a replaced table) or held for longer (being moved);
// the caller then looks again under the shard's lock.
func (t *memTable) lockKey(h uint64, tag uint32, key string) (*memSlot, uint32) {
	mask := t.size - 1
	i := t.home(h)
	for range t.size {
		s := t.slot(i)
		m := atomic.LoadUint32(&s.meta)
		if m&metaTag == 0 {
			return nil, 0
		}
		if m&metaTag == tag && atomic.LoadUint64(&s.hash) == h {
			if m = s.lockBriefly(m); m == 0 {
				return nil, 0
			}
			if s.keyIs(key, m) {
				return s, m
			}
			s.unlock(m) // another key with the same hash
		}
		i = (i + 1) & mask
	}
	return nil, 0
}

// lockBriefly takes the slot's lock, m being its meta as last read. When
// it is held, it yields the processor and tries again, a few times: the
// holder is most likely a decision, which holds it briefly. (Spinning on
// it instead would take its cache line from the holder, which is writing
// the slot's state.) It returns the meta without the lock, or 0 when the
// slot is dead, emptied, or still held.
func (s *memSlot) lockBriefly(m uint32) uint32 {
	for tries := 0; ; tries++ {
		switch {
		case m&slotDead != 0 || m&metaTag == 0:
			return 0
		case m&slotLocked == 0:
			if atomic.CompareAndSwapUint32(&s.meta, m, m|slotLocked) {
				return m
			}
		case tries >= lockTries:
			return 0
		default:
			runtime.Gosched()
		}
		m = atomic.LoadUint32(&s.meta)
	}
}

// lockTries is how many times lockBriefly yields before giving up.
const lockTries = 4

// find returns the slot of (alg, key) with hash h, or -1.
func (sh *memShard) find(h uint64, alg algorithmIndex, key string) int {
	t := sh.table.Load()
	if t == nil || sh.n == 0 {
		return -1
	}
	mask := t.size - 1
	tag := uint32(alg) + 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := t.slot(i)
		m := atomic.LoadUint32(&s.meta)
		if m&metaTag == 0 {
			return -1
		}
		if m&metaTag == tag && s.hash == h && s.keyIs(key, m) {
			return i
		}
	}
}

// add puts a new entry for (alg, key) with hash h, which must not be
// present, growing the table when needed, and returns its slot, with the
// slot's lock held when locked (its meta is then the slot's meta with
// slotLocked cleared).
func (sh *memShard) add(h uint64, alg algorithmIndex, key string, locked bool) int {
	t := sh.table.Load()
	if t == nil || (sh.n+1)*4 > t.size*3 {
		size := minTableSize
		if t != nil {
			size = 2 * t.size
		}
		t = sh.rebuild(size, nil, false)
	}
	i := t.place(h)
	s := t.slot(i)
	klen := uint32(longKey)
	if len(key) <= inlineKeyMax {
		klen = uint32(copy(s.kin[:], key))
	} else {
		s.key = strings.Clone(key)
	}
	m := uint32(alg) + 1 | klen<<metaKlenShift
	if locked {
		m |= slotLocked
	}
	atomic.StoreUint64(&s.hash, h)
	atomic.StoreUint32(&s.meta, m)
	sh.n++
	return i
}

// place returns the first empty slot on h's probe sequence.
func (t *memTable) place(h uint64) int {
	mask := t.size - 1
	i := t.home(h)
	for atomic.LoadUint32(&t.slot(i).meta)&metaTag != 0 {
		i = (i + 1) & mask
	}
	return i
}

// rebuild replaces the table with one of size slots (nil when size is 0),
// keeping the entries for which keep (when not nil) returns true, and
// returns it. The entries of the old table are locked, unless locked says
// the caller holds their locks already, and every slot of it that held
// one is left dead.
func (sh *memShard) rebuild(size int, keep func(*memSlot) bool, locked bool) *memTable {
	old := sh.table.Load()
	var t *memTable
	if size > 0 {
		t = &memTable{chunks: sh.pool.table(size), size: size, shift: uint8(64 - bitsLen(size-1))}
	}
	sh.n = 0
	if old != nil {
		for _, c := range old.chunks {
			for i := range c {
				s := &c[i]
				m := atomic.LoadUint32(&s.meta)
				if m&metaTag == 0 {
					continue
				}
				if locked {
					m &^= slotLocked
				} else {
					m = s.lock()
				}
				if t != nil && (keep == nil || keep(s)) {
					s.moveTo(t.slot(t.place(s.hash)), m)
					sh.n++
				}
				atomic.StoreUint32(&s.meta, m|slotLocked|slotDead)
			}
		}
	}
	sh.table.Store(t)
	if old != nil {
		sh.pool.release(old.chunks)
	}
	return t
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
// probe run so that every entry stays reachable from its home slot. It
// takes the lock of each slot it changes: of slot i, and of each entry it
// moves, which it publishes in its new slot before going on.
func (sh *memShard) remove(i int) {
	t := sh.table.Load()
	mask := t.size - 1
	t.slot(i).lock()
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := t.slot(j)
		if atomic.LoadUint32(&s.meta)&metaTag == 0 {
			break
		}
		k := t.home(s.hash)
		// The entry at j stays when its home k lies cyclically in (i, j].
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		s.moveTo(t.slot(i), s.lock())
		i = j // locked, holding a copy of what is now at i
	}
	t.slot(i).clear()
	sh.n--
}

// sweep drops every entry idle at now and shrinks the table to fit the
// rest; it returns how many it dropped. It holds the lock of every entry
// while it judges and moves them, so that none becomes busy again in
// between.
func (sh *memShard) sweep(now int64) int {
	t := sh.table.Load()
	if t == nil {
		return 0
	}
	before := sh.n
	live := 0
	for _, c := range t.chunks {
		for i := range c {
			if s := &c[i]; atomic.LoadUint32(&s.meta)&metaTag != 0 {
				s.lock()
				if s.idleAt > now {
					live++
				}
			}
		}
	}
	if live == before {
		for _, c := range t.chunks {
			for i := range c {
				if s := &c[i]; atomic.LoadUint32(&s.meta)&metaTag != 0 {
					s.unlock(atomic.LoadUint32(&s.meta) &^ slotLocked)
				}
			}
		}
		return 0
	}
	size := 0
	if live > 0 {
		size = minTableSize
		for size*3 < live*4+4 {
			size *= 2
		}
	}
	sh.rebuild(size, func(e *memSlot) bool { return e.idleAt > now }, true)
	return before - sh.n
}

// insert adds a new entry for (alg, key) with hash h and returns it, its
// slot's lock held when locked (see add). It first looks at a few entries
// after a pseudo-random slot: those idle for over idleGrace are dropped
// and, when the shard still holds max entries, the one that becomes idle
// soonest is evicted.
func (sh *memShard) insert(h uint64, alg algorithmIndex, key string, now int64, max int, locked bool) *memSlot {
	if sh.n > 0 {
		sh.evict(h, now, max)
	}
	return sh.slot(sh.add(h, alg, key, locked))
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
	t := sh.table.Load()
	mask := t.size - 1
	start := int(h>>7) & mask
	for k := 0; k <= mask && seen < evictionSamples; k++ {
		s := t.slot((start + k) & mask)
		if atomic.LoadUint32(&s.meta)&metaTag == 0 {
			continue
		}
		seen++
		m := s.lock()
		if s.idleAt+idleGrace <= now {
			idle[nIdle] = sampled{s.hash, uint8(m), s.keyString(m)}
			nIdle++
		} else if s.idleAt < victimAt {
			victim, victimAt = sampled{s.hash, uint8(m), s.keyString(m)}, s.idleAt
		}
		s.unlock(m)
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
