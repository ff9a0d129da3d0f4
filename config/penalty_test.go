package config

import (
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestAClassPenaltyReachesThePolicy(t *testing.T) {
	c, err := Parse("x.yaml", []byte(`
classes:
  api:
    limits: {default: {algorithm: fixed_window, rate: 5, period: 1m}}
    penalty: {after: 3, within: 1m, for: 10m}
`))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.PolicyConfig(limiter.NewMemoryStore(limiter.MemoryConfig{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := limiter.Penalty{After: 3, Within: time.Minute, For: 10 * time.Minute}
	if got := pc.Classes[0].Penalty; got != want {
		t.Errorf("penalty %+v, want %+v", got, want)
	}
}

func TestABadPenaltyNamesItsKey(t *testing.T) {
	for _, tc := range []struct{ name, penalty, key string }{
		{"no for", "{after: 3, within: 1m}", "classes.api.penalty.for"},
		{"a negative within", "{after: 3, within: -1s, for: 1m}", "classes.api.penalty.within"},
		{"a within past 100 years", "{after: 3, within: 900000h, for: 1m}", "classes.api.penalty.within"},
		{"a for past 100 years", "{after: 3, within: 1m, for: 900000h}", "classes.api.penalty.for"},
		{"a negative after", "{after: -1, within: 1m, for: 1m}", "classes.api.penalty.after"},
		{"times without after", "{within: 1m, for: 1m}", "classes.api.penalty.after"},
	} {
		_, err := Parse("x.yaml", []byte("classes:\n  api:\n    limits: {default: {algorithm: fixed_window, rate: 5, period: 1m}}\n    penalty: "+tc.penalty+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), "x.yaml") {
			t.Errorf("%s: %v, want an error naming x.yaml and %s", tc.name, err, tc.key)
		}
	}
	_, err := Parse("x.yaml", []byte("classes:\n  api:\n    region_mode: strict\n    limits: {default: {algorithm: fixed_window, rate: 5, period: 1m}}\n    penalty: {after: 3, within: 1m, for: 1m}\n"))
	if err == nil || !strings.Contains(err.Error(), "classes.api.penalty") || !strings.Contains(err.Error(), "region_mode") {
		t.Errorf("a penalty on a strict region class: %v, want an error naming classes.api.penalty and region_mode", err)
	}
	_, err = Parse("x.yaml", []byte("classes:\n  api:\n    limits: {default: {algorithm: fixed_window, rate: 5, period: 1m, region_mode: async}}\n    penalty: {after: 3, within: 1m, for: 1m}\n"))
	if err == nil || !strings.Contains(err.Error(), "classes.api.penalty") || !strings.Contains(err.Error(), "region_mode async") {
		t.Errorf("a penalty on a class with an async tier: %v, want an error naming classes.api.penalty and region_mode async", err)
	}
}

func TestAPenaltyWithoutWithinCountsRefusalsOverThePeriodOfTheDefaultTiersLimit(t *testing.T) {
	c, err := Parse("x.yaml", []byte(`
tiers: {names: [free, pro], default: free}
default_class: api
classes:
  api:
    limits:
      free: {algorithm: fixed_window, rate: 5, period: 1m}
      pro: {algorithm: gcra, rate: 50, period: 10s}
    penalty: {after: 3, for: 10m}
  set:
    limits: {free: {algorithm: fixed_window, rate: 5, period: 1m}}
    penalty: {after: 3, within: 30s, for: 10m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Classes["api"].Penalty; p.Within != time.Minute || !p.WithinIsDefault() {
		t.Errorf("api's penalty %+v (default %v), want within 1m, the free tier's period, as a default", p, p.WithinIsDefault())
	}
	if p := c.Classes["set"].Penalty; p.Within != 30*time.Second || p.WithinIsDefault() {
		t.Errorf("set's penalty %+v (default %v), want the within the file sets", p, p.WithinIsDefault())
	}
	_, err = Parse("x.yaml", []byte("classes:\n  api:\n    limits: {default: {algorithm: concurrency, limit: 5}}\n    penalty: {after: 3, for: 1m}\n"))
	if err == nil || !strings.Contains(err.Error(), "classes.api.penalty.within") || !strings.Contains(err.Error(), "has none (algorithm concurrency): set it") {
		t.Errorf("a penalty without within on a concurrency limit: %v, want an error saying within has no default there", err)
	}
}
