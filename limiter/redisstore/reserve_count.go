package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

var openScript = luaScript("open_reservations")

// OpenReservations implements limiter.ReservationCounter: one read-only
// script call counting the records of the key's book not past their hold
// on Redis's clock. Safe for concurrent use.
func (s *Store) OpenReservations(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) (int64, error) {
	if err := checkCall(limiter.SpecOf(lim.Algorithm), lim, 1); err != nil {
		return 0, err
	}
	sc, err := openScript()
	if err != nil {
		return 0, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	open := s.baseKey(key, lim.Algorithm) + bookSuffix
	n, err := sc.Run(ctx, s.client, []string{open}).Int64()
	if err != nil {
		s.noteError(err)
		return 0, fmt.Errorf("redis open reservations script on %s: %w", open, err)
	}
	return n, nil
}
