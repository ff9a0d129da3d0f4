package limiter

import (
	"context"
	"fmt"
	"time"
)

// DecideSet implements SetStore: the parts' shards are locked in one order
// (ascending, each once), so that sets on shared shards never deadlock and
// every set sees and changes its parts at one instant; each part is peeked
// on the state as it is, and only when all admit is each one's cost taken,
// by the same arithmetic as Decide. A set that is refused creates no key.
// It never waits, so neither ctx nor timeout is consulted.
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
// nothing (DecideSet), and when admitted opens holds[i] on each part whose
// ID is set (holds nil: none; ReserveSet). The callers checked the costs;
// two parts of one state are an error.
func (s *MemoryStore) decideSet(keys []string, cls []*compiledLimit, costs []int64, mode Mode, holds []ReserveRequest, out []Decision) (bool, error) {
	n := len(keys)
	var hbuf [8]uint64
	var sbuf [8]uint32
	hashes, shards := hbuf[:0], sbuf[:0]
	if n > len(hbuf) {
		hashes, shards = make([]uint64, 0, n), make([]uint32, 0, n)
	}
	for i, key := range keys {
		h := s.hash(cls[i].alg, key)
		for j := range i {
			if hashes[j] == h && cls[j].alg == cls[i].alg && keys[j] == key {
				return false, fmt.Errorf("memory store: parts %d and %d on key %q: %w", j, i, key, ErrSharedState)
			}
		}
		hashes = append(hashes, h)
		shards = appendSorted(shards, uint32(h&s.mask))
	}
	for _, i := range shards {
		s.shards[i].mu.Lock()
	}
	now := s.nowUS()
	allowed, fresh := true, false
	var ebuf [8]*memSlot
	slots := ebuf[:0]
	for i, key := range keys {
		sh := &s.shards[hashes[i]&s.mask]
		var e *memSlot
		if j := sh.find(hashes[i], cls[i].alg, key); j >= 0 {
			e = sh.slot(j)
			out[i] = e.apply(now, false, key, cls[i], costAt(costs, i), true)
		} else {
			var blank memSlot
			out[i] = blank.apply(now, true, key, cls[i], costAt(costs, i), true)
			fresh = true
		}
		slots = append(slots, e)
		out[i].Admitted = 0
		allowed = allowed && out[i].Allowed
	}
	if allowed && mode == ModeConsume && !fresh {
		// Each part admits on the state just read: take every cost.
		for i, key := range keys {
			out[i] = slots[i].apply(now, false, key, cls[i], costAt(costs, i), false)
		}
		if holds != nil {
			s.openRecords(keys, hashes, cls, costs, slots, now, holds)
		}
	} else if allowed && mode == ModeConsume {
		// As above, but an insertion may move the slots of its shard, so
		// each is found again.
		for i, key := range keys {
			sh := &s.shards[hashes[i]&s.mask]
			var e *memSlot
			j := sh.find(hashes[i], cls[i].alg, key)
			fresh := j < 0
			if fresh {
				e = sh.insert(hashes[i], cls[i].alg, key, now, s.perShard)
			} else {
				e = sh.slot(j)
			}
			out[i] = e.apply(now, fresh, key, cls[i], costAt(costs, i), false)
			slots[i] = e
		}
		if holds != nil {
			s.openRecords(keys, hashes, cls, costs, slots, now, holds)
		}
	}
	for k := len(shards) - 1; k >= 0; k-- {
		s.shards[shards[k]].mu.Unlock()
	}
	return allowed, nil
}

// openRecords records holds' reservations of a set just taken from slots
// at now; the caller holds the shards' locks. The marks are read first:
// settling a book's expired records may move its shard's slots.
func (s *MemoryStore) openRecords(keys []string, hashes []uint64, cls []*compiledLimit, costs []int64, slots []*memSlot, now int64, holds []ReserveRequest) {
	var mbuf [8]int64
	marks := mbuf[:0]
	for i := range keys {
		marks = append(marks, takeMark(slots[i], cls[i], now))
	}
	for i, r := range holds {
		if r.ID != "" {
			s.shards[hashes[i]&s.mask].openRecord(hashes[i], keys[i], cls[i], now, r, costAt(costs, i), marks[i])
		}
	}
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
