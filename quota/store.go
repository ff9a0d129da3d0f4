package quota

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Store holds the demands on each shared limit of every replica's clients, so that each replica
// divides the limit among all of them. Implementations are safe for concurrent use.
type Store interface {
	// Exchange records mine (this replica's clients' demands on key) at now, forgets the clients
	// of gone, drops the entries not recorded within stale, and returns every client's demand on
	// key, sorted by client.
	Exchange(ctx context.Context, key string, mine []Demand, gone []string, now time.Time, stale time.Duration) ([]Demand, error)
}

// MemoryStore is a Store of one replica: the demands live in its memory. The zero value is
// ready; it is safe for concurrent use.
type MemoryStore struct {
	mu   sync.Mutex
	keys map[string]map[string]memEntry
}

type memEntry struct {
	d  Demand
	at time.Time
}

// Exchange is part of Store.
func (s *MemoryStore) Exchange(_ context.Context, key string, mine []Demand, gone []string, now time.Time, stale time.Duration) ([]Demand, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string]map[string]memEntry{}
	}
	m := s.keys[key]
	if m == nil {
		m = map[string]memEntry{}
		s.keys[key] = m
	}
	for _, d := range mine {
		m[d.Client] = memEntry{d: d, at: now}
	}
	for _, c := range gone {
		delete(m, c)
	}
	out := make([]Demand, 0, len(m))
	for c, e := range m {
		if stale > 0 && now.Sub(e.at) > stale {
			delete(m, c)
			continue
		}
		out = append(out, e.d)
	}
	if len(m) == 0 {
		delete(s.keys, key)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Client < out[j].Client })
	return out, nil
}
