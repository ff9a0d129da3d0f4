package slo

import (
	"path/filepath"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// Prometheus evaluates the groups concurrently and the rules of one group
// in order: a rule reading a record of another group, or one recorded
// later in its own, reads it one evaluation late or not at all on the
// first one (pint's rule/dependency). Every record a rule reads must come
// before it in its group.
func TestEveryRuleReadsOnlyRecordsEvaluatedBeforeItInItsGroup(t *testing.T) {
	specs, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specs = append(specs, filepath.Join(repoRoot, "slo.yaml"), filepath.Join(repoRoot, "deploy", "slo.yaml"))
	for _, spec := range specs {
		m, err := LoadFile(spec)
		if err != nil {
			t.Fatal(err)
		}
		rg, err := m.RuleGroups()
		if err != nil {
			t.Fatal(err)
		}
		groupOf := map[string]string{}
		for _, g := range rg.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					groupOf[r.Record] = g.Name
				}
			}
		}
		checked := 0
		for _, g := range rg.Groups {
			before := map[string]bool{}
			for _, r := range g.Rules {
				expr, err := promqlParser.ParseExpr(r.Expr)
				if err != nil {
					t.Fatalf("%s: %s: %v", spec, r.Expr, err)
				}
				for _, vs := range parser.ExtractSelectors(expr) {
					for _, lm := range vs {
						if lm.Name != "__name__" {
							continue
						}
						home, recorded := groupOf[lm.Value]
						switch {
						case !recorded:
						case home != g.Name:
							t.Errorf("%s: %s%s in group %s reads %s, recorded in group %s", spec, r.Record, r.Alert, g.Name, lm.Value, home)
						case !before[lm.Value]:
							t.Errorf("%s: %s%s reads %s, recorded after it in group %s", spec, r.Record, r.Alert, lm.Value, g.Name)
						default:
							checked++
						}
					}
				}
				if r.Record != "" {
					before[r.Record] = true
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no rule reads a record: the check saw nothing", spec)
		}
	}
}
