package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Kinds of lease call (lua/concurrency.lua).
const (
	kindAcquire    = 0
	kindRelease    = 1
	kindLeaseRenew = 2
)

// leaseScripts are lua/concurrency.lua's calls, alone and batched (reserve_batch.go).
var leaseScripts = sync.OnceValues(func() (*opScripts, error) {
	var a, r, b, n script
	if err := readGenerated(limiter.Concurrency, leaseKinds[:], &a, &r, &b, &n); err != nil {
		return nil, fmt.Errorf("redis store: %w", err)
	}
	return &opScripts{single: [3]*script{kindAcquire: &a, kindRelease: &r, kindLeaseRenew: &n}, batch: &b}, nil
})

func luaScript(name string) func() (*Script, error) {
	return sync.OnceValues(func() (*Script, error) {
		src, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return nil, fmt.Errorf("redis store: %s script: %w", name, err)
		}
		return NewScript(string(src)), nil
	})
}

// LeaseKey is the sorted set holding key's leases: <prefix>:{<key>}:concurrency, one Cluster slot.
func (s *Store) LeaseKey(key string) string { return s.baseKey(key, limiter.Concurrency) }

// AcquireLease implements limiter.Leaser in one script call, batched on a single server.
// Safe for concurrent use.
func (s *Store) AcquireLease(ctx context.Context, key string, lim limiter.LeaseLimit, id string, timeout time.Duration) (limiter.LeaseDecision, error) {
	if err := lim.Validate(); err != nil {
		return limiter.LeaseDecision{}, fmt.Errorf("redis store: concurrency: %w", err)
	}
	r, err := s.runLease(ctx, timeout, key, kindAcquire, id, lim.Limit, lim.TTL.Microseconds())
	if err != nil {
		return limiter.LeaseDecision{}, err
	}
	d := limiter.LeaseDecision{Allowed: r[0] == 1, Limit: lim.Limit, InFlight: r[1], Expired: r[2]}
	if !d.Allowed {
		d.RetryAfter = min(limiter.LeaseRetryAfter, time.Duration(max(r[3], 0))*time.Microsecond)
	}
	return d, nil
}

// ReleaseLease implements limiter.Leaser in one script call. Safe for concurrent use.
func (s *Store) ReleaseLease(ctx context.Context, key string, id string, timeout time.Duration) (int64, error) {
	r, err := s.runLease(ctx, timeout, key, kindRelease, id, 0, 0)
	if err != nil {
		return 0, err
	}
	return released(id, r)
}

func released(id string, r [4]int64) (int64, error) {
	if r[0] != 1 {
		return r[2], fmt.Errorf("redis store: lease %s: %w", id, limiter.ErrLeaseUnknown)
	}
	return r[2], nil
}

// ReleaseLeaseAsync implements limiter.AsyncReleaser as SettleAsync does: then gets
// ReleaseLease's result once, on a store goroutine, and must not block. Safe for concurrent use.
func (s *Store) ReleaseLeaseAsync(ctx context.Context, key string, id string, timeout time.Duration, then func(int64, error)) {
	r := s.leaseOp(key, kindRelease, id, 0, 0)
	r.onRelease = then
	s.postOp(ctx, r, timeout, releasedAsync)
}

func releasedAsync(r *request) {
	s, then, lk, id := r.s, r.onRelease, r.keys[0], r.id
	var out [4]int64
	err := r.err
	if err == nil && r.nout < len(out) {
		err = fmt.Errorf("%d values in the reply, want %d", r.nout, len(out))
	}
	copy(out[:], r.out[:r.nout])
	s.recycle(r)
	if err != nil {
		then(0, fmt.Errorf("redis concurrency script on %s: %w", lk, err))
		return
	}
	then(released(id, out))
}

// RenewLease implements limiter.Leaser: one script call moves the lease's expiry to
// lim.TTL from now on Redis's clock. Safe for concurrent use.
func (s *Store) RenewLease(ctx context.Context, key string, lim limiter.LeaseLimit, id string, timeout time.Duration) (limiter.Renewal, error) {
	if err := lim.Validate(); err != nil {
		return limiter.Renewal{}, fmt.Errorf("redis store: concurrency: %w", err)
	}
	r, err := s.runLease(ctx, timeout, key, kindLeaseRenew, id, lim.Limit, lim.TTL.Microseconds())
	if err != nil {
		return limiter.Renewal{}, err
	}
	rn := limiter.Renewal{Expired: r[2]}
	if r[0] != 1 {
		return rn, fmt.Errorf("redis store: lease %s: %w", id, limiter.ErrLeaseUnknown)
	}
	rn.Expires = time.UnixMicro(r[3])
	return rn, nil
}

func (s *Store) runLease(ctx context.Context, timeout time.Duration, key string, kind int64, id string, limit, ttl int64) ([4]int64, error) {
	var out [4]int64
	r := s.leaseOp(key, kind, id, limit, ttl)
	lk := r.keys[0]
	vals, n, err := s.op(ctx, r, timeout)
	if err != nil {
		return out, fmt.Errorf("redis concurrency script on %s: %w", lk, err)
	}
	if n < len(out) {
		return out, fmt.Errorf("redis concurrency script on %s: %d values in the reply, want %d", lk, n, len(out))
	}
	copy(out[:], vals[:n])
	return out, nil
}

func (s *Store) leaseOp(key string, kind int64, id string, limit, ttl int64) *request {
	r := s.newOp(famLease, kind)
	r.addKey(s.LeaseKey(key))
	r.idAt, r.id = 0, id
	r.addNums(limit, ttl)
	r.addSet(limit, ttl)
	r.limit, r.cost = limit, 1
	s.slotted(r)
	return r
}
