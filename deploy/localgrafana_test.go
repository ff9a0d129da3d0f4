package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/dashboards"
)

// localGrafana is where the stack without Docker keeps its Grafana
// provisioning.
const localGrafana = root + "/deploy/local-stack/grafana"

// grafanaDatasources is a Grafana data source provisioning file, decoded
// strictly by the stack tests (Docker and local).
type grafanaDatasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string `yaml:"name"`
		Type      string `yaml:"type"`
		UID       string `yaml:"uid"`
		Access    string `yaml:"access"`
		URL       string `yaml:"url"`
		IsDefault bool   `yaml:"isDefault"`
		Editable  bool   `yaml:"editable"`
		JSONData  struct {
			TimeInterval string `yaml:"timeInterval"`
		} `yaml:"jsonData"`
	} `yaml:"datasources"`
}

// grafanaDashboardProviders is a Grafana dashboard provisioning file.
type grafanaDashboardProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		OrgID                 int    `yaml:"orgId"`
		Folder                string `yaml:"folder"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

// scriptDefault is the default the local stack script gives a variable
// (": "${NAME:=value}").
func scriptDefault(t *testing.T, script, name string) string {
	t.Helper()
	m := regexp.MustCompile(`"\$\{` + name + `:=([^}]*)\}"`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("scripts/local-stack.sh gives %s no default", name)
	}
	return m[1]
}

func TestTheStackWithoutDockerProvisionsGrafanaWithItsOwnPrometheus(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "scripts", "local-stack.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(raw)

	var ds grafanaDatasources
	decodeStrict(t, filepath.Join(localGrafana, "datasources", "rl-exporter.yml"), &ds)
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("data sources: %+v, want one", ds)
	}
	d := ds.Datasources[0]
	want := "http://127.0.0.1:" + scriptDefault(t, script, "PROMETHEUS_PORT")
	if d.URL != want || d.Type != "prometheus" || !d.IsDefault || d.Access != "proxy" {
		t.Errorf("data source %+v, want the default prometheus data source at %s, where the stack's Prometheus listens", d, want)
	}
	if !strings.Contains(script, `--web.listen-address="127.0.0.1:$PROMETHEUS_PORT"`) {
		t.Error("the stack's Prometheus does not listen on 127.0.0.1:$PROMETHEUS_PORT")
	}
	if !strings.Contains(script, `s#http://127.0.0.1:9480#http://127.0.0.1:$PROMETHEUS_PORT#`) || want != "http://127.0.0.1:9480" {
		t.Error("the script does not rewrite the data source's port when PROMETHEUS_PORT is not the default")
	}

	var dp grafanaDashboardProviders
	decodeStrict(t, filepath.Join(localGrafana, "dashboards", "rl-exporter.yml"), &dp)
	if dp.APIVersion != 1 || len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dp.Providers[0].AllowUIUpdates {
		t.Fatalf("dashboard providers: %+v, want one read-only file provider", dp)
	}
	// Grafana expands the variable, which the script sets to where it
	// generated the dashboards.
	if p := dp.Providers[0].Options.Path; p != "$RL_STACK_DASHBOARDS" {
		t.Errorf("dashboards path %q, want $RL_STACK_DASHBOARDS", p)
	}
	for _, s := range []string{
		`rules --spec "$work/slo.yaml" --out "$work/generated"`,
		`RL_STACK_DASHBOARDS="$work/generated/dashboards" start grafana`,
		`cfg:default.paths.provisioning="$work/grafana/provisioning"`,
		`cp -r deploy/local-stack/grafana/datasources deploy/local-stack/grafana/dashboards "$work/grafana/provisioning/"`,
		`command -v grafana-server`,
	} {
		if !strings.Contains(script, s) {
			t.Errorf("scripts/local-stack.sh lacks %s", s)
		}
	}

	// The dashboard reads the data source through a prometheus $datasource
	// variable, so the provisioned default data source is the one it uses,
	// and names no Docker host.
	board, err := os.ReadFile(filepath.Join(root, "deploy", "generated", filepath.FromSlash(dashboards.OverviewPath)))
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(board, &b); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range b.Templating.List {
		if v.Name == dashboards.VarDatasource && v.Type == "datasource" && v.Query == "prometheus" {
			found = true
		}
	}
	if !found {
		t.Error("the dashboard has no $datasource variable of type prometheus")
	}
	if strings.Contains(string(board), "prometheus:9090") {
		t.Error("the dashboard names the Docker Prometheus")
	}
}
