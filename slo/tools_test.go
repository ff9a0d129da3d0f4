package slo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// These tests run the real promtool and amtool (Debian packages prometheus
// and prometheus-alertmanager, installed by `make deps`).

func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed; run `make deps` (Debian packages prometheus and prometheus-alertmanager)", name)
	}
	return p
}

// generateInto writes everything the spec generates under a new directory.
func generateInto(t *testing.T, spec string) string {
	t.Helper()
	m, err := LoadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func run(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// promtoolSlots keeps at most two promtool runs at once on a shared machine.
var promtoolSlots = make(chan struct{}, 2)

func testRules(t *testing.T, dir string) (string, error) {
	t.Helper()
	tests, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(RuleTestsDir), "*.yml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no generated promtool tests in %s", dir)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		outs []string
		fail error
	)
	for _, f := range tests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			promtoolSlots <- struct{}{}
			defer func() { <-promtoolSlots }()
			out, err := run(t, filepath.Dir(f), "promtool", "test", "rules", filepath.Base(f))
			mu.Lock()
			defer mu.Unlock()
			outs = append(outs, out)
			if err != nil {
				fail = err
			}
		}()
	}
	wg.Wait()
	return strings.Join(outs, "\n"), fail
}

func TestGeneratedFilesPassPromtoolAndAmtool(t *testing.T) {
	requireTool(t, "promtool")
	requireTool(t, "amtool")
	specs, _ := filepath.Glob("testdata/valid/*.yaml")
	specs = append([]string{filepath.Join(repoRoot, "slo.yaml")}, specs...)
	for _, spec := range specs {
		t.Run(filepath.Base(spec), func(t *testing.T) {
			t.Parallel()
			dir := generateInto(t, spec)
			if out, err := run(t, dir, "promtool", "check", "rules", RulesPath); err != nil {
				t.Errorf("promtool check rules: %v\n%s", err, out)
			}
			if out, err := run(t, dir, "amtool", "check-config", AlertmanagerPath); err != nil {
				t.Errorf("amtool check-config: %v\n%s", err, out)
			}
			if out, err := testRules(t, dir); err != nil {
				t.Errorf("promtool test rules: %v\n%s", err, out)
			}
		})
	}
}

// The generated tests must be able to fail: move a threshold in the rules
// without moving the tests, and promtool catches it.
func TestPromtoolTestsCatchAThresholdMovedBehindTheirBack(t *testing.T) {
	requireTool(t, "promtool")
	tests := []struct {
		name, test, from, to string
	}{
		{"a higher 429 threshold misses the 6 % case", "rejection-ratio.yml",
			") > 0.05\n", ") > 0.07\n"},
		{"refusals summed over the limits name no limit", "rejection-ratio.yml",
			"sum by (endpoint, plan_tier, limit) (rate(rate_limit_refusals_total", "sum by (endpoint, plan_tier) (rate(rate_limit_refusals_total"},
		{"a rejection alert blind to the penalty box misses the penalized 429s", "rejection-ratio.yml",
			`status="penalized"`, `status="none"`},
		{"a lower latency threshold fires on the 40ms case", "store-latency.yml",
			"operation:rate_limit_redis_duration_seconds:p99_rate5m > 0.05", "operation:rate_limit_redis_duration_seconds:p99_rate5m > 0.025"},
		{"no traffic floor fires on the quiet endpoint", "rejection-ratio.yml",
			"endpoint_plan_tier:rate_limit_requests:rate5m >= 1", "endpoint_plan_tier:rate_limit_requests:rate5m >= 0"},
		{"counting 429s as errors burns the budget", "error-budget-burn-1h-5m.yml",
			`status=~"fail_open|fail_closed"`, `status=~"fail_open|fail_closed|rejected"`},
		{"a burn alert without its short window fires on the forgotten spike", "error-budget-burn-1h-5m.yml",
			"job:rate_limit_errors:ratio_rate1h > 0.0144\n          and\n          job:rate_limit_errors:ratio_rate5m > 0.0144",
			"job:rate_limit_errors:ratio_rate1h > 0.0144"},
		{"a 9 fail-open threshold pages on 9", "fail-open.yml",
			"job:rate_limit_fail_open:increase1m > 10", "job:rate_limit_fail_open:increase1m > 8"},
		{"a 4s lag threshold misses the 3s lag", "regions.yml",
			"max by (peer_region) (rate_limit_region_sync_lag_seconds{job=\"rl-exporter\"}) > 2\n",
			"max by (peer_region) (rate_limit_region_sync_lag_seconds{job=\"rl-exporter\"}) > 4\n"},
		{"a peer page without the errors clause fires on a lag that grows without errors", "regions.yml",
			"increase(rate_limit_region_sync_errors_total{job=\"rl-exporter\"}[2m]) > 0", "increase(rate_limit_region_sync_errors_total{job=\"rl-exporter\"}[2m]) >= 0"},
		{"a peer page without the growth clause fires on a frozen lag", "regions.yml",
			"deriv(rate_limit_region_sync_lag_seconds{job=\"rl-exporter\"}[2m]) > 0", "deriv(rate_limit_region_sync_lag_seconds{job=\"rl-exporter\"}[2m]) >= 0"},
		{"a peer page at 3m misses the 2m30s outage", "regions.yml",
			"rate_limit_region_sync_lag_seconds{job=\"rl-exporter\"} > 120", "rate_limit_region_sync_lag_seconds{job=\"rl-exporter\"} > 180"},
		{"a quota expiry alert waiting 10m misses the burst of expired assignments", "quota-expired.yml",
			"expr: endpoint:rate_limit_rlqs_assignments_expired:increase5m > 0\n", "expr: endpoint:rate_limit_rlqs_assignments_expired:increase5m > 0\n        for: 10m\n"},
		{"a quota expiry alert at >= 0 fires with no expiry", "quota-expired.yml",
			"endpoint:rate_limit_rlqs_assignments_expired:increase5m > 0\n", "endpoint:rate_limit_rlqs_assignments_expired:increase5m >= 0\n"},
		{"a give-back page at 20 % misses 10 % of give-backs failing for good", "shares-give-backs.yml",
			"expr: job_class:rate_limit_shares_give_back_errors:ratio_rate5m > 0.05\n", "expr: job_class:rate_limit_shares_give_back_errors:ratio_rate5m > 0.2\n"},
		{"a give-back page at 2 % fires on 2.5 % failing", "shares-give-backs.yml",
			"expr: job_class:rate_limit_shares_give_back_errors:ratio_rate5m > 0.05\n", "expr: job_class:rate_limit_shares_give_back_errors:ratio_rate5m > 0.02\n"},
		{"give-backs summed over the classes miss one class failing them all beside a busier one", "shares-give-backs.yml",
			"sum by (job, class) (rate(rate_limit_shares_give_back", "sum by (job) (rate(rate_limit_shares_give_back"},
		{"a give-back page waiting 3m fires on one Redis blip", "shares-give-backs.yml",
			"ratio_rate5m > 0.05\n        for: 15m\n", "ratio_rate5m > 0.05\n        for: 3m\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := generateInto(t, filepath.Join(repoRoot, "slo.yaml"))
			rules := filepath.Join(dir, filepath.FromSlash(RulesPath))
			b, err := os.ReadFile(rules)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(tt.from)) {
				t.Fatalf("rules do not contain %q", tt.from)
			}
			b = bytes.ReplaceAll(b, []byte(tt.from), []byte(tt.to))
			if err := os.WriteFile(rules, b, 0o644); err != nil {
				t.Fatal(err)
			}
			promtoolSlots <- struct{}{}
			defer func() { <-promtoolSlots }()
			out, err := run(t, filepath.Join(dir, filepath.FromSlash(RuleTestsDir)), "promtool", "test", "rules", tt.test)
			if err == nil {
				t.Errorf("promtool test rules %s passed against the altered rules:\n%s", tt.test, out)
			}
		})
	}
}

func TestAlertmanagerRoutesBySeverity(t *testing.T) {
	requireTool(t, "amtool")
	cfg := filepath.Join(repoRoot, filepath.FromSlash(AlertmanagerPath))
	for labels, want := range map[string]string{
		"alertname=RateLimitFailOpen severity=page":                                         ReceiverPage,
		"alertname=RateLimitErrorBudgetBurn severity=ticket":                                ReceiverTicket,
		"alertname=RateLimitStoreLatencyHigh severity=warning":                              ReceiverTicket,
		"alertname=RateLimitRegionPeerUnreachable severity=page peer_region=ap-northeast-1": ReceiverPage,
		"alertname=RateLimitRegionSyncLagHigh severity=warning peer_region=ap-northeast-1":  ReceiverTicket,
		"alertname=RateLimitSharesGiveBacksFailing severity=warning":                        ReceiverTicket,
		"alertname=SomethingElse":                                                           ReceiverTicket,
	} {
		args := append([]string{"config", "routes", "test", "--config.file=" + cfg}, strings.Fields(labels)...)
		out, err := exec.Command("amtool", args...).Output()
		if err != nil {
			t.Fatalf("amtool %v: %v\n%s", args, err, out)
		}
		if got := strings.Fields(string(out)); len(got) == 0 || got[0] != want {
			t.Errorf("%s routes to %q, want %s", labels, out, want)
		}
	}
}

// Secrets are named by file only: the generated configuration holds the
// paths, Alertmanager reads the files, and their contents appear nowhere.
func TestGeneratedAlertmanagerConfigHoldsNoSecrets(t *testing.T) {
	requireTool(t, "amtool")
	dir := t.TempDir()
	secret := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("s3cr3t-"+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	spec := "routing:\n  page:\n    pagerduty: {routing_key_file: " + secret("pd") + "}\n    opsgenie: {api_key_file: " + secret("og") + "}\n" +
		"  ticket:\n    slack: {api_url_file: " + secret("slack") + ", channel: '#x'}\n    webhook: {url: 'https://hooks.example/a', credentials_file: " + secret("token") + "}\n"
	specPath := filepath.Join(dir, "slo.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := generateInto(t, specPath)
	cfg, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(AlertmanagerPath)))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cfg, []byte("s3cr3t")) {
		t.Errorf("a secret's contents leaked into the configuration:\n%s", cfg)
	}
	for _, f := range []string{"routing_key_file: " + filepath.Join(dir, "pd"), "api_key_file: " + filepath.Join(dir, "og"),
		"api_url_file: " + filepath.Join(dir, "slack"), "credentials_file: " + filepath.Join(dir, "token")} {
		if !bytes.Contains(cfg, []byte(f)) {
			t.Errorf("configuration lacks %q:\n%s", f, cfg)
		}
	}
	if o, err := run(t, out, "amtool", "check-config", AlertmanagerPath); err != nil {
		t.Errorf("amtool check-config: %v\n%s", err, o)
	}
}
