package slo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// noTrafficTest is a promtool test of the recorded ratios with every counter
// flat at zero: no decisions, no store calls. Each ratio's denominator is
// guarded with "> 0", so none of them has a sample, rather than a NaN that
// a dashboard draws as a gap or a stat panel shows as "NaN".
const noTrafficTest = `rule_files: [%s]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: rate_limit_requests_total{job="rl-exporter",endpoint="/v1/search",plan_tier="free",status="allowed"}
        values: 0x30
      - series: rate_limit_requests_total{job="rl-exporter",endpoint="/v1/search",plan_tier="free",status="rejected"}
        values: 0x30
%s    promql_expr_test:
%s    alert_rule_test:
      - {eval_time: 20m, alertname: RateLimitRejectionRatioHigh, exp_alerts: []}
      - {eval_time: 20m, alertname: RateLimitStoreLatencyHigh, exp_alerts: []}
      - {eval_time: 20m, alertname: RateLimitErrorBudgetBurn, exp_alerts: []}
`

func TestNoTrafficRecordsNoRatioRatherThanNaN(t *testing.T) {
	requireTool(t, "promtool")
	m, err := LoadFile(filepath.Join(repoRoot, "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var series strings.Builder
	for _, le := range append(bucketBounds(), "+Inf") {
		fmt.Fprintf(&series, "      - series: rate_limit_redis_duration_seconds_bucket{job=\"rl-exporter\",operation=\"decide\",le=%q}\n        values: 0x30\n", le)
	}
	series.WriteString("      - series: rate_limit_redis_duration_seconds_count{job=\"rl-exporter\",operation=\"decide\"}\n        values: 0x30\n")
	records := []string{
		RejectionRatioRecord(m.Rejection.Window),
		LatencyQuantileRecord(m.Latency.Quantile, m.Latency.Window),
	}
	for _, w := range m.Availability.windows() {
		if w <= 20*time.Minute {
			records = append(records, ErrorRatioRecord(w))
		}
	}
	var exprs strings.Builder
	for _, r := range records {
		fmt.Fprintf(&exprs, "      - {expr: %s, eval_time: 20m, exp_samples: []}\n", r)
	}
	if len(records) < 3 {
		t.Fatalf("only %d ratios to check: %v", len(records), records)
	}

	tests := []struct {
		name   string
		guard  bool
		passes bool
	}{
		{"the generated rules record nothing", true, true},
		{"the same rules without their guards record NaN, and the test says so", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := generateInto(t, filepath.Join(repoRoot, "slo.yaml"))
			rules := filepath.Join(dir, filepath.FromSlash(RulesPath))
			if !tt.guard {
				b, err := os.ReadFile(rules)
				if err != nil {
					t.Fatal(err)
				}
				unguarded := bytes.ReplaceAll(b, []byte(") > 0)"), []byte("))"))
				if bytes.Equal(unguarded, b) {
					t.Fatal("no guarded denominator found in the rules")
				}
				if err := os.WriteFile(rules, unguarded, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			test := fmt.Sprintf(noTrafficTest, filepath.Base(rules), series.String(), exprs.String())
			if err := os.WriteFile(filepath.Join(filepath.Dir(rules), "no-traffic.yml"), []byte(test), 0o644); err != nil {
				t.Fatal(err)
			}
			promtoolSlots <- struct{}{}
			defer func() { <-promtoolSlots }()
			out, err := run(t, filepath.Dir(rules), "promtool", "test", "rules", "no-traffic.yml")
			if (err == nil) != tt.passes {
				t.Errorf("promtool test rules: err = %v, want passing %v\n%s", err, tt.passes, out)
			}
			if !tt.passes && !strings.Contains(out, "NaN") {
				t.Errorf("promtool failed for another reason than a NaN sample:\n%s", out)
			}
		})
	}
}

// bucketBounds writes latencyBuckets as the le label values the client
// library exports.
func bucketBounds() []string {
	out := make([]string, len(latencyBuckets))
	for i, b := range latencyBuckets {
		out[i] = formatFloat(b)
	}
	return out
}
