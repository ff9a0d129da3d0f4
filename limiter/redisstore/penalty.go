package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

//go:embed lua/penalty.lua
var penaltySource string

var strikeScript = NewScript(penaltySource)

// penaltyKeys are key's strike counter and box, under one hash tag.
func (s *Store) penaltyKeys(key string) []string {
	base := s.baseKey(key, "penalty")
	return []string{base + ":strikes", base}
}

// Penalized implements limiter.PenaltyStore: the box's PTTL, on Redis's clock.
func (s *Store) Penalized(ctx context.Context, key string, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	box := s.penaltyKeys(key)[1]
	ms, err := s.client.PTTL(ctx, box).Result()
	if err != nil {
		s.noteError(err)
		return 0, fmt.Errorf("redis PTTL %s: %w", box, err)
	}
	// go-redis reports "no key" (-2) and "no expiry" (-1) as negative durations.
	return max(ms, 0), nil
}

// Strike implements limiter.PenaltyStore with one script, lua/penalty.lua.
func (s *Store) Strike(ctx context.Context, key string, p limiter.Penalty, timeout time.Duration) (time.Duration, error) {
	if !p.Enabled() {
		return 0, nil
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	keys := s.penaltyKeys(key)
	ms, err := strikeScript.Run(ctx, s.client, keys, p.After, p.Within.Milliseconds(), p.For.Milliseconds()).Int64()
	if err != nil {
		s.noteError(err)
		return 0, fmt.Errorf("redis penalty strike %s: %w", keys[1], err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Lift implements limiter.PenaltyStore.
func (s *Store) Lift(ctx context.Context, key string, timeout time.Duration) error {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	keys := s.penaltyKeys(key)
	if err := s.client.Del(ctx, keys...).Err(); err != nil {
		s.noteError(err)
		return fmt.Errorf("redis DEL %s: %w", keys[1], err)
	}
	return nil
}

func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {}
}
