package limiter

import (
	"context"
	"sync"
	"time"
)

// memoryPenalties is a MemoryStore's penalty box, under one mutex (a key
// gets here only once refused); the zero value is ready.
type memoryPenalties struct {
	mu      sync.Mutex
	entries map[string]*penaltyEntry
	inserts int // since the last sweep of expired entries
}

type penaltyEntry struct {
	strikes      int64
	strikesUntil int64 // µs; the strikes are forgotten then
	boxedUntil   int64 // µs; 0: not in the box
}

// sweepEvery new entries pass between sweeps of the expired ones.
const sweepEvery = 1024

// Penalized implements PenaltyStore.
func (s *MemoryStore) Penalized(_ context.Context, key string, _ time.Duration) (time.Duration, error) {
	now := s.nowUS()
	mp := &s.penalties
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if e := mp.entries[key]; e != nil && e.boxedUntil > now {
		return time.Duration(e.boxedUntil-now) * time.Microsecond, nil
	}
	return 0, nil
}

// Strike implements PenaltyStore.
func (s *MemoryStore) Strike(_ context.Context, key string, p Penalty, _ time.Duration) (time.Duration, error) {
	if !p.Enabled() {
		return 0, nil
	}
	now := s.nowUS()
	mp := &s.penalties
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.entries == nil {
		mp.entries = map[string]*penaltyEntry{}
	}
	e := mp.entries[key]
	if e == nil {
		mp.sweep(now)
		e = &penaltyEntry{}
		mp.entries[key] = e
	}
	if e.boxedUntil > now {
		return 0, nil
	}
	if e.strikesUntil <= now {
		e.strikes, e.strikesUntil = 0, now+us(p.Within)
	}
	e.strikes++
	if e.strikes < p.After {
		return 0, nil
	}
	e.strikes, e.strikesUntil, e.boxedUntil = 0, 0, now+us(p.For)
	return p.For, nil
}

// Lift implements PenaltyStore.
func (s *MemoryStore) Lift(_ context.Context, key string, _ time.Duration) error {
	s.penalties.mu.Lock()
	delete(s.penalties.entries, key)
	s.penalties.mu.Unlock()
	return nil
}

func (mp *memoryPenalties) sweep(now int64) {
	if mp.inserts++; mp.inserts < sweepEvery {
		return
	}
	mp.inserts = 0
	for k, e := range mp.entries {
		if e.boxedUntil <= now && e.strikesUntil <= now {
			delete(mp.entries, k)
		}
	}
}
