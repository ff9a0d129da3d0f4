package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// redisLog routes the Redis client's own log lines (redis.SetLogger) into
// serve's slog handler, so that --log-format json stays JSON. The client
// may say the same thing on every failed dial: a line of one format is
// written at most once per interval, with the count of those left out.
// Safe for concurrent use.
type redisLog struct {
	logger   *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	lines map[string]*redisLine // by format: a bounded set of literals
}

type redisLine struct {
	last    time.Time
	dropped int
}

func newRedisLog(logger *slog.Logger, interval time.Duration) *redisLog {
	return &redisLog{logger: logger, interval: interval, now: time.Now, lines: map[string]*redisLine{}}
}

// Printf implements the Redis client's logging interface.
func (r *redisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !r.logger.Enabled(ctx, slog.LevelWarn) {
		return
	}
	now := r.now()
	r.mu.Lock()
	l := r.lines[format]
	if l == nil {
		l = &redisLine{}
		r.lines[format] = l
	}
	if !l.last.IsZero() && now.Sub(l.last) < r.interval {
		l.dropped++
		r.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	r.mu.Unlock()
	attrs := []slog.Attr{slog.String("component", "redis-client")}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("repeated", dropped))
	}
	msg := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	r.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}
