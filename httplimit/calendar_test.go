package httplimit

import (
	"strconv"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// At the end of a Tokyo month, RateLimit's t, Retry-After and
// X-RateLimit-Reset count to the boundary, 2027-02-28T15:00Z; past it the
// reset is the end of March there.
func TestACalendarMonthsHeadersEndAtTheBoundary(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	boundary := time.Date(2027, 2, 28, 15, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: boundary.Add(-time.Minute)}
	month := limiter.PerCalendar(2, &limiter.Calendar{Unit: limiter.Month, Location: tokyo})
	_, h, _ := setup(t, PolicyConfig{Classes: []Class{oneClass("default", month)}}, clk)
	get := func() *httptestRecorder { return do(h, "GET", "/a", "192.0.2.1:1", nil) }
	for i := 0; i < 2; i++ {
		if w := get(); w.Code != 200 || w.Header().Get("RateLimit") != `"default";r=`+strconv.Itoa(1-i)+`;t=60` {
			t.Fatalf("request %d: %d, RateLimit %q", i, w.Code, w.Header().Get("RateLimit"))
		}
	}
	w := get()
	if w.Code != 429 || w.Header().Get("Retry-After") != "60" || w.Header().Get("RateLimit") != `"default";r=0;t=60` ||
		w.Header().Get("X-RateLimit-Reset") != strconv.FormatInt(boundary.Unix(), 10) {
		t.Fatalf("a minute before the month's end: %d, Retry-After %q, RateLimit %q, X-RateLimit-Reset %q; want 429, 60, t=60, %d",
			w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"), w.Header().Get("X-RateLimit-Reset"), boundary.Unix())
	}
	clk.Advance(time.Minute)
	endOfMarch := time.Date(2027, 3, 31, 15, 0, 0, 0, time.UTC)
	w = get()
	if t31 := int64(endOfMarch.Sub(boundary) / time.Second); w.Code != 200 || w.Header().Get("RateLimit") != `"default";r=1;t=`+strconv.FormatInt(t31, 10) ||
		w.Header().Get("X-RateLimit-Reset") != strconv.FormatInt(endOfMarch.Unix(), 10) {
		t.Fatalf("at the boundary: %d, RateLimit %q, X-RateLimit-Reset %q; want 200, t=%d, %d", w.Code, w.Header().Get("RateLimit"), w.Header().Get("X-RateLimit-Reset"), t31, endOfMarch.Unix())
	}
	if p := w.Header().Get("RateLimit-Policy"); p != `"default";q=2;w=`+strconv.FormatInt(int64(limiter.Month.Longest()/time.Second), 10) {
		t.Fatalf("RateLimit-Policy %q, want w the longest month", p)
	}
}
