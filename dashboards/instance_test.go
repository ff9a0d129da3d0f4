package dashboards

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashboard-linter's target-job and target-instance rules, for every
// series: a query of an exported series selects $job and $instance, so
// that both variables filter every panel; a recorded series (level:metric:ops)
// has the instance aggregated away and selects $job alone.
func TestEveryExportedSeriesIsSelectedByJobAndInstance(t *testing.T) {
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
					name, job, instance := "", false, false
					for _, lm := range vs {
						switch lm.Name {
						case "__name__":
							name = lm.Value
						case "job":
							job = true
						case "instance":
							instance = true
						}
					}
					checked++
					if !job {
						t.Errorf("%s: panel %q: %s selects no job", path, pn.Title, name)
					}
					if !strings.Contains(name, ":") && !instance {
						t.Errorf("%s: panel %q: exported series %s selects no instance", path, pn.Title, name)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no query seen")
	}
}
