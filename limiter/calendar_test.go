package limiter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("time zone %s: %v", name, err)
	}
	return loc
}

func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCalendarWindows holds the windows to the calendar of their zone:
// days of 23 and 25 hours across DST, months of 28 to 31 days, a leap day,
// weeks starting on the configured day.
func TestCalendarWindows(t *testing.T) {
	ny, tokyo, havana := zone(t, "America/New_York"), zone(t, "Asia/Tokyo"), zone(t, "America/Havana")
	cases := []struct {
		name       string
		cal        *limiter.Calendar
		at         string
		start, end string
		length     time.Duration
	}{
		{"a New York day across the March DST change", &limiter.Calendar{Unit: limiter.Day, Location: ny},
			"2027-03-14T12:00:00Z", "2027-03-14T05:00:00Z", "2027-03-15T04:00:00Z", 23 * time.Hour},
		{"a New York day across the November DST change", &limiter.Calendar{Unit: limiter.Day, Location: ny},
			"2027-11-07T12:00:00Z", "2027-11-07T04:00:00Z", "2027-11-08T05:00:00Z", 25 * time.Hour},
		{"a New York day before the change", &limiter.Calendar{Unit: limiter.Day, Location: ny},
			"2027-03-14T04:59:59Z", "2027-03-13T05:00:00Z", "2027-03-14T05:00:00Z", 24 * time.Hour},
		{"a Tokyo month of 28 days", &limiter.Calendar{Unit: limiter.Month, Location: tokyo},
			"2027-01-31T15:00:00Z", "2027-01-31T15:00:00Z", "2027-02-28T15:00:00Z", 28 * 24 * time.Hour},
		{"a Tokyo month of 31 days", &limiter.Calendar{Unit: limiter.Month, Location: tokyo},
			"2027-01-31T14:59:59Z", "2026-12-31T15:00:00Z", "2027-01-31T15:00:00Z", 31 * 24 * time.Hour},
		{"a month with a leap day", &limiter.Calendar{Unit: limiter.Month},
			"2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", 29 * 24 * time.Hour},
		{"a leap year", &limiter.Calendar{Unit: limiter.Year},
			"2028-02-29T12:00:00Z", "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z", 366 * 24 * time.Hour},
		{"a year in Tokyo", &limiter.Calendar{Unit: limiter.Year, Location: tokyo},
			"2027-06-01T00:00:00Z", "2026-12-31T15:00:00Z", "2027-12-31T15:00:00Z", 365 * 24 * time.Hour},
		{"a week from Monday", &limiter.Calendar{Unit: limiter.Week, WeekStart: time.Monday},
			"2027-03-14T12:00:00Z", "2027-03-08T00:00:00Z", "2027-03-15T00:00:00Z", 7 * 24 * time.Hour},
		{"a week from Sunday", &limiter.Calendar{Unit: limiter.Week, WeekStart: time.Sunday},
			"2027-03-14T12:00:00Z", "2027-03-14T00:00:00Z", "2027-03-21T00:00:00Z", 7 * 24 * time.Hour},
		{"a New York week from Sunday across DST", &limiter.Calendar{Unit: limiter.Week, Location: ny},
			"2027-03-14T12:00:00Z", "2027-03-14T05:00:00Z", "2027-03-21T04:00:00Z", 7*24*time.Hour - time.Hour},
		// Havana's clocks skip midnight in March and repeat its first hour in November.
		{"a day whose midnight is skipped", &limiter.Calendar{Unit: limiter.Day, Location: havana},
			"2027-03-14T12:00:00Z", "2027-03-14T05:00:00Z", "2027-03-15T04:00:00Z", 23 * time.Hour},
		{"a day whose first hour repeats", &limiter.Calendar{Unit: limiter.Day, Location: havana},
			"2027-11-07T12:00:00Z", "2027-11-07T04:00:00Z", "2027-11-08T05:00:00Z", 25 * time.Hour},
		// Amman repeated its first hour east of UTC, where time.Date gives the second midnight.
		{"a day whose first hour repeats east of UTC", &limiter.Calendar{Unit: limiter.Day, Location: zone(t, "Asia/Amman")},
			"2021-10-28T21:30:00Z", "2021-10-28T21:00:00Z", "2021-10-29T22:00:00Z", 25 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start, end := tc.cal.Window(utc(t, tc.at))
			if !start.Equal(utc(t, tc.start)) || !end.Equal(utc(t, tc.end)) {
				t.Fatalf("window at %s = [%s, %s), want [%s, %s)", tc.at, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), tc.start, tc.end)
			}
			if end.Sub(start) != tc.length {
				t.Fatalf("window is %s long, want %s", end.Sub(start), tc.length)
			}
			if end.Sub(start) > tc.cal.Unit.Longest() {
				t.Fatalf("window of %s is longer than the unit's longest, %s", end.Sub(start), tc.cal.Unit.Longest())
			}
			// Its last µs and the next window's first agree.
			if s, _ := tc.cal.Window(end.Add(-time.Microsecond)); !s.Equal(start) {
				t.Fatalf("the last µs of the window is in the window from %s", s)
			}
			if s, _ := tc.cal.Window(end); !s.Equal(end) {
				t.Fatalf("the window's end is in the window from %s, want the next one", s)
			}
		})
	}
}

// A fixed window on a calendar admits Rate per calendar window, and its
// Decision's ResetAfter and RetryAfter end exactly at the boundary, in the
// zone: the March day in New York is 23 hours long.
func TestCalendarFixedWindowOnTheMemoryStore(t *testing.T) {
	ny, tokyo := zone(t, "America/New_York"), zone(t, "Asia/Tokyo")
	cases := []struct {
		name      string
		cal       *limiter.Calendar
		first     string // a window's first µs
		end       string // its end, the next window's first µs
		nextReset time.Duration
	}{
		{"a New York day of 23 hours", &limiter.Calendar{Unit: limiter.Day, Location: ny},
			"2027-03-14T05:00:00Z", "2027-03-15T04:00:00Z", 24 * time.Hour},
		{"a New York day of 25 hours", &limiter.Calendar{Unit: limiter.Day, Location: ny},
			"2027-11-07T04:00:00Z", "2027-11-08T05:00:00Z", 24 * time.Hour},
		{"a Tokyo month of 28 days", &limiter.Calendar{Unit: limiter.Month, Location: tokyo},
			"2027-01-31T15:00:00Z", "2027-02-28T15:00:00Z", 31 * 24 * time.Hour},
		{"February of a leap year", &limiter.Calendar{Unit: limiter.Month},
			"2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", 31 * 24 * time.Hour},
		{"a leap year", &limiter.Calendar{Unit: limiter.Year},
			"2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z", 365 * 24 * time.Hour},
		{"a week from Monday", &limiter.Calendar{Unit: limiter.Week, WeekStart: time.Monday},
			"2027-03-08T00:00:00Z", "2027-03-15T00:00:00Z", 7 * 24 * time.Hour},
		{"a week from Sunday", &limiter.Calendar{Unit: limiter.Week},
			"2027-03-14T00:00:00Z", "2027-03-21T00:00:00Z", 7 * 24 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			at := func(v time.Time) { clock.Set(v.Sub(epoch)) }
			l, err := limiter.New(limiter.Config{
				Limit: limiter.PerCalendar(3, tc.cal),
				Store: limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now}),
			})
			if err != nil {
				t.Fatal(err)
			}
			first, end := utc(t, tc.first), utc(t, tc.end)
			ctx := context.Background()
			allow := func(key string) limiter.Decision {
				t.Helper()
				d, err := l.Allow(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			at(first)
			if d := allow("fresh"); !d.Allowed || d.ResetAfter != end.Sub(first) {
				t.Fatalf("first µs of the window: %+v, want allowed with ResetAfter %s", d, end.Sub(first))
			}
			mid := first.Add(end.Sub(first) / 2)
			at(mid)
			for i := 0; i < 3; i++ {
				if d := allow("k"); !d.Allowed || d.Remaining != int64(2-i) {
					t.Fatalf("request %d: %+v", i, d)
				}
			}
			last := end.Add(-time.Microsecond)
			at(last)
			d := allow("k")
			if d.Allowed || d.RetryAfter != time.Microsecond || d.ResetAfter != time.Microsecond {
				t.Fatalf("last µs of the window: %+v, want refused, retry and reset after 1µs", d)
			}
			at(end)
			if d := allow("k"); !d.Allowed || d.Remaining != 2 || d.ResetAfter != tc.nextReset {
				t.Fatalf("first µs of the next window: %+v, want allowed, 2 left, reset after %s", d, tc.nextReset)
			}
			at(mid)
			if d := allow("k"); !d.Allowed || d.Remaining != 2 {
				t.Fatalf("back in the earlier window (the clock stepped back): %+v, want a fresh count", d)
			}
		})
	}
}

// TestCalendarLimitValidation names the field at fault.
func TestCalendarLimitValidation(t *testing.T) {
	month := &limiter.Calendar{Unit: limiter.Month}
	cases := []struct {
		name string
		lim  limiter.Limit
		want string
	}{
		{"a calendar on a bucket", limiter.Limit{Algorithm: limiter.TokenBucket, Rate: 10, Period: limiter.Month.Longest(), Calendar: month}, "calendar: "},
		{"a calendar on a sliding window", limiter.Limit{Algorithm: limiter.SlidingWindow, Rate: 10, Period: limiter.Month.Longest(), Calendar: month}, "calendar: "},
		{"an unknown unit", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: time.Hour, Calendar: &limiter.Calendar{Unit: "fortnight"}}, "calendar.unit: "},
		{"a week start on a month", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: limiter.Month.Longest(), Calendar: &limiter.Calendar{Unit: limiter.Month, WeekStart: time.Monday}}, "calendar.week_start: "},
		{"a week start out of range", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: limiter.Week.Longest(), Calendar: &limiter.Calendar{Unit: limiter.Week, WeekStart: 7}}, "calendar.week_start: "},
		{"a period other than the unit's", limiter.Limit{Algorithm: limiter.FixedWindow, Rate: 10, Period: 30 * 24 * time.Hour, Calendar: month}, "period: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.lim.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error starting %q", err, tc.want)
			}
		})
	}
	// A monthly token budget is a count, far beyond a bucket's exact range.
	if err := limiter.PerCalendar(1_000_000_000, month).Validate(); err != nil {
		t.Fatalf("a billion per month: %v", err)
	}
}

// TestCalendarWindowsTileTime walks ten years in zones with odd rules
// (half-hour DST, midnight skipped or repeated, a whole day skipped in
// Apia in 2011): every instant is in a window that starts at a local
// midnight (or where the clocks skip past it), ends where the next starts,
// and is no longer than the unit's longest.
func TestCalendarWindowsTileTime(t *testing.T) {
	zones := []string{"UTC", "America/New_York", "Asia/Tokyo", "America/Havana", "Asia/Amman", "Australia/Lord_Howe", "Pacific/Apia", "Europe/London", "America/Santiago"}
	for _, name := range zones {
		loc := zone(t, name)
		for _, u := range []limiter.CalendarUnit{limiter.Day, limiter.Week, limiter.Month, limiter.Year} {
			cal := &limiter.Calendar{Unit: u, Location: loc}
			if u == limiter.Week {
				cal.WeekStart = time.Wednesday
			}
			for at := time.Date(2011, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2021; at = at.Add(17*time.Hour + 13*time.Minute) {
				start, end := cal.Window(at)
				if start.After(at) || !end.After(at) || end.Sub(start) > u.Longest() {
					t.Fatalf("%s %s at %s: window [%s, %s)", name, u, at, start.In(loc), end.In(loc))
				}
				if next, _ := cal.Window(end); !next.Equal(end) {
					t.Fatalf("%s %s: the window after [%s, %s) starts at %s", name, u, start.In(loc), end.In(loc), next.In(loc))
				}
				if l := start.In(loc); l.Hour() != 0 && start.Add(-time.Nanosecond).In(loc).Day() == l.Day() {
					t.Fatalf("%s %s at %s: the window starts at %s, neither a midnight nor a skip past one", name, u, at, l)
				}
				if u == limiter.Week && start.In(loc).Weekday() != time.Wednesday && start.Add(-time.Nanosecond).In(loc).Weekday() != time.Tuesday {
					t.Fatalf("%s week from Wednesday at %s: starts %s", name, at, start.In(loc))
				}
			}
		}
	}
}

// A key's count in a month is not carried into a day that starts at the
// same instant (a reload from one period to the other): the memory store
// keeps the window's end with its start.
func TestCalendarWindowOfAnotherCalendarIsNotCarriedOver(t *testing.T) {
	clock := newFakeClock()
	clock.Set(utc(t, "2027-03-01T10:00:00Z").Sub(epoch))
	store := limiter.NewMemoryStore(limiter.MemoryConfig{Now: clock.Now})
	ctx := context.Background()
	month := limiter.PerCalendar(2, &limiter.Calendar{Unit: limiter.Month})
	day := limiter.PerCalendar(2, &limiter.Calendar{Unit: limiter.Day})
	for i := 0; i < 2; i++ {
		if d, err := store.Decide(ctx, "k", month, 1); err != nil || !d.Allowed {
			t.Fatalf("month request %d: %+v, %v", i, d, err)
		}
	}
	if d, err := store.Decide(ctx, "k", day, 1); err != nil || !d.Allowed || d.Remaining != 1 || d.ResetAfter != 14*time.Hour {
		t.Fatalf("the day's first request: %+v, %v; want allowed, 1 left, reset at midnight", d, err)
	}
}

// A reservation on a calendar limit is refunded into the calendar window
// it was charged in, and its excess is taken from the window of now.
func TestCalendarReservationsSettleInTheirWindowOnTheMemoryStore(t *testing.T) {
	ctx := context.Background()
	l, err := limiter.New(limiter.Config{Limit: limiter.PerCalendar(100, &limiter.Calendar{Unit: limiter.Month}), Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	r, d, err := l.Reserve(ctx, "k", 50)
	if err != nil || !d.Allowed {
		t.Fatalf("reserve: %+v, %v", d, err)
	}
	if _, err := l.Commit(ctx, r, 10); err != nil {
		t.Fatal(err)
	}
	if p, _ := l.PeekN(ctx, "k", 1); p.Remaining != 90 {
		t.Fatalf("after a reservation of 50 settled at 10: remaining %d, want 90", p.Remaining)
	}
	r, _, _ = l.Reserve(ctx, "k", 10)
	if _, err := l.Commit(ctx, r, 30); err != nil {
		t.Fatal(err)
	}
	if p, _ := l.PeekN(ctx, "k", 1); p.Remaining != 60 {
		t.Fatalf("after a reservation of 10 settled at 30: remaining %d, want 60", p.Remaining)
	}
}
