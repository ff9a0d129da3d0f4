package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Kinds of lease call (lua/concurrency.lua).
const (
	kindAcquire    = 0
	kindRelease    = 1
	kindLeaseRenew = 2
)

// leaseScripts are lua/concurrency.lua's calls: acquire and release alone,
// and the batch of many calls in one (reserve_batch.go).
var leaseScripts = sync.OnceValues(func() (*opScripts, error) {
	var a, r, b, n script
	if err := readGenerated(limiter.Concurrency, leaseKinds[:], &a, &r, &b, &n); err != nil {
		return nil, fmt.Errorf("redis store: %w", err)
	}
	return &opScripts{single: [3]*script{kindAcquire: &a, kindRelease: &r, kindLeaseRenew: &n}, batch: &b}, nil
})

// goRedisScript is lua/<name>.lua, read once, as a go-redis Script (EVALSHA, EVAL on NOSCRIPT).
func goRedisScript(name string) func() (*redis.Script, error) {
	return sync.OnceValues(func() (*redis.Script, error) {
		src, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return nil, fmt.Errorf("redis store: %s script: %w", name, err)
		}
		return redis.NewScript(string(src)), nil
	})
}

// LeaseKey is the sorted set holding key's leases: <prefix>:{<key>}:concurrency, one Cluster slot.
func (s *Store) LeaseKey(key string) string { return s.baseKey(key, limiter.Concurrency) }

// AcquireLease implements limiter.Leaser: one script call, batched with
// others in progress on a single server. Safe for concurrent use.
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

// ReleaseLease implements limiter.Leaser: one script call, batched as
// AcquireLease. Safe for concurrent use.
func (s *Store) ReleaseLease(ctx context.Context, key string, id string, timeout time.Duration) (int64, error) {
	r, err := s.runLease(ctx, timeout, key, kindRelease, id, 0, 0)
	if err != nil {
		return 0, err
	}
	if r[0] != 1 {
		return r[2], fmt.Errorf("redis store: lease %s: %w", id, limiter.ErrLeaseUnknown)
	}
	return r[2], nil
}

// RenewLease implements limiter.Leaser: one script call, batched as
// AcquireLease, that moves the lease's expiry to lim.TTL from now on
// Redis's clock. Safe for concurrent use.
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
	sc, err := leaseScripts()
	if err != nil {
		return out, err
	}
	lk := s.LeaseKey(key)
	op := newScriptOp()
	op.kind = kind
	op.addKey(lk)
	op.idAt, op.id = 0, id
	op.addNums(limit, ttl)
	op.addSet(limit, ttl)
	var vals []int64
	if s.batch != nil && !s.cluster {
		vals, err = s.leaseBatch.do(ctx, s, sc, op, timeout)
	} else {
		vals, err = s.aloneOp(ctx, sc, op, timeout)
	}
	if err != nil {
		return out, fmt.Errorf("redis concurrency script on %s: %w", lk, err)
	}
	if len(vals) < len(out) {
		return out, fmt.Errorf("redis concurrency script on %s: %d values in the reply, want %d", lk, len(vals), len(out))
	}
	copy(out[:], vals)
	return out, nil
}
