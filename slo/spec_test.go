package slo

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Each fixture under testdata/invalid names the error it must produce on a
// "# want:" line: the file, the field and the reason.
func TestInvalidSpecsAreRejectedNamingFileFieldAndReason(t *testing.T) {
	paths, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				if w, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				t.Fatalf("%s has no '# want:' line", path)
			}
			m, err := LoadFile(path)
			if err == nil {
				t.Fatalf("LoadFile(%s) accepted an invalid spec: %+v", path, m)
			}
			for _, w := range wants {
				if !strings.Contains(err.Error(), path+": "+w) {
					t.Errorf("error does not contain %q:\n%v", path+": "+w, err)
				}
			}
		})
	}
}

func TestAnEmptySpecGetsEveryDefault(t *testing.T) {
	m, err := Load(nil, "empty.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Job != "rl-exporter" {
		t.Errorf("job = %q", m.Job)
	}
	if r := m.Rejection; r == nil || r.Threshold != 0.05 || r.MinRate != 1 || r.Window != 5*time.Minute || r.For != 5*time.Minute || r.Severity != "page" {
		t.Errorf("rejection ratio = %+v", r)
	}
	if l := m.Latency; l == nil || l.Quantile != 0.99 || l.Threshold != 0.05 || l.Severity != "warning" {
		t.Errorf("store latency = %+v", l)
	}
	if f := m.FailOpen; f == nil || f.Threshold != 10 || f.Window != time.Minute || f.For != 0 || f.Severity != "page" {
		t.Errorf("fail open = %+v", f)
	}
	if s := m.SharesGiveBacks; s == nil || s.Threshold != 0.05 || s.Window != 5*time.Minute || s.For != 15*time.Minute || s.Severity != "warning" {
		t.Errorf("shares give-backs = %+v", s)
	}
	if a := m.Availability; a == nil || a.Objective != 0.999 || a.Period != 30*24*time.Hour || len(a.Rows) != 4 {
		t.Errorf("availability = %+v", a)
	}
	r := m.Routing
	if r.GroupWait != 30*time.Second || r.GroupInterval != 5*time.Minute || r.RepeatInterval != 4*time.Hour ||
		strings.Join(r.GroupBy, ",") != "alertname,endpoint,plan_tier" {
		t.Errorf("routing = %+v", r)
	}
	if r.Page.Webhook == nil || r.Page.Webhook.URL != DefaultWebhookURL || r.Ticket.Webhook == nil {
		t.Errorf("receivers without integrations should get the default webhook: %+v", r)
	}
}

func TestAFieldSetInTheFileKeepsTheOtherDefaults(t *testing.T) {
	m, err := Load([]byte("rejection_ratio:\n  threshold_percent: 7\n"), "slo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Rejection.Threshold != 0.07 || m.Rejection.Window != 5*time.Minute || m.Rejection.Severity != "page" {
		t.Errorf("rejection ratio = %+v", m.Rejection)
	}
}

func TestAWindowsListReplacesTheDefaultTable(t *testing.T) {
	m, err := Load([]byte("availability:\n  windows:\n    - {long: 2h, short: 10m, budget_percent: 3, severity: ticket, for: 0s}\n"), "slo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows := m.Availability.Rows
	if len(rows) != 1 || rows[0].Long != 2*time.Hour || rows[0].Short != 10*time.Minute || rows[0].For != 0 {
		t.Fatalf("rows = %+v", rows)
	}
}

func TestAnIntegrationSetForAReceiverReplacesTheDefaultWebhook(t *testing.T) {
	m, err := Load([]byte("routing:\n  page:\n    pagerduty: {routing_key_file: /run/secrets/pd}\n"), "slo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m.Routing.Page.Webhook != nil || m.Routing.Page.PagerDuty == nil {
		t.Errorf("page receiver = %+v", m.Routing.Page)
	}
	if m.Routing.Ticket.Webhook == nil {
		t.Errorf("ticket receiver lost its default webhook")
	}
}

func TestBurnRateTable(t *testing.T) {
	tests := []struct {
		name       string
		objective  float64
		period     string
		factors    []float64
		thresholds []float64
		canFire    []bool
	}{
		{
			name: "the Workbook's table for 99.9 % over 30 days", objective: 99.9, period: "30d",
			factors: []float64{14.4, 6, 3, 1}, thresholds: []float64{0.0144, 0.006, 0.003, 0.001},
			canFire: []bool{true, true, true, true},
		},
		{
			name: "a 28-day period lowers every factor by 28/30", objective: 99.9, period: "28d",
			factors: []float64{13.44, 5.6, 2.8, 0.9333333333}, thresholds: []float64{0.01344, 0.0056, 0.0028, 0.0009333333333},
			canFire: []bool{true, true, true, true},
		},
		{
			name: "a 99.5 % objective scales the thresholds, not the factors", objective: 99.5, period: "30d",
			factors: []float64{14.4, 6, 3, 1}, thresholds: []float64{0.072, 0.03, 0.015, 0.005},
			canFire: []bool{true, true, true, true},
		},
		{
			name: "a 28-day period and a 99.5 % objective together", objective: 99.5, period: "28d",
			factors: []float64{13.44, 5.6, 2.8, 0.9333333333}, thresholds: []float64{0.0672, 0.028, 0.014, 0.004666666667},
			canFire: []bool{true, true, true, true},
		},
		{
			name: "a 90 % objective makes the 1h row impossible", objective: 90, period: "30d",
			factors: []float64{14.4, 6, 3, 1}, thresholds: []float64{1.44, 0.6, 0.3, 0.1},
			canFire: []bool{false, true, true, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := DefaultSpec()
			spec.Availability.ObjectivePercent = tt.objective
			spec.Availability.Period = tt.period
			m, err := Compile(spec, "slo.yaml")
			if err != nil {
				t.Fatal(err)
			}
			for i, row := range m.Availability.Rows {
				if row.Factor != tt.factors[i] || row.Threshold != tt.thresholds[i] || row.CanFire != tt.canFire[i] {
					t.Errorf("row %d: factor %v threshold %v canFire %v; want %v %v %v",
						i, row.Factor, row.Threshold, row.CanFire, tt.factors[i], tt.thresholds[i], tt.canFire[i])
				}
			}
			// The alerts compare with the same numbers.
			rg, err := m.RuleGroups()
			if err != nil {
				t.Fatal(err)
			}
			var exprs []string
			for _, g := range rg.Groups {
				for _, r := range g.Rules {
					if r.Alert == AlertErrorBudgetBurn {
						exprs = append(exprs, r.Expr)
					}
				}
			}
			for i, row := range m.Availability.Rows {
				long := ErrorRatioRecord(row.Long) + " > " + formatFloat(tt.thresholds[i]) + "\n"
				short := ErrorRatioRecord(row.Short) + " > " + formatFloat(tt.thresholds[i])
				found := slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, long) && strings.HasSuffix(e, short) })
				if found != tt.canFire[i] {
					t.Errorf("row %d: an alert on %q and %q: %v, want %v; alerts:\n%s", i, long, short, found, tt.canFire[i], strings.Join(exprs, "\n---\n"))
				}
			}
			warned := len(m.Warnings) > 0 && strings.Contains(m.Warnings[0], "availability.windows[0]") && strings.Contains(m.Warnings[0], "can never fire")
			if warned == tt.canFire[0] {
				t.Errorf("warnings = %q", m.Warnings)
			}
		})
	}
}

func TestARowThatCanNeverFireGetsNoAlertNorTests(t *testing.T) {
	m, err := LoadFile("testdata/unreachable-row.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == RulesPath && bytes.Contains(f.Content, []byte("long_window: 1h\n")) {
			t.Errorf("rules hold an alert for the 1h row:\n%s", f.Content)
		}
		if strings.Contains(f.Path, "error-budget-burn-1h-") {
			t.Errorf("tests generated for the 1h row: %s", f.Path)
		}
	}
}

func TestTheRegionsBlockTurnsTheRegionAlertsOnWhenPresent(t *testing.T) {
	tests := []struct {
		name, spec string
		on         bool
		lag        time.Duration
	}{
		{"a spec without the block has no region alerts", "job: x\n", false, 0},
		{"an empty block turns them on at the defaults", "regions: {}\n", true, 2 * time.Second},
		{"a block with no value turns them on at the defaults", "regions:\n", true, 2 * time.Second},
		{"a field set keeps the other defaults", "regions: {sync_lag_threshold: 500ms}\n", true, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Load([]byte(tt.spec), "regions.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if (m.Regions != nil) != tt.on {
				t.Fatalf("regions = %+v, want on %v", m.Regions, tt.on)
			}
			if !tt.on {
				return
			}
			r := m.Regions
			if r.SyncLagThreshold != tt.lag || r.SyncLag.For != 5*time.Minute || r.SyncLag.Severity != "warning" ||
				r.UnreachableFor != 2*time.Minute || r.Unreachable.Severity != "page" || r.Unreachable.For != 0 {
				t.Errorf("regions = %+v", r)
			}
			if r.SyncLag.RunbookURL != DefaultSpec().RunbookURL+"#ratelimitregionsynclaghigh" ||
				r.Unreachable.RunbookURL != DefaultSpec().RunbookURL+"#ratelimitregionpeerunreachable" {
				t.Errorf("runbooks %s, %s", r.SyncLag.RunbookURL, r.Unreachable.RunbookURL)
			}
		})
	}
}
