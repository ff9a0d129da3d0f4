package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/config"
)

const calendarConfig = `tiers: {names: [free, pro], default: free}
classes: {chat: {limits: {free: {algorithm: fixed_window, rate: 5, period: 1m}, pro: {algorithm: fixed_window, rate: 1000000, period: month, calendar: {time_zone: Asia/Tokyo}}}}}
`

// check shows each calendar limit with the window holding now, in its zone.
func TestCheckShowsACalendarLimitsWindow(t *testing.T) {
	cfg, err := config.Parse("cal.yaml", []byte(calendarConfig))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printCalendars(&out, cfg, time.Date(2027, 2, 10, 0, 0, 0, 0, time.UTC))
	want := "  chat/pro: fixed_window 1000000 per month in Asia/Tokyo; this window [2027-02-01T00:00:00+09:00, 2027-03-01T00:00:00+09:00), 672h0m0s\n"
	if out.String() != want {
		t.Fatalf("check printed\n%q, want\n%q", out.String(), want)
	}
}

// A calendar on a bucket algorithm is refused, naming the key.
func TestCheckRefusesACalendarOnABucket(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(calendarConfig, "pro: {algorithm: fixed_window", "pro: {algorithm: gcra", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"check", "--config", bad}, nil, &out, &errb); got != 1 || !strings.Contains(errb.String(), "classes.chat.limits.pro.calendar: only fixed_window") {
		t.Fatalf("exit %d, stderr %q; want 1 naming classes.chat.limits.pro.calendar", got, errb.String())
	}
}
