package slo

import (
	"path/filepath"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// A client in its class's penalty box is answered 429 under
// status="penalized", not "rejected": a rule counting 429s that missed it
// would see a hammering client's refusals stop once the box closes on it.
func TestEveryRuleCountingRejectionsCountsPenalizedRequestsToo(t *testing.T) {
	specs, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specs = append(specs, filepath.Join(repoRoot, "slo.yaml"), filepath.Join(repoRoot, "deploy", "slo.yaml"))
	checked := 0
	for _, spec := range specs {
		m, err := LoadFile(spec)
		if err != nil {
			t.Fatal(err)
		}
		rg, err := m.RuleGroups()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range rg.Groups {
			for _, r := range g.Rules {
				expr, err := promqlParser.ParseExpr(r.Expr)
				if err != nil {
					t.Fatalf("%s: %s: %v", spec, r.Expr, err)
				}
				for _, vs := range parser.ExtractSelectors(expr) {
					if !selects(vs, "__name__", metricRequests) {
						continue
					}
					for _, lm := range vs {
						if lm.Name != "status" || !lm.Matches("rejected") {
							continue
						}
						checked++
						if !lm.Matches("penalized") {
							t.Errorf("%s: %s%s counts status %s but not penalized, also a 429", spec, r.Record, r.Alert, lm)
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no rule counts rejections: the check saw nothing")
	}
}

// selects says whether a selector's matcher on name matches value.
func selects(vs []*labels.Matcher, name, value string) bool {
	for _, lm := range vs {
		if lm.Name == name && lm.Matches(value) {
			return true
		}
	}
	return false
}
