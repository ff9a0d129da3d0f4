package httplimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// The usage API's reset is the instant X-RateLimit-Reset names, to the second, for a window that
// ends on a whole second as for a bucket that refills at any instant: a clock read between whole
// microseconds once put the header a second past the usage answer's.
func TestUsagesResetIsTheSecondXRateLimitResetNames(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	boundary := time.Date(2027, 2, 28, 15, 0, 0, 0, time.UTC)
	for name, lim := range map[string]limiter.Limit{
		"a Tokyo calendar month": limiter.PerCalendar(2000, &limiter.Calendar{Unit: limiter.Month, Location: tokyo}),
		"a token bucket":         limiter.PerMinute(limiter.TokenBucket, 7),
	} {
		t.Run(name, func(t *testing.T) {
			// Three hours before the month's end, 123456789 ns into the second.
			clk := &fakeClock{t: boundary.Add(-3*time.Hour + 123456789*time.Nanosecond)}
			store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clk.Now})
			m, h, _ := setup(t, PolicyConfig{Store: store, Classes: []Class{oneClass("default", lim)}}, clk)
			w := do(h, "GET", "/a", "192.0.2.1:1", nil)
			header, err := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
			if err != nil {
				t.Fatalf("X-RateLimit-Reset %q: %v", w.Header().Get("X-RateLimit-Reset"), err)
			}
			r, err := m.Usage(context.Background(), "ip:192.0.2.1", "")
			if err != nil {
				t.Fatal(err)
			}
			u := findUsage(t, r, "default", "/")
			if got := u.Reset; !got.Equal(time.Unix(header, 0)) {
				t.Errorf("usage reset %s, X-RateLimit-Reset %s: want the same instant", got.UTC().Format(time.RFC3339Nano), time.Unix(header, 0).UTC().Format(time.RFC3339Nano))
			}
			if name == "a Tokyo calendar month" && header != boundary.Unix() {
				t.Errorf("X-RateLimit-Reset %s, want the month's end %s", time.Unix(header, 0).UTC(), boundary)
			}
		})
	}
}
