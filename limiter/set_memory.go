package limiter

import (
	"context"
	"fmt"
	"time"
)

// DecideSet implements SetStore: the parts' shards are locked in one order
// (ascending, each once), so that sets on shared shards never deadlock and
// every set sees and changes its parts at one instant (see decideSet).
// Like Decide it never waits.
func (s *MemoryStore) DecideSet(ctx context.Context, parts []Part, mode Mode, _ time.Duration, out []Decision) (bool, error) {
	return s.decideParts(ctx, parts, mode, nil, out)
}

// decideParts is DecideSet, opening holds' reservations (nil: none) when admitted (ReserveSet).
func (s *MemoryStore) decideParts(_ context.Context, parts []Part, mode Mode, holds []ReserveRequest, out []Decision) (bool, error) {
	if err := CheckSet(parts, mode, out); err != nil {
		return false, fmt.Errorf("memory store: %w", err)
	}
	var kbuf [8]string
	var cbuf [8]int64
	var lbuf [8]compiledLimit
	var pbuf [8]*compiledLimit
	keys, costs, cls, ptrs := kbuf[:0], cbuf[:0], lbuf[:0], pbuf[:0]
	for i, p := range parts {
		if err := p.Limit.Validate(); err != nil {
			return false, fmt.Errorf("memory store: part %d: limit: %w", i, err)
		}
		if err := p.Limit.CheckCost(p.Cost); err != nil {
			return false, fmt.Errorf("memory store: part %d: %w", i, err)
		}
		keys, costs = append(keys, p.Key), append(costs, p.Cost)
		cls = append(cls, compileLimit(p.Limit))
	}
	for i := range cls {
		ptrs = append(ptrs, &cls[i])
	}
	return s.decideSet(keys, ptrs, costs, mode, holds, out)
}

// decideSet decides keys[i] at costs[i] (nil: 1) under cls[i], all or
// nothing, and when admitted opens holds[i] on each part whose ID is set
// (ReserveSet). The callers checked the costs; two parts of one state are
// an error.
//
// Each part's slot is saved, taken from by Decide's arithmetic, and put
// back should a later part refuse (sliding_log, whose log a copy does not
// save, is peeked first and taken once all admit). A fresh key is decided
// on a blank slot and inserted only when the set is admitted, so a refused
// set creates no key and answers each part peeked, as if never tried.
func (s *MemoryStore) decideSet(keys []string, cls []*compiledLimit, costs []int64, mode Mode, holds []ReserveRequest, out []Decision) (bool, error) {
	n := len(keys)
	var hbuf [setOnStack]uint64
	var sbuf [setOnStack]uint32
	var pbuf [setOnStack]*memSlot
	var vbuf [setOnStack]memSlot
	var tbuf [setOnStack]bool
	st := memSetState{hashes: hbuf[:0], shards: sbuf[:0], slots: pbuf[:0], saved: vbuf[:0], taken: tbuf[:0]}
	if n > setOnStack {
		st = memSetState{hashes: make([]uint64, 0, n), shards: make([]uint32, 0, n), slots: make([]*memSlot, 0, n), saved: make([]memSlot, 0, n), taken: make([]bool, 0, n)}
	}
	for i, key := range keys {
		h := s.hashOnce(st.hashes, keys[:i], key)
		for j := range i {
			if st.hashes[j] == h && cls[j].alg == cls[i].alg && keys[j] == key {
				return false, fmt.Errorf("memory store: parts %d and %d on key %q: %w", j, i, key, ErrSharedState)
			}
		}
		st.hashes = append(st.hashes, h)
		st.shards = appendSorted(st.shards, uint32(h&s.mask))
	}
	st.slots, st.saved, st.taken = st.slots[:n], st.saved[:n], st.taken[:n]
	for _, i := range st.shards {
		s.shards[i].mu.Lock()
	}
	allowed := s.trySet(&st, keys, cls, costs, mode, out)
	if allowed && mode == ModeConsume && holds != nil {
		s.openRecords(&st, keys, cls, costs, holds)
	}
	for k := len(st.shards) - 1; k >= 0; k-- {
		s.shards[st.shards[k]].mu.Unlock()
	}
	return allowed, nil
}

// hashOnce is key's hash, taken from an earlier part of the set on the
// same key (done: their hashes) rather than hashed again.
func (s *MemoryStore) hashOnce(done []uint64, earlier []string, key string) uint64 {
	for j, k := range earlier {
		if k == key {
			return done[j]
		}
	}
	return s.hash(key)
}

// openRecords records holds' reservations of a set just taken, at its
// instant, under the shards' locks. Each slot is found again (inserting
// the set's fresh keys may have moved it) and every mark read first:
// settling a book's expired records may move its shard's slots.
func (s *MemoryStore) openRecords(st *memSetState, keys []string, cls []*compiledLimit, costs []int64, holds []ReserveRequest) {
	var mbuf [setOnStack]int64
	marks := mbuf[:0]
	for i, key := range keys {
		sh := &s.shards[st.hashes[i]&s.mask]
		marks = append(marks, takeMark(sh.slot(sh.find(st.hashes[i], cls[i].alg, key)), cls[i], st.now))
	}
	for i, r := range holds {
		if r.ID != "" {
			s.shards[st.hashes[i]&s.mask].openRecord(st.hashes[i], keys[i], cls[i], st.now, r, costAt(costs, i), marks[i])
		}
	}
}

// setOnStack is the most parts decideSet holds on the stack.
const setOnStack = 8

// memSetState is a set's hashes, shards and slots under decideSet, by part.
type memSetState struct {
	hashes []uint64
	shards []uint32   // ascending, each once
	slots  []*memSlot // nil: a fresh key, decided on saved
	saved  []memSlot  // a slot as found, or a fresh key's blank
	taken  []bool
	now    int64  // the instant trySet decided at (µs)
	warmed uint64 // see warm
}

// trySet decides the set with its shards locked (see decideSet).
func (s *MemoryStore) trySet(st *memSetState, keys []string, cls []*compiledLimit, costs []int64, mode Mode, out []Decision) bool {
	now := s.nowUS()
	st.now = now
	s.warm(st)
	allowed, fresh := true, false
	for i, key := range keys {
		sh := &s.shards[st.hashes[i]&s.mask]
		e := &st.saved[i]
		if j := sh.find(st.hashes[i], cls[i].alg, key); j >= 0 {
			st.slots[i] = sh.slot(j)
			*e = *st.slots[i]
			e = st.slots[i]
		} else {
			fresh = true
		}
		// A log is taken from only by the second pass (see decideSet).
		take := allowed && mode == ModeConsume && cls[i].alg != slidingLogIndex
		out[i] = e.apply(now, st.slots[i] == nil, key, cls[i], costAt(costs, i), !take)
		st.taken[i] = take
		allowed = allowed && out[i].Allowed
	}
	if !allowed || mode != ModeConsume {
		s.untrySet(st, now, keys, cls, costs, out)
		return allowed
	}
	for i, key := range keys {
		if st.taken[i] {
			continue
		}
		e := st.slots[i]
		if e == nil {
			e = &st.saved[i]
		}
		out[i] = e.apply(now, st.slots[i] == nil, key, cls[i], costAt(costs, i), false)
	}
	if fresh {
		// An insertion may move its shard's slots: those taken are done with.
		for i, key := range keys {
			if st.slots[i] == nil {
				sh := &s.shards[st.hashes[i]&s.mask]
				e := sh.insert(st.hashes[i], cls[i].alg, key, now, s.perShard)
				e.adopt(&st.saved[i])
			}
		}
	}
	return true
}

// warm reads the first slot of each part's probe run and the one after,
// so that the parts' cache misses overlap instead of coming one after the
// other in find (a client's parts sit side by side: one run).
// The sum is kept in st lest the compiler drop the reads.
func (s *MemoryStore) warm(st *memSetState) {
	var sum uint64
	for _, h := range st.hashes {
		sh := &s.shards[h&s.mask]
		if sh.size == 0 {
			continue
		}
		i := sh.home(h)
		sum += uint64(sh.ctrl[i]) + sh.slot(i).hash + sh.slot((i+1)&(sh.size-1)).hash
	}
	st.warmed = sum
}

// untrySet puts back the slots a refused or peeked set took from and
// answers every part peeked on the state as it is, taking nothing.
func (s *MemoryStore) untrySet(st *memSetState, now int64, keys []string, cls []*compiledLimit, costs []int64, out []Decision) {
	for i := range keys {
		if st.taken[i] {
			if e := st.slots[i]; e != nil {
				*e = st.saved[i]
			} else {
				st.saved[i] = memSlot{}
			}
		}
	}
	for i, key := range keys {
		if st.taken[i] {
			e := st.slots[i]
			if e == nil {
				e = &st.saved[i]
			}
			out[i] = e.apply(now, st.slots[i] == nil, key, cls[i], costAt(costs, i), true)
		}
		out[i].Admitted = 0
	}
}

// adopt gives the inserted slot e a fresh key's state decided on blank.
func (e *memSlot) adopt(blank *memSlot) {
	e.stamp, e.units, e.idleAt, e.extra, e.log = blank.stamp, blank.units, blank.idleAt, blank.extra, blank.log
}

// appendSorted inserts v into the ascending xs unless it holds it.
func appendSorted(xs []uint32, v uint32) []uint32 {
	i := 0
	for i < len(xs) && xs[i] < v {
		i++
	}
	if i < len(xs) && xs[i] == v {
		return xs
	}
	xs = append(xs, 0)
	copy(xs[i+1:], xs[i:])
	xs[i] = v
	return xs
}
