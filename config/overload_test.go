package config

import (
	"os"
	"path/filepath"
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
