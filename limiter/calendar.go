package limiter

import (
	"fmt"
	"sync/atomic"
	"time"
)

// CalendarUnit is the length of a Calendar's windows.
type CalendarUnit string

const (
	Day   CalendarUnit = "day"   // from midnight to midnight: 23 to 25 hours across DST
	Week  CalendarUnit = "week"  // from midnight of Calendar.WeekStart
	Month CalendarUnit = "month" // from midnight of the 1st: 28 to 31 days
	Year  CalendarUnit = "year"  // from midnight of January 1st: 365 or 366 days
)

// ParseCalendarUnit returns the CalendarUnit named s ("day", "week", "month", "year").
func ParseCalendarUnit(s string) (CalendarUnit, error) {
	switch u := CalendarUnit(s); u {
	case Day, Week, Month, Year:
		return u, nil
	}
	return "", fmt.Errorf("unknown calendar unit %q (want day, week, month or year)", s)
}

// Longest is the unit's longest window (DST included), a calendar Limit's Period.
func (u CalendarUnit) Longest() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case Day:
		return day + time.Hour
	case Week:
		return 7*day + time.Hour
	case Month:
		return 31*day + time.Hour
	case Year:
		return 366*day + time.Hour
	}
	return 0
}

// Calendar puts fixed_window's windows on a zone's days, weeks, months or
// years (Limit.Calendar). Read-only once used, safe for concurrent use.
type Calendar struct {
	Unit      CalendarUnit
	Location  *time.Location // nil: UTC
	WeekStart time.Weekday   // the first day of a Week; Unit Week only
	last      atomic.Pointer[calendarWindows]
}

// calendarWindows are the starts (µs) before now's window, its, next, after.
type calendarWindows [4]int64

// PerCalendar returns a fixed_window Limit of rate per window of cal.
func PerCalendar(rate int64, cal *Calendar) Limit {
	return Limit{Algorithm: FixedWindow, Rate: rate, Period: cal.Unit.Longest(), Calendar: cal}
}

// validate checks the calendar of l, naming the field at fault.
func (c *Calendar) validate(l Limit) error {
	if l.Algorithm != FixedWindow {
		why := "a bucket has no windows"
		switch l.Algorithm {
		case SlidingWindow:
			why = "its weighted count of the previous window would carry one calendar period's use into the next, which a calendar period is there to reset"
		case SlidingLog:
			why = "its window slides with every request"
		}
		return fieldErrorf("calendar", "only fixed_window counts calendar periods, not %s: %s", l.Algorithm, why)
	}
	if _, err := ParseCalendarUnit(string(c.Unit)); err != nil {
		return &FieldError{Field: "calendar.unit", Err: err}
	}
	if c.WeekStart < time.Sunday || c.WeekStart > time.Saturday {
		return fieldErrorf("calendar.week_start", "%d is not a day of the week (0 Sunday to 6 Saturday)", int(c.WeekStart))
	}
	if c.WeekStart != time.Sunday && c.Unit != Week {
		return fieldErrorf("calendar.week_start", "only a week has a first day, not a %s", c.Unit)
	}
	if l.Rate > maxExactInteger {
		return fieldErrorf("rate", "%d is above 2^53, where Lua's numbers stop being exact", l.Rate)
	}
	if l.Period != c.Unit.Longest() {
		return fieldErrorf("period", "a calendar %s's period is its longest window, %s, got %s", c.Unit, c.Unit.Longest(), l.Period)
	}
	return nil
}

func (c *Calendar) location() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// Window returns the window holding t: [start, end), in the calendar's zone.
func (c *Calendar) Window(t time.Time) (start, end time.Time) {
	start = c.startOf(t)
	return start, c.after(start)
}

func (c *Calendar) startOf(t time.Time) time.Time {
	s := c.dateStart(t)
	if s.After(t) { // t is in an hour repeated before its day's midnight
		if p := c.dateStart(s.Add(-time.Nanosecond)); !p.After(t) {
			return p
		}
	}
	return s
}

// dateStart is the start of the window of t's date in the zone.
func (c *Calendar) dateStart(t time.Time) time.Time {
	lt := t.In(c.location())
	y, m, d := lt.Date()
	switch c.Unit {
	case Week:
		return c.midnight(y, m, d-(int(lt.Weekday())-int(c.WeekStart)+7)%7)
	case Month:
		return c.midnight(y, m, 1)
	case Year:
		return c.midnight(y, time.January, 1)
	}
	return c.midnight(y, m, d)
}

func (c *Calendar) after(start time.Time) time.Time {
	y, m, d := start.In(c.location()).Date()
	switch c.Unit {
	case Week:
		return c.midnight(y, m, d+7)
	case Month:
		return c.midnight(y, m+1, 1)
	case Year:
		return c.midnight(y+1, time.January, 1)
	}
	return c.midnight(y, m, d+1)
}

// midnight is the first instant of day y-m-d in the zone, also when its
// clocks skip or repeat midnight.
func (c *Calendar) midnight(y int, m time.Month, d int) time.Time {
	loc := c.location()
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	if !sameDate(t.In(loc), want) { // midnight fell in a gap, back into the day before
		if _, end := t.ZoneBounds(); !end.IsZero() {
			return end
		}
		return t
	}
	// Midnight repeated: the earlier reading, in the zone before t's.
	if zs, _ := t.ZoneBounds(); !zs.IsZero() {
		_, before := zs.Add(-time.Nanosecond).Zone()
		_, now := t.Zone()
		if earlier := t.Add(-time.Duration(before-now) * time.Second); before > now && earlier.Before(zs) {
			if lt := earlier.In(loc); sameDate(lt, want) && lt.Hour() == 0 && lt.Minute() == 0 && lt.Second() == 0 {
				return earlier
			}
		}
	}
	return t
}

func sameDate(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd
}

// windowsAt returns the window starts around now (µs), reused while in one window.
func (c *Calendar) windowsAt(now int64) *calendarWindows {
	if w := c.last.Load(); w != nil && w[1] <= now && now < w[2] {
		return w
	}
	start := c.startOf(time.UnixMicro(now))
	next := c.after(start)
	w := &calendarWindows{c.startOf(start.Add(-time.Microsecond)).UnixMicro(), start.UnixMicro(), next.UnixMicro(), c.after(next).UnixMicro()}
	c.last.Store(w)
	return w
}
