package dashboards

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/slo"
)

// variableBoard is what Grafana and its dashboard linter read of a
// dashboard's variables and editability.
type variableBoard struct {
	Editable   *bool `json:"editable"`
	Templating struct {
		List []struct {
			Name    string `json:"name"`
			Type    string `json:"type"`
			Label   string `json:"label"`
			Multi   bool   `json:"multi"`
			Query   any    `json:"query"`
			Current struct {
				Value any `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestTheOverviewOffersJobAndInstanceVariablesAndIsNotEditable(t *testing.T) {
	m := repoModel(t)
	m.Job = "api-limiter"
	var b variableBoard
	if err := json.Unmarshal(generate(t, m)[OverviewPath], &b); err != nil {
		t.Fatal(err)
	}
	if b.Editable == nil || *b.Editable {
		t.Errorf("editable = %v, want false: the dashboard is generated, edits belong in the spec", b.Editable)
	}
	vars := map[string]int{}
	for i, v := range b.Templating.List {
		vars[v.Name] = i
	}
	for _, want := range []struct {
		name, typ, label string
		value            any
		multi            bool
	}{
		{VarDatasource, "datasource", "Data source", nil, false},
		{VarJob, "query", "Job", "api-limiter", false},
		{VarInstance, "query", "Instance", []any{"$__all"}, true},
	} {
		i, ok := vars[want.name]
		if !ok {
			t.Errorf("no $%s variable", want.name)
			continue
		}
		v := b.Templating.List[i]
		if v.Type != want.typ || v.Label != want.label || v.Multi != want.multi {
			t.Errorf("$%s: type %q label %q multi %v, want %q %q %v", want.name, v.Type, v.Label, v.Multi, want.typ, want.label, want.multi)
		}
		if want.value != nil {
			got, _ := json.Marshal(v.Current.Value)
			exp, _ := json.Marshal(want.value)
			if string(got) != string(exp) {
				t.Errorf("$%s defaults to %s, want %s", want.name, got, exp)
			}
		}
	}
	if vars[VarJob] > vars[VarInstance] || vars[VarInstance] > vars[VarEndpoint] {
		t.Errorf("variables in order %v: $instance reads $job, and $endpoint reads both, so they come in that order", vars)
	}
	// Every query selects the job through the variable, never a fixed job
	// (dashboard-linter's target-job): a recorded series that aggregates
	// the job away would draw every job's lines whatever $job says. A
	// query of a raw series selects the instance too.
	for _, p := range b.Panels {
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, `job=~"$job"`) {
				t.Errorf("panel %q: query does not select job=~\"$job\": %s", p.Title, tg.Expr)
			}
			if strings.Contains(tg.Expr, "rate_limit_requests_total") && !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q: query of a raw series does not select instance=~\"$instance\": %s", p.Title, tg.Expr)
			}
			if strings.Contains(tg.Expr, "api-limiter") {
				t.Errorf("panel %q: query fixes the spec's job: %s", p.Title, tg.Expr)
			}
		}
	}
}

func TestTheBudgetPanelReadsTheSLORecordNotAPeriodLongQuery(t *testing.T) {
	var b variableBoard
	if err := json.Unmarshal(generate(t, repoModel(t))[OverviewPath], &b); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range b.Panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "[30d]") {
				t.Errorf("panel %q computes over the whole period on every refresh: %s", p.Title, tg.Expr)
			}
			if strings.HasPrefix(p.Title, "Error budget remaining") && tg.Expr == slo.SLOBudgetRemainingRecord+`{job=~"$job"}` {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no budget panel reading %s", slo.SLOBudgetRemainingRecord)
	}
}
