package slo

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestTheAvailabilitySLORecordsWhatSLOToolsRecordAndTestsEachRecord(t *testing.T) {
	m, err := LoadFile(filepath.Join(repoRoot, "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rg, err := m.RuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	var records []string
	for _, g := range rg.Groups {
		if g.Name != GroupAvailabilityRecords {
			continue
		}
		for _, r := range g.Rules {
			records = append(records, r.Record)
			if r.Alert != "" {
				t.Errorf("alert %s in the record group", r.Alert)
			}
		}
	}
	want := []string{SLOObjectiveRecord, SLOErrorBudgetRecord, SLOPeriodDaysRecord, SLOInfoRecord,
		SLOCurrentBurnRateRecord, PeriodErrorRatioRecord(m.Availability.Period), SLOPeriodBurnRateRecord, SLOBudgetRemainingRecord}
	for _, w := range want {
		if !slices.Contains(records, w) {
			t.Errorf("no record %s in group %s (records: %v)", w, GroupAvailabilityRecords, records)
		}
	}
	// Every record but the intermediate period ratio has a promtool test.
	tests, err := m.RuleTests("../" + RulesPath)
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, f := range tests {
		for _, tc := range f.File.Tests {
			for _, e := range tc.PromqlExprTests {
				tested[e.Expr] = len(e.ExpSamples) > 0
			}
		}
	}
	for _, w := range want {
		if !tested[w] {
			t.Errorf("no promtool test expects a value of %s", w)
		}
	}
}
