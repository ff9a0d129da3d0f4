package limiter

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// leaseTable is a MemoryStore's leases, key → lease id → expiry (µs), under one mutex.
type leaseTable struct {
	mu      sync.Mutex
	keys    map[string]map[string]int64
	sweepAt int // len(keys) at which AcquireLease next drops every expired lease
}

// minLeaseSweep is the fewest keys a sweep waits for; each sweep then waits for twice the keys it
// left, so that keys whose leases were never given back cost O(1) per call, amortised.
const minLeaseSweep = 1024

func (t *leaseTable) sweep(now int64) {
	for key, held := range t.keys {
		if dropExpired(held, now); len(held) == 0 {
			delete(t.keys, key)
		}
	}
	t.sweepAt = max(minLeaseSweep, 2*len(t.keys))
}

// dropExpired removes held's leases expired at now and returns how many.
func dropExpired(held map[string]int64, now int64) (n int64, earliest int64) {
	earliest = -1
	for id, exp := range held {
		if exp <= now {
			delete(held, id)
			n++
		} else if earliest < 0 || exp < earliest {
			earliest = exp
		}
	}
	return n, earliest
}

// AcquireLease implements Leaser.
func (s *MemoryStore) AcquireLease(_ context.Context, key string, lim LeaseLimit, id string, _ time.Duration) (LeaseDecision, error) {
	if err := lim.Validate(); err != nil {
		return LeaseDecision{}, fmt.Errorf("memory store: concurrency: %w", err)
	}
	now := s.nowUS()
	t := &s.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	held := t.keys[key]
	if held == nil {
		if t.keys == nil {
			t.keys = map[string]map[string]int64{}
		}
		held = map[string]int64{}
		t.keys[key] = held
	}
	expired, earliest := dropExpired(held, now)
	d := LeaseDecision{Limit: lim.Limit, Expired: expired}
	if int64(len(held)) >= lim.Limit {
		d.InFlight = int64(len(held))
		d.RetryAfter = min(LeaseRetryAfter, fromUS(earliest-now))
		return d, nil
	}
	held[id] = now + us(lim.TTL)
	d.Allowed, d.InFlight = true, int64(len(held))
	if len(t.keys) >= max(t.sweepAt, minLeaseSweep) {
		t.sweep(now)
	}
	return d, nil
}

// ReleaseLease implements Leaser.
func (s *MemoryStore) ReleaseLease(_ context.Context, key string, id string, _ time.Duration) (int64, error) {
	now := s.nowUS()
	t := &s.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	held := t.keys[key]
	expired, _ := dropExpired(held, now)
	_, ok := held[id]
	delete(held, id)
	if len(held) == 0 {
		delete(t.keys, key)
	}
	if !ok {
		return expired, fmt.Errorf("memory store: lease %s: %w", id, ErrLeaseUnknown)
	}
	return expired, nil
}

// RenewLease implements Leaser.
func (s *MemoryStore) RenewLease(_ context.Context, key string, lim LeaseLimit, id string, _ time.Duration) (Renewal, error) {
	if err := lim.Validate(); err != nil {
		return Renewal{}, fmt.Errorf("memory store: concurrency: %w", err)
	}
	now := s.nowUS()
	t := &s.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	held := t.keys[key]
	expired, _ := dropExpired(held, now)
	if _, ok := held[id]; !ok {
		if len(held) == 0 {
			delete(t.keys, key)
		}
		return Renewal{Expired: expired}, fmt.Errorf("memory store: lease %s: %w", id, ErrLeaseUnknown)
	}
	held[id] = now + us(lim.TTL)
	return Renewal{Expires: time.UnixMicro(held[id]), Expired: expired}, nil
}

// Leases counts key's leases, expired ones included until a call on key drops them.
func (s *MemoryStore) Leases(key string) int {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	return len(s.leases.keys[key])
}
