package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Defaults of a limit's calendar keys.
const (
	DefaultCalendarTimeZone = "UTC"
	DefaultWeekStart        = "monday" // ISO 8601
)

// Calendar places the windows of a limit whose period is day, week, month
// or year: `calendar: {time_zone: Asia/Tokyo, week_start: monday}`.
type Calendar struct {
	// TimeZone is an IANA zone name; default DefaultCalendarTimeZone.
	TimeZone string `koanf:"time_zone"`
	// WeekStart is the first day of a week ("monday" … "sunday"), for a
	// period of week alone; default DefaultWeekStart.
	WeekStart string `koanf:"week_start"`
	// Unit is the period's day, week, month or year.
	Unit string `koanf:"unit" derived:"period"`
}

var (
	limitType       = reflect.TypeOf(Limit{})
	limitPeriodType = reflect.TypeOf(limitPeriod(""))
)

// limitPeriod is a limit's period as written, so that strictNumbers can
// say what else a period may be.
type limitPeriod string

// calendarPeriods is the decode hook of a limit: a period of day, week,
// month or year becomes the unit's longest window (limiter.Calendar's
// Period) and the calendar's unit.
func calendarPeriods(_, to reflect.Type, data any) (any, error) {
	m, ok := data.(map[string]any)
	if (to != limitType && to != namedLimitType) || !ok {
		return data, nil
	}
	p, ok := m["period"].(string)
	if !ok {
		return data, nil
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	unit, err := limiter.ParseCalendarUnit(p)
	if err != nil {
		out["period"] = limitPeriod(p)
		return out, nil
	}
	out["period"] = unit.Longest().String()
	cal := map[string]any{}
	switch c := m["calendar"].(type) {
	case map[string]any:
		for k, v := range c {
			cal[k] = v
		}
	case nil:
	default:
		return out, nil // the decoder says what is wrong with it
	}
	cal["unit"] = p
	out["calendar"] = cal
	return out, nil
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// problems are the calendar's own, each naming its key relative to the
// limit ("calendar.time_zone"); the limiter checks the rest.
func (c *Calendar) problems() []*limiter.FieldError {
	if c == nil {
		return nil
	}
	var out []*limiter.FieldError
	add := func(field, format string, args ...any) {
		out = append(out, &limiter.FieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}
	if c.Unit == "" {
		add("calendar", "only with period day, week, month or year")
		return out
	}
	if _, err := c.location(); err != nil {
		add("calendar.time_zone", "%q is not a time zone known here (IANA names such as Asia/Tokyo): %v", c.TimeZone, err)
	}
	if c.WeekStart != "" {
		if _, ok := weekdays[strings.ToLower(c.WeekStart)]; !ok {
			add("calendar.week_start", "%q is not a day of the week (monday to sunday)", c.WeekStart)
		} else if c.Unit != string(limiter.Week) {
			add("calendar.week_start", "only a week has a first day, not a %s", c.Unit)
		}
	}
	return out
}

func (c *Calendar) location() (*time.Location, error) {
	if c.TimeZone == "" {
		return time.LoadLocation(DefaultCalendarTimeZone)
	}
	return time.LoadLocation(c.TimeZone)
}

// limiter is the calendar as limiter.Limit takes it; nil without one. The
// problems found by problems are left out, so that they are told once.
func (c *Calendar) limiter() *limiter.Calendar {
	if c == nil || c.Unit == "" {
		return nil
	}
	out := &limiter.Calendar{Unit: limiter.CalendarUnit(c.Unit)}
	if loc, err := c.location(); err == nil {
		out.Location = loc
	}
	if out.Unit == limiter.Week {
		start := c.WeekStart
		if start == "" {
			start = DefaultWeekStart
		}
		if d, ok := weekdays[strings.ToLower(start)]; ok {
			out.WeekStart = d
		}
	}
	return out
}

// PeriodText is the period as people read it: "1m0s", or a calendar's
// "month in Asia/Tokyo" ("week from monday in UTC").
func (l Limit) PeriodText() string {
	c := l.Calendar
	if c == nil || c.Unit == "" {
		return l.Period.String()
	}
	zone := c.TimeZone
	if zone == "" {
		zone = DefaultCalendarTimeZone
	}
	if c.Unit == string(limiter.Week) {
		start := c.WeekStart
		if start == "" {
			start = DefaultWeekStart
		}
		return "week from " + strings.ToLower(start) + " in " + zone
	}
	return c.Unit + " in " + zone
}
