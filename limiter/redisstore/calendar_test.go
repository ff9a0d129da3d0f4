package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func loadZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("time zone %s: %v", name, err)
	}
	return loc
}

func mustUTC(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// calendarAt runs lim's fixed_window script (with testClock) on Redis for
// one decision: the caller's arguments found at caller, Redis's clock at at.
func calendarAt(t *testing.T, store *Store, key string, lim limiter.Limit, caller, at time.Time) (limiter.Decision, error) {
	t.Helper()
	single, _ := scriptsAt(t, limiter.FixedWindow)
	args := []any{}
	for _, v := range limiter.SpecOf(limiter.FixedWindow).AppendParamsAt(nil, key, lim, caller) {
		args = append(args, v)
	}
	us := at.UnixMicro()
	args = append(args, int64(1), int64(limiter.ModeConsume), us/1_000_000, us%1_000_000)
	reply, err := single.Run(context.Background(), store.client, store.Keys(key, limiter.FixedWindow), args...).Result()
	if err != nil {
		return limiter.Decision{}, err
	}
	r := &request{limit: lim.Quota(), cost: 1, mode: limiter.ModeConsume}
	return r.answer(decodeReply(reply))
}

// TestGoalCalendarMonthOnRedis: on Redis's clock, a Tokyo month that
// starts 2027-01-31T15:00Z ends 2027-02-28T15:00Z, and a New York day
// across the March DST change is 23 hours: the decisions' ResetAfter and
// RetryAfter end at the boundary to the µs, as on the memory store.
func TestGoalCalendarMonthOnRedis(t *testing.T) {
	_, store := singleStore(t)
	tokyo, ny := loadZone(t, "Asia/Tokyo"), loadZone(t, "America/New_York")
	cases := []struct {
		name       string
		cal        *limiter.Calendar
		start, end string
		next       time.Duration // the next window's length
	}{
		{"a Tokyo month of 28 days", &limiter.Calendar{Unit: limiter.Month, Location: tokyo}, "2027-01-31T15:00:00Z", "2027-02-28T15:00:00Z", 31 * 24 * time.Hour},
		{"a New York day of 23 hours", &limiter.Calendar{Unit: limiter.Day, Location: ny}, "2027-03-14T05:00:00Z", "2027-03-15T04:00:00Z", 24 * time.Hour},
		{"a New York day of 25 hours", &limiter.Calendar{Unit: limiter.Day, Location: ny}, "2027-11-07T04:00:00Z", "2027-11-08T05:00:00Z", 24 * time.Hour},
		{"February of a leap year", &limiter.Calendar{Unit: limiter.Month}, "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", 31 * 24 * time.Hour},
		{"a leap year", &limiter.Calendar{Unit: limiter.Year}, "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z", 365 * 24 * time.Hour},
		{"a week from Monday", &limiter.Calendar{Unit: limiter.Week, WeekStart: time.Monday}, "2027-03-08T00:00:00Z", "2027-03-15T00:00:00Z", 7 * 24 * time.Hour},
		{"a week from Sunday", &limiter.Calendar{Unit: limiter.Week}, "2027-03-14T00:00:00Z", "2027-03-21T00:00:00Z", 7 * 24 * time.Hour},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lim := limiter.PerCalendar(2, tc.cal)
			start, end := mustUTC(t, tc.start), mustUTC(t, tc.end)
			key := fmt.Sprintf("calendar:%d", i)
			steps := []struct {
				at      time.Time
				allowed bool
				reset   time.Duration
			}{
				{start, true, end.Sub(start)},
				{start.Add(end.Sub(start) / 2), true, end.Sub(start) / 2},
				{end.Add(-time.Microsecond), false, time.Microsecond},
				{end, true, tc.next},
			}
			for n, s := range steps {
				d, err := calendarAt(t, store, key, lim, s.at, s.at)
				if err != nil {
					t.Fatalf("step %d: %v", n, err)
				}
				if d.Allowed != s.allowed || d.ResetAfter != s.reset || (!s.allowed && d.RetryAfter != s.reset) {
					t.Fatalf("step %d at %s: %+v, want allowed %v, reset after %s", n, s.at.UTC().Format(time.RFC3339Nano), d, s.allowed, s.reset)
				}
			}
		})
	}
}

// A caller whose clock is an hour ahead of Redis's, already in the next
// day, still counts in the day holding Redis's clock; one more than a
// window off gets an error, not a count in the wrong window.
func TestCalendarCountsOnRedisClock(t *testing.T) {
	_, store := singleStore(t)
	lim := limiter.PerCalendar(1, &limiter.Calendar{Unit: limiter.Day, Location: loadZone(t, "America/New_York")})
	redisNow := mustUTC(t, "2027-03-15T03:30:00Z") // 23:30 on the 23-hour day
	d, err := calendarAt(t, store, "skew:ahead", lim, redisNow.Add(time.Hour), redisNow)
	if err != nil || !d.Allowed || d.ResetAfter != 30*time.Minute {
		t.Fatalf("caller an hour ahead: %+v, %v; want allowed, reset after 30m (Redis's day)", d, err)
	}
	d, err = calendarAt(t, store, "skew:ahead", lim, redisNow.Add(-time.Hour), redisNow)
	if err != nil || d.Allowed || d.RetryAfter != 30*time.Minute {
		t.Fatalf("a second caller an hour behind: %+v, %v; want refused by the same count until Redis's midnight", d, err)
	}
	_, err = calendarAt(t, store, "skew:far", lim, redisNow.Add(72*time.Hour), redisNow)
	if err == nil || !strings.Contains(err.Error(), "more than a window off") {
		t.Fatalf("a caller three days ahead: %v, want the script's error", err)
	}
}

// Through the store on Redis's real TIME, alone and in batches: a Tokyo
// month admits its rate exactly, and resets at the end of this month
// there. A month that ends during an attempt starts another.
func TestCalendarOnTheStore(t *testing.T) {
	_, store := singleStore(t)
	cal := &limiter.Calendar{Unit: limiter.Month, Location: loadZone(t, "Asia/Tokyo")}
	l, err := limiter.New(limiter.Config{Limit: limiter.PerCalendar(20, cal), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		var mu sync.Mutex
		var allowed int
		var resets []time.Duration
		var wg sync.WaitGroup
		before := time.Now()
		for range 50 {
			wg.Go(func() {
				d, err := l.Allow(ctx, fmt.Sprint("tenant:", attempt))
				if err != nil || d.Failure != limiter.FailureNone {
					t.Errorf("%+v, %v", d, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if d.Allowed {
					allowed++
				}
				resets = append(resets, d.ResetAfter)
			})
		}
		wg.Wait()
		after := time.Now()
		_, end := cal.Window(before)
		if _, e := cal.Window(after); !e.Equal(end) && attempt == 0 {
			continue
		}
		if allowed != 20 {
			t.Fatalf("admitted %d of 50, want the month's 20", allowed)
		}
		// Redis's clock is this machine's: the reset is the month's end, as
		// far as the time the decisions took.
		slack := after.Sub(before) + time.Second
		for _, r := range resets {
			if want := end.Sub(before); r > want+time.Second || r < want-slack {
				t.Fatalf("ResetAfter %s, want the end of the month in Tokyo, %s from the start of the test (within %s)", r, want, slack)
			}
		}
		return
	}
}

// A reservation on a calendar limit is refunded into the calendar window
// it was charged in, and its excess is taken from the window of now.
func TestCalendarReservationsSettleInTheirWindow(t *testing.T) {
	_, store := singleStore(t)
	ctx := context.Background()
	for _, alg := range []struct {
		name string
		cal  *limiter.Calendar
	}{{"day", &limiter.Calendar{Unit: limiter.Day, Location: loadZone(t, "Asia/Tokyo")}}, {"month", &limiter.Calendar{Unit: limiter.Month}}} {
		t.Run(alg.name, func(t *testing.T) {
			l, err := limiter.New(limiter.Config{Limit: limiter.PerCalendar(100, alg.cal), Store: store, FailPolicy: limiter.FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			key := "calendar-reserve:" + alg.name
			r, d, err := l.Reserve(ctx, key, 50)
			if err != nil || !d.Allowed {
				t.Fatalf("reserve: %+v, %v", d, err)
			}
			if _, err := l.Commit(ctx, r, 10); err != nil {
				t.Fatal(err)
			}
			if p, err := l.PeekN(ctx, key, 1); err != nil || p.Remaining != 90 {
				t.Fatalf("after a reservation of 50 settled at 10: remaining %d (%v), want 90", p.Remaining, err)
			}
			r, _, _ = l.Reserve(ctx, key, 10)
			if _, err := l.Commit(ctx, r, 30); err != nil {
				t.Fatal(err)
			}
			if p, _ := l.PeekN(ctx, key, 1); p.Remaining != 60 {
				t.Fatalf("after a reservation of 10 settled at 30: remaining %d, want 60", p.Remaining)
			}
		})
	}
}
