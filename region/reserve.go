package region

import (
	"context"
	"fmt"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// Strict mode holds reservations on the key's home region, record and
// state in one script there, so a reservation taken in one region settles
// from any and is counted there. ModeLocal's store is the Redis store, a
// ReservationCounter itself. Async and hybrid hold none: their counts are
// per-region slots merged by max(), and a settle's adjustment to another
// region's slot would be overwritten by the next merge; a Limiter on them
// reports Reserves() false.
var _ limiter.ReservationCounter = (*strictStore)(nil)

// Reserve implements limiter.Reserver on key's home region.
func (s *strictStore) Reserve(ctx context.Context, key string, lim limiter.Limit, r limiter.ReserveRequest, timeout time.Duration) (limiter.Decision, error) {
	home := s.homeOf(key)
	d, err := s.call(home, func(st *redisstore.Store) (limiter.Decision, error) {
		return st.Reserve(ctx, key, lim, r, timeout)
	})
	if err != nil {
		return d, fmt.Errorf("region %s: %w", home, err)
	}
	return d, nil
}

// Settle implements limiter.Reserver on key's home region.
func (s *strictStore) Settle(ctx context.Context, key string, lim limiter.Limit, id string, actual int64, timeout time.Duration) (limiter.Settlement, error) {
	home := s.homeOf(key)
	var st limiter.Settlement
	_, err := s.call(home, func(rs *redisstore.Store) (limiter.Decision, error) {
		var err error
		st, err = rs.Settle(ctx, key, lim, id, actual, timeout)
		return limiter.Decision{}, err
	})
	if err != nil {
		return st, fmt.Errorf("region %s: %w", home, err)
	}
	return st, nil
}

// Charge implements limiter.Reserver on key's home region, where the
// reservations of key settle.
func (s *strictStore) Charge(ctx context.Context, key string, lim limiter.Limit, cost int64, timeout time.Duration) (limiter.Settlement, error) {
	home := s.homeOf(key)
	var st limiter.Settlement
	_, err := s.call(home, func(rs *redisstore.Store) (limiter.Decision, error) {
		var err error
		st, err = rs.Charge(ctx, key, lim, cost, timeout)
		return limiter.Decision{}, err
	})
	if err != nil {
		return st, fmt.Errorf("region %s: %w", home, err)
	}
	return st, nil
}

// OpenReservations implements limiter.ReservationCounter on key's home region.
func (s *strictStore) OpenReservations(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) (int64, error) {
	home := s.homeOf(key)
	var n int64
	_, err := s.call(home, func(rs *redisstore.Store) (limiter.Decision, error) {
		var err error
		n, err = rs.OpenReservations(ctx, key, lim, timeout)
		return limiter.Decision{}, err
	})
	if err != nil {
		return 0, fmt.Errorf("region %s: %w", home, err)
	}
	return n, nil
}

// Renew implements limiter.Reserver on key's home region, where its
// reservations are held.
func (s *strictStore) Renew(ctx context.Context, key string, lim limiter.Limit, id string, hold time.Duration, timeout time.Duration) (limiter.Renewal, error) {
	home := s.homeOf(key)
	var rn limiter.Renewal
	_, err := s.call(home, func(rs *redisstore.Store) (limiter.Decision, error) {
		var err error
		rn, err = rs.Renew(ctx, key, lim, id, hold, timeout)
		return limiter.Decision{}, err
	})
	if err != nil {
		return rn, fmt.Errorf("region %s: %w", home, err)
	}
	return rn, nil
}
