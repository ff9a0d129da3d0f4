// Package summarylog writes an error that every request may repeat (a
// client's, or a misconfiguration's), or a failure that every call to a
// store down repeats, as a summary: the first occurrence at
// once, then at most one line per interval counting the occurrences since
// the last line, so that a flood of them costs one line per interval.
package summarylog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Line is one summarised error line. Its zero value is not usable; make
// it with New. Safe for concurrent use.
type Line struct {
	logger   *slog.Logger
	level    slog.Level
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	lastLine time.Time
	count    int64 // occurrences not logged yet
	sum      int64 // LogSum's amounts of those occurrences
}

// New returns a Line writing errors to logger at most once per interval,
// reading the time from now (time.Now when nil).
func New(logger *slog.Logger, interval time.Duration, now func() time.Time) *Line {
	return NewAt(logger, slog.LevelError, interval, now)
}

// NewAt is New writing at level (a warning for what heals on its own).
func NewAt(logger *slog.Logger, level slog.Level, interval time.Duration, now func() time.Time) *Line {
	if now == nil {
		now = time.Now
	}
	return &Line{logger: logger, level: level, interval: interval, now: now}
}

// Log counts one occurrence and, when interval has passed since the last
// line (or there was none), writes msg at the Line's level with attrs (those
// of this occurrence), occurrences=N (the ones counted since the last line,
// this one included) and, after the first line, over=<time since the last
// line>. Occurrences are not counted while the logger discards that level.
func (l *Line) Log(ctx context.Context, msg string, attrs []slog.Attr) {
	l.log(ctx, msg, attrs, "", 0)
}

// LogSum is Log for an occurrence that costs amount (units, bytes): its
// line also writes key=<the sum over the occurrences it counts>.
func (l *Line) LogSum(ctx context.Context, msg string, attrs []slog.Attr, key string, amount int64) {
	l.log(ctx, msg, attrs, key, amount)
}

func (l *Line) log(ctx context.Context, msg string, attrs []slog.Attr, key string, amount int64) {
	if !l.logger.Enabled(ctx, l.level) {
		return
	}
	now := l.now()
	l.mu.Lock()
	l.count++
	l.sum += amount
	if !l.lastLine.IsZero() && now.Sub(l.lastLine) < l.interval {
		l.mu.Unlock()
		return
	}
	count, sum, since := l.count, l.sum, l.lastLine
	l.count, l.sum, l.lastLine = 0, 0, now
	l.mu.Unlock()
	if key != "" {
		attrs = append(attrs, slog.Int64(key, sum))
	}
	attrs = append(attrs, slog.Int64("occurrences", count))
	if !since.IsZero() {
		attrs = append(attrs, slog.Duration("over", now.Sub(since).Round(time.Millisecond)))
	}
	l.logger.LogAttrs(ctx, l.level, msg, attrs...)
}
