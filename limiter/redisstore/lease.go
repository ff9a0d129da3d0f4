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
	kindAcquire = 0
	kindRelease = 1
)

// leaseScripts are lua/concurrency.lua's calls: acquire and release alone,
// and the batch of many calls in one (reserve_batch.go).
var leaseScripts = sync.OnceValues(func() (*opScripts, error) {
	src, err := luaFiles.ReadFile("lua/concurrency.lua")
	if err != nil {
		return nil, fmt.Errorf("redis store: concurrency script: %w", err)
	}
	acquire, release, batch := leaseSources(string(src), redisClock)
	a, r, b := newScript(acquire), newScript(release), newScript(batch)
	return &opScripts{single: [2]*script{kindAcquire: &a, kindRelease: &r}, batch: &b}, nil
})

// leaseSources assembles the acquire, release and batch scripts from
// lua/concurrency.lua's lease function, reading the clock once. A batch
// takes each call's key in KEYS and ARGV as setEncoder writes them, a set
// being limit and TTL (µs); it answers five integers a call (lease's four
// and 0).
func leaseSources(body, clock string) (acquire, release, batch string) {
	head := "-- Code generated from lua/concurrency.lua by rl-exporter. DO NOT EDIT.\n" +
		"local clock = " + clock + "\n" +
		"local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n" + body
	acquire = head + "return lease(KEYS[1], 0, ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))\n"
	release = head + "return lease(KEYS[1], 1, ARGV[1], 0, 0)\n"
	batch = head + `local n, nsets = tonumber(ARGV[1]), tonumber(ARGV[2])
local sets, a = {}, 3
for s = 1, nsets do
  sets[s] = {tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])}
  a = a + 1 + tonumber(ARGV[a])
end
local out = {}
for i = 1, n do
  local set = sets[tonumber(ARGV[a + 1]) + 1]
  local r = lease(KEYS[i], tonumber(ARGV[a]), ARGV[a + 3], set[1], set[2])
  local o = (i - 1) * 5
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = r[1], r[2], r[3], r[4], 0
  a = a + 4
end
return out
`
	return acquire, release, batch
}

// goRedisScript reads lua/<name>.lua once; go-redis's Script sends EVALSHA
// and falls back to EVAL on NOSCRIPT.
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
