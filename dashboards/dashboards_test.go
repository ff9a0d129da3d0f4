package dashboards

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/slo"
)

var update = flag.Bool("update", false, "rewrite the committed dashboards from the generator")

// repoSpec is the SLO spec the committed dashboards are generated from.
const repoSpec = "../slo.yaml"

func repoModel(t *testing.T) *slo.Model {
	t.Helper()
	m, err := slo.LoadFile(repoSpec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func generate(t *testing.T, m *slo.Model) map[string][]byte {
	t.Helper()
	files, err := Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		out[f.Path] = f.Content
	}
	return out
}

func TestCommittedDashboardsMatchTheGenerator(t *testing.T) {
	for path, want := range generate(t, repoModel(t)) {
		file := filepath.Join("..", filepath.FromSlash(path))
		if *update {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run: go test ./dashboards -update, or rl-exporter rules --spec slo.yaml --out .)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator makes of %s: it was edited by hand or the generator changed; "+
				"regenerate with: go test ./dashboards -update (or rl-exporter rules --spec slo.yaml --out .)", file, repoSpec)
		}
	}
	// Every committed dashboard is one the generator makes.
	committed, _ := filepath.Glob(filepath.Join("..", Dir, "*.json"))
	generated := generate(t, repoModel(t))
	for _, f := range committed {
		rel := filepath.ToSlash(strings.TrimPrefix(f, ".."+string(filepath.Separator)))
		if _, ok := generated[rel]; !ok {
			t.Errorf("%s is committed but not generated: remove it", f)
		}
	}
}

// board is a dashboard as Grafana reads it: the JSON, not the Go types.
type board struct {
	UID         string `json:"uid"`
	Description string `json:"description"`
	Templating  struct {
		List []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Query      json.RawMessage `json:"query"`
			Datasource *dsRef          `json:"datasource"`
			AllValue   string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type jsonTarget struct {
	RefID      string `json:"refId"`
	Expr       string `json:"expr"`
	Datasource *dsRef `json:"datasource"`
}

type panel struct {
	ID          int          `json:"id"`
	Type        string       `json:"type"`
	Title       string       `json:"title"`
	Description string       `json:"description"`
	Datasource  *dsRef       `json:"datasource"`
	Targets     []jsonTarget `json:"targets"`
	Links       []struct {
		Title string `json:"title"`
		URL   string `json:"url"`
	} `json:"links"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds struct {
				Steps []struct {
					Value *float64 `json:"value"`
					Color string   `json:"color"`
				} `json:"steps"`
			} `json:"thresholds"`
			Custom struct {
				ThresholdsStyle struct {
					Mode string `json:"mode"`
				} `json:"thresholdsStyle"`
			} `json:"custom"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options any    `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Options struct {
		YAxis struct {
			Unit string `json:"unit"`
		} `json:"yAxis"`
	} `json:"options"`
}

// thresholdLines are the values a panel draws as threshold lines.
func (p panel) thresholdLines() []float64 {
	if p.FieldConfig.Defaults.Custom.ThresholdsStyle.Mode == "off" || p.FieldConfig.Defaults.Custom.ThresholdsStyle.Mode == "" {
		return nil
	}
	var out []float64
	for _, s := range p.FieldConfig.Defaults.Thresholds.Steps {
		if s.Value != nil {
			out = append(out, *s.Value)
		}
	}
	return out
}

func decodeBoards(t *testing.T, files map[string][]byte) map[string]board {
	t.Helper()
	out := map[string]board{}
	for path, content := range files {
		var b board
		dec := json.NewDecoder(bytes.NewReader(content))
		if err := dec.Decode(&b); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[path] = b
	}
	return out
}

// committedBoards reads the dashboards as committed, which is what Grafana
// provisions.
func committedBoards(t *testing.T) map[string]board {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", Dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no committed dashboard under ../%s (%v)", Dir, err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = b
	}
	return decodeBoards(t, files)
}

func TestEveryDashboardSaysItIsGenerated(t *testing.T) {
	for path, b := range committedBoards(t) {
		if !strings.HasPrefix(b.Description, "Code generated by rl-exporter rules from slo.yaml. DO NOT EDIT") {
			t.Errorf("%s: description %q does not start with the generated marker", path, b.Description)
		}
		if b.UID == "" {
			t.Errorf("%s: no uid: links to it would break on every provisioning", path)
		}
	}
}

// series is one series a query may name, with the labels it carries.
type series map[string][]string

// exportedSeries lists what the exporter exports, taken from the
// collector's own registry (every series exists from start-up), with the
// histograms' _bucket, _sum and _count series and the labels Prometheus
// adds at scrape time.
func exportedSeries(t *testing.T) series {
	t.Helper()
	c, err := collector.New(collector.Config{Endpoints: []string{"GET /x", "GET /jobs"}, Tiers: []string{"free"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetLimit("GET /x", "free", limiter.PerMinute(limiter.FixedWindow, 10)); err != nil {
		t.Fatal(err)
	}
	// The cost series start with a label set's first reservation.
	c.CostReserved("GET /x", "free", 100)
	c.CostSettled("GET /x", "free", limiter.Settlement{Estimate: 100, Actual: 60, Refunded: 40}, true)
	c.CostUnknown("GET /x", "free", "missing")
	// A concurrency limit's series start when it is set.
	if err := c.SetLeaseLimit("GET /jobs", "free", limiter.LeaseLimit{Limit: 5}); err != nil {
		t.Fatal(err)
	}
	// The multi-region series come from their own collector, which serve
	// registers beside the first when region: is set; one sync round, one
	// decision and one round trip make every series of it appear.
	rc, err := collector.NewRegion(collector.RegionConfig{Peers: []string{"ap-northeast-1"}, Modes: []string{"strict"}})
	if err != nil {
		t.Fatal(err)
	}
	rc.ObserveSync("ap-northeast-1", 100*time.Millisecond, nil)
	rc.ObserveRTT("ap-northeast-1", 80*time.Millisecond)
	if err := c.Registry().Register(rc); err != nil {
		t.Fatal(err)
	}
	// So do server.overload's, registered when it is on.
	oc, err := collector.NewOverload(collector.OverloadConfig{Upstream: "api:8080", Priorities: []string{"critical"}, Reasons: []string{"limit"},
		State: func() (int, int) { return 20, 3 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Registry().Register(oc); err != nil {
		t.Fatal(err)
	}
	// And the rate limit quota service's, registered when rlqs is on.
	qc, err := collector.NewQuota(collector.QuotaConfig{Stats: func() collector.QuotaStats {
		return collector.QuotaStats{Streams: 2, Rules: map[string]collector.QuotaRuleStats{"chat.name_chat": {Demand: 40, Assigned: 10}},
			Expired: map[string]uint64{"chat.name_chat": 0}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Registry().Register(qc); err != nil {
		t.Fatal(err)
	}
	families, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := series{}
	for _, f := range families {
		labels := []string{"job", "instance"}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		name := f.GetName()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"] = append(slices.Clone(labels), "le")
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
		case dto.MetricType_SUMMARY:
			out[name] = append(slices.Clone(labels), "quantile")
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
		default:
			out[name] = labels
		}
	}
	return out
}

// recordedSeries lists the recording rules the generator writes for m, with
// the labels each keeps (nil when the expression's output labels cannot be
// told from its shape, which the test then reports).
func recordedSeries(t *testing.T, m *slo.Model) series {
	t.Helper()
	rg, err := m.RuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	out := series{}
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("recording rule %s: %v", r.Record, err)
			}
			labels, ok := outputLabels(expr)
			if !ok {
				t.Fatalf("recording rule %s: cannot tell the labels of %s", r.Record, r.Expr)
			}
			for l := range r.Labels {
				if !slices.Contains(labels, l) {
					labels = append(labels, l)
				}
			}
			out[r.Record] = labels
		}
	}
	return out
}

// outputLabels tells which labels the result of an expression carries, for
// the shapes the generator writes: aggregations by labels, arithmetic and
// filtering on them, histogram_quantile over them.
func outputLabels(e parser.Expr) ([]string, bool) {
	switch e := e.(type) {
	case *parser.ParenExpr:
		return outputLabels(e.Expr)
	case *parser.AggregateExpr:
		if e.Without {
			return nil, false
		}
		return slices.Clone(e.Grouping), true
	case *parser.BinaryExpr:
		if l, ok := outputLabels(e.LHS); ok {
			return l, true
		}
		if _, isNum := e.LHS.(*parser.NumberLiteral); isNum {
			return outputLabels(e.RHS)
		}
		return nil, false
	case *parser.Call:
		if e.Func.Name == "vector" {
			return nil, true
		}
		if e.Func.Name == "histogram_quantile" && len(e.Args) == 2 {
			l, ok := outputLabels(e.Args[1])
			return slices.DeleteFunc(l, func(s string) bool { return s == "le" }), ok
		}
	}
	return nil, false
}

// substitutions replace Grafana's variables by values the PromQL parser
// accepts, as Grafana would before sending the query.
var substitutions = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "30s",
	"$__range", "3h",
	"$job", "rl-exporter",
	"$instance", "10.0.0.1:8080|10.0.0.2:8080",
	"${endpoint}", "GET /api/v1/orders/\\\\{id\\\\}",
	"$endpoint", "GET /api/v1/orders/\\\\{id\\\\}",
	"${plan_tier}", "free|pro",
	"$plan_tier", "free|pro",
)

var leftoverVariable = regexp.MustCompile(`\$\{?\w+`)

// labelValues matches a Grafana label_values(selector, label) query.
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// query is one PromQL expression of a dashboard and where it is.
type query struct{ where, expr string }

func boardQueries(b board) ([]query, error) {
	var out []query
	for _, v := range b.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("variable %s: query is not a string: %s", v.Name, v.Query)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q)
		}
		out = append(out, query{where: "variable " + v.Name, expr: m[1]})
	}
	for _, p := range b.Panels {
		for _, tg := range p.Targets {
			out = append(out, query{where: fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	return out, nil
}

// reporter is the part of testing.T the query check reports to.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// checkQueries parses every query of every board with the Prometheus PromQL
// parser and checks that each series it names is exported or recorded, and
// that it selects and groups only by labels those series carry.
func checkQueries(t reporter, boards map[string]board, known series) {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	for path, b := range boards {
		qs, err := boardQueries(b)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if len(qs) == 0 {
			t.Errorf("%s: no query at all", path)
		}
		for _, q := range qs {
			expr := substitutions.Replace(q.expr)
			if v := leftoverVariable.FindString(expr); v != "" {
				t.Errorf("%s: %s: unknown variable %s in %s", path, q.where, v, q.expr)
				continue
			}
			parsed, err := p.ParseExpr(expr)
			if err != nil {
				t.Errorf("%s: %s: %v\n%s", path, q.where, err, expr)
				continue
			}
			checkExpr(t, fmt.Sprintf("%s: %s", path, q.where), parsed, known)
		}
	}
}

func checkExpr(t reporter, where string, e parser.Expr, known series) {
	t.Helper()
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			labels, ok := known[n.Name]
			if n.Name == "" || !ok {
				t.Errorf("%s: series %q is neither exported by rl-exporter nor recorded by the generated rules", where, n.Name)
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != "__name__" && !slices.Contains(labels, m.Name) {
					t.Errorf("%s: %s has no label %q (it has %s)", where, n.Name, m.Name, strings.Join(labels, ", "))
				}
			}
		case *parser.AggregateExpr:
			var have []string
			parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
				if vs, ok := inner.(*parser.VectorSelector); ok {
					have = append(have, known[vs.Name]...)
				}
				return nil
			})
			for _, g := range n.Grouping {
				if !slices.Contains(have, g) {
					t.Errorf("%s: groups by %q, which no series under %s carries", where, g, n.String())
				}
			}
		}
		return nil
	})
}

func knownSeries(t *testing.T, m *slo.Model) series {
	known := exportedSeries(t)
	for name, labels := range recordedSeries(t, m) {
		known[name] = labels
	}
	return known
}

func TestEveryQueryParsesAndNamesOnlySeriesThatExist(t *testing.T) {
	m := repoModel(t)
	checkQueries(t, committedBoards(t), knownSeries(t, m))
}

// collected gathers what the check reports, to show it fails on a bad
// dashboard.
type collected struct{ errs []string }

func (c *collected) Helper() {}
func (c *collected) Errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func TestTheQueryCheckCatchesSeriesNobodyProduces(t *testing.T) {
	m := repoModel(t)
	known := knownSeries(t, m)
	cases := map[string]string{
		"a misspelt series":               `sum(rate(rate_limit_request_total{job="rl-exporter"}[5m]))`,
		"a label the series lacks":        `sum(rate(rate_limit_fail_open_total{plan_tier=~"$plan_tier"}[5m]))`,
		"grouping by a label nobody has":  `sum by (tier) (rate(rate_limit_requests_total[5m]))`,
		"a recording rule never written":  `endpoint_plan_tier:rate_limit_rejections:ratio_rate7m`,
		"a job label the rule dropped":    `endpoint_plan_tier:rate_limit_rejections:ratio_rate5m{job="rl-exporter"}`,
		"a template variable not defined": `rate(rate_limit_requests_total{endpoint=~"$route"}[5m])`,
		"a query that does not parse":     `sum by (endpoint (rate(rate_limit_requests_total[5m]))`,
	}
	for name, expr := range cases {
		t.Run(name, func(t *testing.T) {
			var b board
			b.Panels = []panel{{Title: "x"}}
			b.Panels[0].Targets = append(b.Panels[0].Targets, jsonTarget{RefID: "A", Expr: expr})
			c := &collected{}
			checkQueries(c, map[string]board{"bad.json": b}, known)
			if len(c.errs) == 0 {
				t.Fatalf("the check accepted %s", expr)
			}
		})
	}
	// The same check passes a good query, so the failures above are the
	// faults and not the harness.
	var b board
	b.Panels = []panel{{Title: "x"}}
	b.Panels[0].Targets = append(b.Panels[0].Targets, jsonTarget{RefID: "A",
		Expr: `sum by (endpoint) (rate(rate_limit_requests_total{job="rl-exporter", plan_tier=~"$plan_tier"}[$__rate_interval]))`})
	c := &collected{}
	checkQueries(c, map[string]board{"good.json": b}, known)
	if len(c.errs) != 0 {
		t.Fatalf("the check refused a good query: %v", c.errs)
	}
}

func TestDashboardsUseTheVariablesGrafanaUsersExpect(t *testing.T) {
	for path, b := range committedBoards(t) {
		vars := map[string]string{}
		for _, v := range b.Templating.List {
			vars[v.Name] = v.Type
			if v.Datasource != nil && v.Datasource.UID != "${datasource}" {
				t.Errorf("%s: variable %s reads datasource %q, not ${datasource}", path, v.Name, v.Datasource.UID)
			}
		}
		want := map[string]string{VarDatasource: "datasource", VarEndpoint: "query", VarPlanTier: "query"}
		for name, typ := range want {
			if vars[name] != typ {
				t.Errorf("%s: variable $%s is %q, want a %s variable", path, name, vars[name], typ)
			}
		}
		for _, p := range b.Panels {
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
				t.Errorf("%s: panel %q: datasource %+v, want prometheus ${datasource}", path, p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s: panel %q query %s: datasource %+v, want ${datasource}", path, p.Title, tg.RefID, tg.Datasource)
				}
			}
		}
		raw, err := os.ReadFile(filepath.Join("..", OverviewPath))
		if err != nil {
			t.Fatal(err)
		}
		// No datasource is named by anything but the variable.
		uids := regexp.MustCompile(`"uid":\s*"([^"]*)"`).FindAllStringSubmatch(string(raw), -1)
		for _, u := range uids {
			if u[1] != "${datasource}" && u[1] != OverviewUID {
				t.Errorf("%s: hard-coded uid %q", path, u[1])
			}
		}
	}
}

var allowedUnits = []string{unitReqPerSec, unitOpsPerSec, unitRatio, unitSeconds, unitCount, unitTimes}

func TestEveryPanelHasAUnit(t *testing.T) {
	for path, b := range committedBoards(t) {
		for _, p := range b.Panels {
			if p.Type == "row" {
				continue
			}
			if u := p.FieldConfig.Defaults.Unit; !slices.Contains(allowedUnits, u) {
				t.Errorf("%s: panel %q: unit %q, want one of %s", path, p.Title, u, strings.Join(allowedUnits, ", "))
			}
			if p.Type == "heatmap" && p.Options.YAxis.Unit != unitSeconds {
				t.Errorf("%s: heatmap %q: y axis unit %q, want s", path, p.Title, p.Options.YAxis.Unit)
			}
			for _, o := range p.FieldConfig.Overrides {
				for _, prop := range o.Properties {
					if prop.ID == "unit" && !slices.Contains(allowedUnits, fmt.Sprint(prop.Value)) {
						t.Errorf("%s: panel %q: override unit %v", path, p.Title, prop.Value)
					}
				}
			}
		}
	}
}

// customSpec moves every threshold away from its default, so a dashboard
// that hard-coded one would show it.
const customSpec = `
job: api-limiter
runbook_url: https://runbooks.example.com/rate-limits
rejection_ratio: {threshold_percent: 7.5, window: 10m, min_requests_per_second: 2}
store_latency: {threshold: 25ms, quantile: 0.95, runbook_url: https://runbooks.example.com/store}
fail_open: {threshold: 20, window: 2m}
availability:
  objective_percent: 99.5
  period: 28d
  windows:
    - {long: 1h, short: 5m, budget_percent: 2, severity: page, for: 2m}
    - {long: 1d, short: 2h, budget_percent: 10, severity: ticket, for: 15m}
    - {long: 2h, short: 10m, budget_percent: 100, severity: page, for: 15m}
regions: {sync_lag_threshold: 500ms, sync_lag_for: 1m, sync_lag_severity: ticket}
`

func TestThresholdLinesAndRunbooksFollowTheSpec(t *testing.T) {
	m, err := slo.Load([]byte(customSpec), "custom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	boards := decodeBoards(t, generate(t, m))
	b := boards[OverviewPath]
	if !strings.HasPrefix(b.Description, "Code generated by rl-exporter rules from custom.yaml. DO NOT EDIT") {
		t.Errorf("description %q does not name the spec", b.Description)
	}
	checkQueries(t, boards, knownSeries(t, m))

	// The burn-rate factors, as the model computes them: 2 % of 28 d in
	// 1 h is 13.44×; 10 % in 1 d is 2.8×; 100 % in 2 h is 336×, which
	// against 0.5 % errors can never fire and gets no line.
	burn := m.Availability.Rows
	if burn[0].Factor != 13.44 || burn[1].Factor != 2.8 || burn[2].CanFire {
		t.Fatalf("model burn rows %+v", burn)
	}
	rejection := m.Rejection.RunbookURL
	want := map[string]struct {
		lines   []float64
		runbook string
	}{
		"429 ratio by endpoint and plan tier":     {[]float64{0.075}, rejection},
		"Store latency p50 / p95":                 {[]float64{0.025}, "https://runbooks.example.com/store"},
		"Fail-open and fail-closed events per 2m": {[]float64{20}, m.FailOpen.RunbookURL},
		"Error budget burn rate":                  {[]float64{2.8, 13.44}, m.Availability.Template.RunbookURL},
		"429 ratio week by week":                  {[]float64{0.075}, rejection},
		"Sync lag by peer region":                 {[]float64{0.5}, m.Regions.SyncLag.RunbookURL},
	}
	seen := map[string]bool{}
	for _, p := range b.Panels {
		w, ok := want[p.Title]
		if !ok {
			if lines := p.thresholdLines(); len(lines) > 0 {
				t.Errorf("panel %q draws threshold lines %v the spec does not set", p.Title, lines)
			}
			continue
		}
		seen[p.Title] = true
		if got := p.thresholdLines(); !slices.Equal(got, w.lines) {
			t.Errorf("panel %q: threshold lines %v, want %v", p.Title, got, w.lines)
		}
		if len(p.Links) == 0 || p.Links[0].URL != w.runbook {
			t.Errorf("panel %q: links %+v, want the runbook %s", p.Title, p.Links, w.runbook)
		}
	}
	for title := range want {
		if !seen[title] {
			t.Errorf("no panel %q", title)
		}
	}
	if !strings.Contains(string(generate(t, m)[OverviewPath]), `"text": "api-limiter"`) {
		t.Error("the $job variable does not default to the spec's job")
	}
}

// The lines are the alerts' own thresholds: each number drawn appears in
// the expression of the alert it stands for, as the generator writes it.
func TestThresholdLinesAreTheAlertThresholds(t *testing.T) {
	m := repoModel(t)
	rg, err := m.RuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string][]string{}
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				exprs[r.Alert] = append(exprs[r.Alert], r.Expr)
			}
		}
	}
	alertOf := map[string]string{
		"429 ratio by endpoint and plan tier": slo.AlertRejectionRatioHigh,
		"429 ratio week by week":              slo.AlertRejectionRatioHigh,
		"Error budget burn rate":              slo.AlertErrorBudgetBurn,
	}
	alertOf["Store latency p50 / "+quantileName(m.Latency.Quantile)] = slo.AlertStoreLatencyHigh
	alertOf["Fail-open and fail-closed events per "+duration(m.FailOpen.Window)] = slo.AlertFailOpen
	alertOf["Sync lag by peer region"] = slo.AlertRegionSyncLagHigh
	budget := 1 - m.Availability.Objective
	checked := 0
	for _, b := range committedBoards(t) {
		for _, p := range b.Panels {
			lines := p.thresholdLines()
			if len(lines) == 0 {
				continue
			}
			alert, ok := alertOf[p.Title]
			if !ok {
				t.Errorf("panel %q draws lines %v but stands for no alert", p.Title, lines)
				continue
			}
			for _, v := range lines {
				th := v
				if alert == slo.AlertErrorBudgetBurn {
					th = roundSig(v * budget) // a burn factor is an error ratio over the budget
				}
				if !slices.ContainsFunc(exprs[alert], func(e string) bool {
					return strings.Contains(e, "> "+formatFloat(th)+"\n") || strings.HasSuffix(e, "> "+formatFloat(th))
				}) {
					t.Errorf("panel %q: line at %v (threshold %v) is in no %s expression: %q", p.Title, v, th, alert, exprs[alert])
				}
				checked++
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d threshold lines", checked)
	}
}

func TestEveryPanelWatchingAnAlertLinksToItsRunbook(t *testing.T) {
	m := repoModel(t)
	runbooks := []string{m.Rejection.RunbookURL, m.Latency.RunbookURL, m.FailOpen.RunbookURL, m.Availability.Template.RunbookURL,
		m.Regions.SyncLag.RunbookURL, m.Regions.Unreachable.RunbookURL, m.CostExpired.RunbookURL, m.CostEstimate.RunbookURL,
		m.Overload.CriticalShed.RunbookURL, m.LeasesExpired.RunbookURL, m.QuotaExpired.RunbookURL}
	for path, b := range committedBoards(t) {
		for _, p := range b.Panels {
			if p.Type == "row" || p.Title == "Instances by version" {
				continue
			}
			if len(p.Links) == 0 {
				t.Errorf("%s: panel %q has no runbook link", path, p.Title)
			}
			for _, l := range p.Links {
				if !slices.Contains(runbooks, l.URL) {
					t.Errorf("%s: panel %q links to %s, which is no alert's runbook", path, p.Title, l.URL)
				}
			}
		}
	}
}

func TestTheOverviewHasThePanelsOperatorsAskFor(t *testing.T) {
	m := repoModel(t)
	b := committedBoards(t)[filepath.Join("..", OverviewPath)]
	var titles []string
	exprs := map[string]string{}
	for _, p := range b.Panels {
		titles = append(titles, p.Type+": "+p.Title)
		for _, tg := range p.Targets {
			exprs[p.Title] += tg.Expr + "\n"
		}
	}
	sort.Strings(titles)
	wantContains := map[string][]string{
		"Decisions per second by endpoint":                  {"sum by (endpoint, status)", "rate_limit_requests_total"},
		"Decisions per second by plan tier":                 {"sum by (plan_tier, status)"},
		"429 ratio by endpoint and plan tier":               {"[" + duration(m.Rejection.Window) + "]", `status=~"rejected|penalized"`},
		"Limit in force against usage":                      {"rate_limit_limit", "rate_limit_near_limit_total"},
		"Store latency p50 / p99":                           {"histogram_quantile(0.5,", "histogram_quantile(0.99,", "rate_limit_redis_duration_seconds_bucket"},
		"Store latency distribution":                        {"sum by (le) (increase(rate_limit_redis_duration_seconds_bucket"},
		"Fail-open and fail-closed events per 1m":           {"rate_limit_fail_open_total", "rate_limit_fail_closed_total", slo.FailOpenRecord(time.Minute)},
		"Error budget remaining (30d)":                      {slo.SLOBudgetRemainingRecord},
		"Error budget burn rate":                            {slo.ErrorRatioRecord(time.Hour), slo.ErrorRatioRecord(5 * time.Minute)},
		"429 ratio week by week":                            {"[1w]", `status=~"rejected|penalized"`},
		"Sync lag by peer region":                           {"max by (peer_region) (rate_limit_region_sync_lag_seconds"},
		"Sync errors per second by peer region":             {"sum by (peer_region) (rate(rate_limit_region_sync_errors_total"},
		"Region decisions per second by mode and home":      {"sum by (mode, home) (rate(rate_limit_region_decisions_total"},
		"Cross-region round trip p50 / p99":                 {"histogram_quantile(0.99, sum by (peer_region, le) (rate(rate_limit_region_rtt_seconds_bucket"},
		"Quota shares assigned and demand reported by rule": {`rate_limit_quota_share{`, `kind="assigned"`, `kind="demand"`},
		"Quota service streams by instance":                 {"sum by (instance) (rate_limit_rlqs_streams"},
		"Quota assignments expired unrenewed per second":    {"sum by (endpoint) (rate(rate_limit_rlqs_assignments_expired_total", "rate_limit_rlqs_store_errors_total"},
	}
	for title, parts := range wantContains {
		e, ok := exprs[title]
		if !ok {
			t.Errorf("no panel %q among %s", title, strings.Join(titles, "; "))
			continue
		}
		for _, part := range parts {
			if !strings.Contains(e, part) {
				t.Errorf("panel %q: queries lack %q:\n%s", title, part, e)
			}
		}
	}
	heatmaps := 0
	for _, p := range b.Panels {
		if p.Type == "heatmap" {
			heatmaps++
		}
	}
	if heatmaps != 1 {
		t.Errorf("%d heatmap panels, want the store latency heatmap", heatmaps)
	}
}

func TestTheRegionsRowComesWithTheRegionsBlockOnly(t *testing.T) {
	for name, tt := range map[string]struct {
		spec string
		want bool
	}{
		"a spec with a regions block has the row": {"regions: {}\n", true},
		"a spec without one has no region panels": {"job: rl-exporter\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := slo.Load([]byte(tt.spec), "spec.yaml")
			if err != nil {
				t.Fatal(err)
			}
			b := decodeBoards(t, generate(t, m))[OverviewPath]
			var row bool
			var regionQueries int
			for _, p := range b.Panels {
				row = row || (p.Type == "row" && p.Title == RegionsRowTitle)
				for _, tg := range p.Targets {
					if strings.Contains(tg.Expr, "rate_limit_region_") {
						regionQueries++
					}
				}
			}
			if row != tt.want || (regionQueries > 0) != tt.want {
				t.Errorf("row %v, %d queries of region series; want the row and its queries %v", row, regionQueries, tt.want)
			}
		})
	}
}
