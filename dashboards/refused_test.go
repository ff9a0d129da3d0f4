package dashboards

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// A 429 is status="rejected" or, for a client in its class's penalty box,
// status="penalized": a panel counting 429s that missed the second would
// show a hammering client's refusals stop once the box closes on it.
func TestEveryPanelCountingRejectionsCountsPenalizedRequestsToo(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	checked := 0
	for path, b := range committedBoards(t) {
		for _, pn := range b.Panels {
			for _, tg := range pn.Targets {
				expr, err := p.ParseExpr(substitutions.Replace(tg.Expr))
				if err != nil {
					t.Fatalf("%s: panel %q: %v", path, pn.Title, err)
				}
				for _, vs := range parser.ExtractSelectors(expr) {
					requests := false
					for _, lm := range vs {
						requests = requests || lm.Name == "__name__" && lm.Matches(metricRequests)
					}
					for _, lm := range vs {
						if !requests || lm.Name != "status" || !lm.Matches("rejected") {
							continue
						}
						checked++
						if !lm.Matches("penalized") {
							t.Errorf("%s: panel %q counts status %s but not penalized, also a 429", path, pn.Title, lm)
						}
					}
				}
				if strings.Contains(pn.Title, "429") && !strings.Contains(tg.Expr, "penalized") {
					t.Errorf("%s: panel %q: %s leaves out the penalized 429s", path, pn.Title, tg.Expr)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no panel counts rejections: the check saw nothing")
	}
}
