package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

var leasePeekScript = luaScript("lease_peek")

// PeekLeases implements limiter.LeasePeeker: one read-only script call on the key's lease set,
// on Redis's clock. Safe for concurrent use.
func (s *Store) PeekLeases(ctx context.Context, key string, most int, timeout time.Duration) (limiter.LeaseUsage, error) {
	sc, err := leasePeekScript()
	if err != nil {
		return limiter.LeaseUsage{}, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	lk := s.LeaseKey(key)
	vals, err := sc.Run(ctx, s.client, []string{lk}, max(most, 0)).Int64Slice()
	if err != nil {
		s.noteError(err)
		return limiter.LeaseUsage{}, fmt.Errorf("redis lease peek script on %s: %w", lk, err)
	}
	if len(vals) == 0 {
		return limiter.LeaseUsage{}, fmt.Errorf("redis lease peek script on %s: an empty reply", lk)
	}
	u := limiter.LeaseUsage{InFlight: vals[0]}
	for _, v := range vals[1:] {
		u.ExpiresIn = append(u.ExpiresIn, time.Duration(v)*time.Microsecond)
	}
	return u, nil
}
