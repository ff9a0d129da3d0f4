package httplimit

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the log lines containing substr.
func (s *syncBuffer) lines(substr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// A request whose cost no window admits is refused every time; its error
// line is written for the first one, then once per LogInterval with the
// occurrences since, not once per request.
func TestACostNoWindowAdmitsIsLoggedOnceThenOncePerInterval(t *testing.T) {
	clk := newClock()
	p, err := NewPolicy(PolicyConfig{
		Store:   limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now}),
		Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 5))},
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	m, err := New(Config{
		Policy: p, Now: clk.Now, LogInterval: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Cost:   func(*http.Request) int64 { return 6 }, // above the quota of 5
	})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	const msg = "request cost cannot be admitted"

	const requests = 100
	for i := range requests {
		if w := do(h, "GET", "/x", "192.0.2.1:5000", nil); w.Code != http.StatusTooManyRequests {
			t.Fatalf("request %d: status %d, want 429", i, w.Code)
		}
		clk.Advance(time.Second / 2) // 50 s in all: within the interval
	}
	got := logs.lines(msg)
	if len(got) != 1 || !strings.Contains(got[0], "occurrences=1") || !strings.Contains(got[0], "level=ERROR") {
		t.Fatalf("%d lines for %d requests within the interval, want 1 error line with occurrences=1:\n%s", len(got), requests, strings.Join(got, "\n"))
	}

	// Past the interval, the next one writes a summary of the 100 since.
	clk.Advance(10 * time.Second)
	do(h, "GET", "/x", "192.0.2.1:5000", nil)
	got = logs.lines(msg)
	if len(got) != 2 || !strings.Contains(got[1], "occurrences=100") || !strings.Contains(got[1], "over=1m0s") {
		t.Fatalf("after the interval: %d lines, want a second one with occurrences=100 over=1m0s:\n%s", len(got), strings.Join(got, "\n"))
	}
	// And then one line per interval, however many requests: the first of
	// each interval writes it, counting itself and the 9 of the interval
	// before.
	for range 3 {
		clk.Advance(time.Minute)
		for range 10 {
			do(h, "GET", "/x", "192.0.2.1:5000", nil)
			clk.Advance(time.Second)
		}
	}
	if got = logs.lines(msg); len(got) != 5 || !strings.Contains(got[4], "occurrences=10") {
		t.Fatalf("three intervals later: %d lines, want 5, the last with occurrences=10:\n%s", len(got), strings.Join(got, "\n"))
	}
}
