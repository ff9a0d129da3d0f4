package shares_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/shares"
)

// logBuffer is a JSON log written by several goroutines, read as lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes the lines written so far.
func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	text := b.buf.String()
	b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestSharesLogGiveBacksThatFailOnceAnInterval: with Redis down, every chunk a sweep gives back
// fails; the Store warns once, with its logger's attributes (the class), the units lost and
// the error, not once a chunk; the first failure after LogInterval writes a line counting the
// give-backs held back since the last, and their units.
func TestSharesLogGiveBacksThatFailOnceAnInterval(t *testing.T) {
	srv := redistest.Single(t)
	clk := newClock()
	var log logBuffer
	logger := slog.New(slog.NewJSONHandler(&log, nil)).With(slog.String("class", "api"))
	st := shares.NewManual(t, shares.Config{Store: newRedisStore(t, srv), Now: clk.Now, Interval: time.Second,
		Logger: logger, LogInterval: time.Minute})
	l := newLimiter(t, limiter.Limit{Algorithm: limiter.GCRA, Rate: 1000, Period: time.Hour}, st)
	// chunks takes a chunk of 8 units for each of keys: 3 plain decisions, then one from the
	// chunk, 7 units of it unused.
	chunks := func(keys ...string) {
		for _, k := range keys {
			for i := range 4 {
				if d, err := l.Allow(context.Background(), k); err != nil || !d.Allowed {
					t.Fatalf("%s decision %d: %+v, %v", k, i, d, err)
				}
			}
		}
	}
	failed := func(n int64) {
		t.Helper()
		eventually.True(t, 10*time.Second, fmt.Sprintf("%d give-backs failed", n), func() bool { return st.Stats().SettleErrors == n })
	}
	chunks("k0", "k1", "k2", "k3", "k4")
	srv.Stop()
	clk.Advance(time.Second)
	st.Sweep(clk.Now()) // every chunk is one interval old: given back, to a Redis that is gone
	failed(5)
	lines := log.lines(t)
	if len(lines) != 1 {
		t.Fatalf("5 give-backs failed within LogInterval: %d lines logged, want 1: %v", len(lines), lines)
	}
	first := lines[0]
	if first["level"] != "WARN" || first["class"] != "api" || first["store"] != "redis" || first["occurrences"] != 1.0 || first["units"] != 7.0 || first["error"] == nil {
		t.Errorf("the first failed give-back logged %v, want WARN with class api, store redis, occurrences 1, units 7 and the error", first)
	}

	srv.Start()
	eventually.True(t, 10*time.Second, "the shared store answers again", func() bool {
		_, err := l.Peek(context.Background(), "k5")
		return err == nil
	})
	chunks("k5", "k6")
	srv.Stop()
	clk.Advance(time.Minute)
	st.Sweep(clk.Now())
	failed(7)
	lines = log.lines(t)
	if len(lines) != 2 {
		t.Fatalf("7 give-backs failed over two LogIntervals: %d lines logged, want 2: %v", len(lines), lines)
	}
	// Written at the first failure past LogInterval, the last one held back for the next.
	if second := lines[1]; second["occurrences"] != 5.0 || second["units"] != 35.0 || second["over"] != float64(time.Minute) {
		t.Errorf("the second line %v, want occurrences 5 (the 4 held back and the first since), units 35, over 1m", second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.Close(ctx); err == nil || !strings.Contains(err.Error(), "7 chunks") {
		t.Errorf("Close after 7 failed give-backs: %v, want them named", err)
	}
}
