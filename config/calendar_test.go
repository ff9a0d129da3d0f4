package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestACalendarPeriodReachesTheLimiter(t *testing.T) {
	c, err := config.Parse("cal.yaml", []byte(`
tiers: {names: [free, pro], default: free}
default_class: chat
classes:
  chat:
    limits:
      free: {algorithm: fixed_window, rate: 1000, period: day}
      pro:
        algorithm: fixed_window
        rate: 1000000
        period: month
        calendar: {time_zone: Asia/Tokyo}
  weekly:
    routes: ["/w"]
    limits:
      free: {algorithm: fixed_window, rate: 10, period: week, calendar: {week_start: sunday, time_zone: America/New_York}}
      pro: {algorithm: fixed_window, rate: 10, period: year}
`))
	if err != nil {
		t.Fatal(err)
	}
	pro := c.Classes["chat"].Limits["pro"].Limiter()
	if pro.Calendar == nil || pro.Calendar.Unit != limiter.Month || pro.Calendar.Location.String() != "Asia/Tokyo" || pro.Period != limiter.Month.Longest() {
		t.Fatalf("pro limit %+v (calendar %+v), want a Tokyo month", pro, pro.Calendar)
	}
	start, end := pro.Calendar.Window(time.Date(2027, 2, 10, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2027, 1, 31, 15, 0, 0, 0, time.UTC); !start.Equal(want) || !end.Equal(time.Date(2027, 2, 28, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("Tokyo's February 2027 is [%s, %s)", start.UTC(), end.UTC())
	}
	free := c.Classes["chat"].Limits["free"].Limiter()
	if free.Calendar == nil || free.Calendar.Unit != limiter.Day || free.Calendar.Location.String() != "UTC" {
		t.Fatalf("free limit calendar %+v, want a UTC day", free.Calendar)
	}
	week := c.Classes["weekly"].Limits["free"].Limiter()
	if week.Calendar.Unit != limiter.Week || week.Calendar.WeekStart != time.Sunday {
		t.Fatalf("weekly calendar %+v, want weeks from Sunday", week.Calendar)
	}
	if year := c.Classes["weekly"].Limits["pro"].Limiter(); year.Calendar.WeekStart != time.Sunday || year.Calendar.Unit != limiter.Year {
		t.Fatalf("yearly calendar %+v", year.Calendar)
	}
	// A week starts on Monday unless the file says otherwise (ISO 8601).
	c, err = config.Parse("w.yaml", []byte("classes: {default: {limits: {default: {algorithm: fixed_window, rate: 5, period: week}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Classes["default"].Limits["default"].Limiter().Calendar; w.WeekStart != time.Monday {
		t.Fatalf("default week start %s, want Monday", w.WeekStart)
	}
	if c.Classes["default"].Limits["default"].Period != limiter.Week.Longest() {
		t.Fatalf("a week's period is %s", c.Classes["default"].Limits["default"].Period)
	}
}

func TestBadCalendarsNameTheKey(t *testing.T) {
	limit := func(l string) string {
		return "tiers: {names: [free, pro], default: free}\nclasses: {chat: {limits: {free: {algorithm: fixed_window, rate: 5, period: 1m}, pro: " + l + "}}}\n"
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"an unknown time zone", limit("{algorithm: fixed_window, rate: 5, period: month, calendar: {time_zone: Mars/Olympus}}"),
			[]string{"classes.chat.limits.pro.calendar.time_zone", "Mars/Olympus"}},
		{"a calendar on a bucket", limit("{algorithm: token_bucket, rate: 5, period: month}"),
			[]string{"classes.chat.limits.pro.calendar", "fixed_window", "token_bucket"}},
		{"a calendar on a sliding window", limit("{algorithm: sliding_window, rate: 5, period: day}"),
			[]string{"classes.chat.limits.pro.calendar", "fixed_window"}},
		{"a week start on a month", limit("{algorithm: fixed_window, rate: 5, period: month, calendar: {week_start: monday}}"),
			[]string{"classes.chat.limits.pro.calendar.week_start", "month"}},
		{"an unknown week start", limit("{algorithm: fixed_window, rate: 5, period: week, calendar: {week_start: caturday}}"),
			[]string{"classes.chat.limits.pro.calendar.week_start", "caturday"}},
		{"a calendar without a calendar period", limit("{algorithm: fixed_window, rate: 5, period: 1h, calendar: {time_zone: UTC}}"),
			[]string{"classes.chat.limits.pro.calendar", "period day, week, month or year"}},
		{"a calendar key of its own", limit("{algorithm: fixed_window, rate: 5, period: month, calendar: {unit: day}}"),
			[]string{"classes.chat.limits.pro.calendar.unit", "unknown key"}},
		{"an unknown calendar key", limit("{algorithm: fixed_window, rate: 5, period: month, calendar: {zone: UTC}}"),
			[]string{"classes.chat.limits.pro.calendar.zone", "unknown key"}},
		{"a period that is neither", limit("{algorithm: fixed_window, rate: 5, period: fortnight}"),
			[]string{"classes.chat.limits.pro.period", "fortnight", "day, week, month or year"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("parsed without error")
			}
			for _, w := range append(tc.want, "config bad.yaml: ") {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
