// Package summarylog writes an error that every request may repeat (a
// client's, or a misconfiguration's) as a summary: the first occurrence at
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
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	lastLine time.Time
	count    int64 // occurrences not logged yet
}

// New returns a Line writing to logger at most once per interval, reading
// the time from now (time.Now when nil).
func New(logger *slog.Logger, interval time.Duration, now func() time.Time) *Line {
	if now == nil {
		now = time.Now
	}
	return &Line{logger: logger, interval: interval, now: now}
}

// Log counts one occurrence and, when interval has passed since the last
// line (or there was none), writes msg at ERROR with attrs (those of this
// occurrence), occurrences=N (the ones counted since the last line, this
// one included) and, after the first line, over=<time since the last
// line>. Occurrences are not counted while the logger discards errors.
func (l *Line) Log(ctx context.Context, msg string, attrs []slog.Attr) {
	if !l.logger.Enabled(ctx, slog.LevelError) {
		return
	}
	now := l.now()
	l.mu.Lock()
	l.count++
	if !l.lastLine.IsZero() && now.Sub(l.lastLine) < l.interval {
		l.mu.Unlock()
		return
	}
	count, since := l.count, l.lastLine
	l.count, l.lastLine = 0, now
	l.mu.Unlock()
	attrs = append(attrs, slog.Int64("occurrences", count))
	if !since.IsZero() {
		attrs = append(attrs, slog.Duration("over", now.Sub(since).Round(time.Millisecond)))
	}
	l.logger.LogAttrs(ctx, slog.LevelError, msg, attrs...)
}
