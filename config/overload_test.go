package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/overload"
)

const overloadClasses = `
tiers: {names: [free, pro], default: free}
default_class: search
classes:
  checkout:
    routes: ["POST /checkout"]
    priority: critical
    limits: {free: {algorithm: fixed_window, rate: 10, period: 1m}}
  search:
    routes: ["GET /search"]
    priority: sheddable
    limits:
      free: {algorithm: fixed_window, rate: 10, period: 1m}
      pro: {algorithm: fixed_window, rate: 10, period: 1m, priority: default}
`

func TestPriorityComesFromTheTierThenTheClass(t *testing.T) {
	c, err := Parse("x.yaml", []byte(overloadClasses))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		class, tier string
		want        overload.Priority
	}{
		{"checkout", "free", overload.Critical}, {"checkout", "pro", overload.Critical},
		{"search", "free", overload.Sheddable}, {"search", "pro", overload.Default},
	} {
		if got := c.Priority(tc.class, tc.tier); got != tc.want {
			t.Errorf("Priority(%s, %s) = %s, want %s", tc.class, tc.tier, got, tc.want)
		}
	}
	if c.Server.Overload.Enabled {
		t.Error("overload is on by default")
	}
}

func TestABadPriorityNamesItsKey(t *testing.T) {
	_, err := Parse("x.yaml", []byte(strings.Replace(overloadClasses, "priority: default", "priority: urgent", 1)))
	if err == nil || !strings.Contains(err.Error(), "classes.search.limits.pro.priority") || !strings.Contains(err.Error(), "critical, default or sheddable") {
		t.Fatalf("err %v, want one on classes.search.limits.pro.priority", err)
	}
}

func TestOverloadTargetComesFromTheSLOSpec(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "slo.yaml"), []byte("overload: {latency_threshold: 300ms, latency_quantile: 0.95}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rl.yaml")
	write := func(extra string) {
		t.Helper()
		body := "server:\n  upstream: http://127.0.0.1:9\n  overload:\n    enabled: true\n    slo_spec: slo.yaml\n" + extra + overloadClasses
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := c.OverloadConfig()
	if err != nil || oc.Target != 300*time.Millisecond || oc.Quantile != 0.95 {
		t.Fatalf("OverloadConfig = %+v, %v; want the spec's 300ms on p95", oc, err)
	}
	if _, _, src, _ := c.OverloadTarget(); src != filepath.Join(dir, "slo.yaml") {
		t.Fatalf("target source %q, want the spec file", src)
	}
	write("    target: 200ms\n")
	if c, err = Load(path); err != nil {
		t.Fatal(err)
	}
	if oc, _ := c.OverloadConfig(); oc.Target != 200*time.Millisecond || oc.Quantile != overload.DefaultQuantile {
		t.Fatalf("OverloadConfig = %+v; server.overload.target wins over the spec", oc)
	}
	if err := os.WriteFile(filepath.Join(dir, "slo.yaml"), []byte("overload: {latency_threshold: soon}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "server.overload.slo_spec") || !strings.Contains(err.Error(), "overload.latency_threshold") {
		t.Fatalf("a bad spec: %v, want an error naming server.overload.slo_spec and the spec's field", err)
	}
}

func TestOverloadSettingsAreChecked(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"server: {overload: {enabled: true}}", "server.overload.enabled: needs server.upstream"},
		{"server: {upstream: http://127.0.0.1:9, overload: {enabled: true, min_limit: 50, max_limit: 10}}", "server.overload.max_limit"},
		{"server: {upstream: http://127.0.0.1:9, overload: {enabled: true, critical_reserve: 1.5}}", "server.overload.critical_reserve"},
		{"server: {upstream: http://127.0.0.1:9, overload: {enabled: true, retry_after: 100ms}}", "server.overload.retry_after"},
	} {
		if _, err := Parse("x.yaml", []byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want an error on %s", tc.yaml, err, tc.key)
		}
	}
}

// The overload block is package overload's Config as it is, beside
// serve's own keys: each key lands in its field, from a file and from the
// environment alike, and a key of neither is still unknown.
func TestTheOverloadBlockIsTheControllersConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	if err := os.WriteFile(path, []byte("server:\n  upstream: http://127.0.0.1:1\n  overload: {enabled: true, target: 200ms, min_limit: 5, critical_reserve: 0.3, retry_after: 2s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Sources{File: path, Env: []string{"RL_SERVER__OVERLOAD__QUANTILE=0.95", "RL_SERVER__OVERLOAD__CRITICAL_WAIT=50ms"}}.Load()
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.OverloadConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := overload.Defaults()
	want.Target, want.MinLimit, want.Reserve, want.Quantile, want.CriticalWait = 200*time.Millisecond, 5, 0.3, 0.95, 50*time.Millisecond
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OverloadConfig() = %+v, want %+v", got, want)
	}
	if o := c.Server.Overload; !o.Enabled || o.RetryAfter != 2*time.Second {
		t.Errorf("serve's keys: enabled %v, retry_after %s; want true, 2s", o.Enabled, o.RetryAfter)
	}
	_, err = Parse("x.yaml", []byte("server: {overload: {reserve: 0.3, now: 1}}\nclasses: {default: {limits: {default: {algorithm: gcra, rate: 1, period: 1s}}, penalty: {after: 2, fr: 1m}}}\n"))
	for _, key := range []string{"server.overload.reserve", "server.overload.now", "classes.default.penalty.fr"} {
		if err == nil || !strings.Contains(err.Error(), key+": unknown key") {
			t.Errorf("%s: err %v, want it named an unknown key", key, err)
		}
	}
}
