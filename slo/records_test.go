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
	// The constants in their own group; the records read from the error
	// ratios after those, in the availability group.
	records := map[string][]string{}
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[g.Name] = append(records[g.Name], r.Record)
			}
			if g.Name == GroupAvailabilityRecords && r.Alert != "" {
				t.Errorf("alert %s in the record group", r.Alert)
			}
		}
	}
	constants := []string{SLOObjectiveRecord, SLOErrorBudgetRecord, SLOPeriodDaysRecord, SLOInfoRecord}
	burn := []string{SLOCurrentBurnRateRecord, PeriodErrorRatioRecord(m.Availability.Period), SLOPeriodBurnRateRecord, SLOBudgetRemainingRecord}
	if got := records[GroupAvailabilityRecords]; !slices.Equal(got, constants) {
		t.Errorf("group %s records %v, want %v", GroupAvailabilityRecords, got, constants)
	}
	if got := records[GroupAvailability]; len(got) < len(burn) || !slices.Equal(got[len(got)-len(burn):], burn) {
		t.Errorf("group %s records %v, want them to end with %v", GroupAvailability, got, burn)
	}
	want := append(constants, burn...)
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
