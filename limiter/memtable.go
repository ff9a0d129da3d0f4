package limiter

import (
	"math"
	"strings"
	"sync"
)

// memShard is an open-addressing hash table (linear probing, backward-shift
// deletion) holding the entries in its slots. A lookup walks the probe run in
// the control bytes (empty, or 7 bits of the hash), which stay cached, so it
// misses the cache once, not once per slot. Chunks a growing shard frees go to
// the next, not the GC, lest garbage grow to the live heap. All methods need mu held.
type memShard struct {
	mu     sync.Mutex
	chunks [][]memSlot              // nil when empty
	first  []memSlot                // chunks[0], the whole table of most shards
	ctrl   []uint8                  // per slot: 0 when empty, else ctrlOf(its hash)
	size   int                      // a power of two, or 0
	shift  uint8                    // 64 − log2(size)
	n      int                      // slots in use
	pool   *chunkPool               // nil: chunks are left to the GC
	books  map[bookKey]*reserveBook // open reservations
	// Pad to 128 bytes: neighbouring shards share no pair of cache lines.
	_ [8]byte
}

// ctrlOf is h's top 7 bits, by which neither the shard nor the home slot is chosen alone.
func ctrlOf(h uint64) uint8 { return uint8(h>>57) | 0x80 }

// A table chunk is 512 slots, 64 KiB.
const (
	chunkShift = 9
	chunkSlots = 1 << chunkShift
	chunkMask  = chunkSlots - 1
)

func (sh *memShard) slot(i int) *memSlot {
	if i < len(sh.first) {
		return &sh.first[i]
	}
	return &sh.chunks[i>>chunkShift][i&chunkMask]
}

// chunkPool holds a store's zeroed free chunks; safe for concurrent use.
type chunkPool struct {
	mu   sync.Mutex
	free [][]memSlot
}

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

// release keeps at most twice the table's chunks, so memory a sweep freed is not held forever.
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

// memSlot is a key's 128 bytes; what stamp, units, extra and log hold is
// AlgorithmSpec.MemoryState. A short key is kept inline, so that comparing
// it reads no other memory; up to 22 bytes, a decision reads one cache line.
type memSlot struct {
	hash   uint64
	stamp  int64
	units  int64
	idleAt int64 // when the state is equivalent to a fresh one (µs)
	extra  int64
	tag    uint8 // algorithmIndex + 1; 0: empty
	klen   uint8 // len of the key in kin, or longKey
	kin    [inlineKeyMax]byte
	key    string // when longer than inlineKeyMax
	log    *timestampLog
}

const (
	inlineKeyMax = 62
	longKey      = 255
)

func (s *memSlot) keyIs(key string) bool {
	if s.klen != longKey {
		return int(s.klen) == len(key) && string(s.kin[:s.klen]) == key
	}
	return s.key == key
}

func (s *memSlot) keyString() string {
	if s.klen != longKey {
		return string(s.kin[:s.klen])
	}
	return s.key
}

const minTableSize = 8

// home is where h's probing starts. Fibonacci hashing mixes all of h, so
// that keys of one shard, sharing h's low bits, still spread.
func (sh *memShard) home(h uint64) int {
	return int((h * 0x9E3779B97F4A7C15) >> sh.shift)
}

func (sh *memShard) find(h uint64, alg algorithmIndex, key string) int {
	if sh.n == 0 {
		return -1
	}
	mask := sh.size - 1
	tag, c, ctrl := uint8(alg)+1, ctrlOf(h), sh.ctrl
	for i := sh.home(h); ; i = (i + 1) & mask {
		switch ctrl[i] {
		case 0:
			return -1
		case c:
			if s := sh.slot(i); s.hash == h && s.tag == tag && s.keyIs(key) {
				return i
			}
		}
	}
}

func (sh *memShard) add(h uint64, alg algorithmIndex, key string) int {
	if (sh.n+1)*4 > sh.size*3 {
		sh.resize(max(minTableSize, 2*sh.size), nil)
	}
	i := sh.place(h)
	s := sh.slot(i)
	*s = memSlot{hash: h, tag: uint8(alg) + 1}
	sh.ctrl[i] = ctrlOf(h)
	if len(key) <= inlineKeyMax {
		s.klen = uint8(copy(s.kin[:], key))
	} else {
		s.klen, s.key = longKey, strings.Clone(key)
	}
	sh.n++
	return i
}

func (sh *memShard) place(h uint64) int {
	mask := sh.size - 1
	i := sh.home(h)
	for sh.ctrl[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

// resize keeps the entries keep (nil: all) accepts.
func (sh *memShard) resize(size int, keep func(*memSlot) bool) {
	old := sh.chunks
	sh.chunks = sh.pool.table(size)
	sh.first = sh.chunks[0]
	sh.ctrl = make([]uint8, size)
	sh.size = size
	sh.shift = uint8(64 - bitsLen(size-1))
	sh.n = 0
	for _, c := range old {
		for i := range c {
			s := &c[i]
			if s.tag == 0 || (keep != nil && !keep(s)) {
				continue
			}
			j := sh.place(s.hash)
			*sh.slot(j) = *s
			sh.ctrl[j] = ctrlOf(s.hash)
			sh.n++
		}
	}
	sh.pool.release(old)
}

func bitsLen(x int) int {
	n := 0
	for ; x > 0; x >>= 1 {
		n++
	}
	return n
}

// remove empties slot i, shifting back the entries after it on its probe
// run so that each stays reachable from its home.
func (sh *memShard) remove(i int) {
	mask := sh.size - 1
	for j := (i + 1) & mask; sh.ctrl[j] != 0; j = (j + 1) & mask {
		k := sh.home(sh.slot(j).hash)
		// j stays when its home k lies cyclically in (i, j].
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		*sh.slot(i) = *sh.slot(j)
		sh.ctrl[i] = sh.ctrl[j]
		i = j
	}
	*sh.slot(i) = memSlot{}
	sh.ctrl[i] = 0
	sh.n--
}

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
		sh.chunks, sh.first, sh.ctrl, sh.size, sh.shift, sh.n = nil, nil, nil, 0, 0, 0
		return before
	}
	sh.resize(size, func(e *memSlot) bool { return e.idleAt > now })
	return before - sh.n
}

// insert first drops the sampled entries idle for over idleGrace and, when the
// shard still holds max, evicts the one that becomes idle soonest.
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
		j := (start + k) & mask
		if sh.ctrl[j] == 0 {
			continue
		}
		s := sh.slot(j)
		seen++
		if s.idleAt+idleGrace <= now {
			idle[nIdle] = sampled{s.hash, s.tag, s.keyString()}
			nIdle++
		} else if s.idleAt < victimAt {
			victim, victimAt = sampled{s.hash, s.tag, s.keyString()}, s.idleAt
		}
	}
	// remove shifts slots: find each sampled entry again.
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
