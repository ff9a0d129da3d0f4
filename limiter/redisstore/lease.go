package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// leaseScript is lua/concurrency.lua.
var leaseScript = goRedisScript("concurrency")

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

// AcquireLease implements limiter.Leaser: one script call.
func (s *Store) AcquireLease(ctx context.Context, key string, lim limiter.LeaseLimit, id string, timeout time.Duration) (limiter.LeaseDecision, error) {
	if err := lim.Validate(); err != nil {
		return limiter.LeaseDecision{}, fmt.Errorf("redis store: concurrency: %w", err)
	}
	r, err := s.runLease(ctx, timeout, key, "acquire", id, lim.Limit, lim.TTL.Microseconds())
	if err != nil {
		return limiter.LeaseDecision{}, err
	}
	d := limiter.LeaseDecision{Allowed: r[0] == 1, Limit: lim.Limit, InFlight: r[1], Expired: r[2]}
	if !d.Allowed {
		d.RetryAfter = min(limiter.LeaseRetryAfter, time.Duration(max(r[3], 0))*time.Microsecond)
	}
	return d, nil
}

// ReleaseLease implements limiter.Leaser: one script call.
func (s *Store) ReleaseLease(ctx context.Context, key string, id string, timeout time.Duration) (int64, error) {
	r, err := s.runLease(ctx, timeout, key, "release", id, 0, 0)
	if err != nil {
		return 0, err
	}
	if r[0] != 1 {
		return r[2], fmt.Errorf("redis store: lease %s: %w", id, limiter.ErrLeaseUnknown)
	}
	return r[2], nil
}

func (s *Store) runLease(ctx context.Context, timeout time.Duration, key string, args ...any) ([4]int64, error) {
	var out [4]int64
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	script, err := leaseScript()
	if err != nil {
		return out, err
	}
	lk := s.LeaseKey(key)
	vals, err := script.Run(ctx, s.client, []string{lk}, args...).Int64Slice()
	if err != nil {
		s.noteError(err)
		return out, fmt.Errorf("redis concurrency script on %s: %w", lk, err)
	}
	if len(vals) != len(out) {
		return out, fmt.Errorf("redis concurrency script on %s: %d values in the reply, want %d", lk, len(vals), len(out))
	}
	copy(out[:], vals)
	return out, nil
}
