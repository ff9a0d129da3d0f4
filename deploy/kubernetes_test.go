package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v3"

	"github.com/rl-exporter/rl-exporter/slo"
)

func TestTheServiceMonitorExampleDecodesStrictlyAndScrapesTheSpecsJob(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var sm monitoringv1.ServiceMonitor
	if err := dec.Decode(&sm); err != nil {
		t.Fatalf("strict decoding into ServiceMonitor: %v", err)
	}
	if sm.Kind != monitoringv1.ServiceMonitorsKind || sm.APIVersion != "monitoring.coreos.com/v1" {
		t.Errorf("type %+v", sm.TypeMeta)
	}
	m, err := slo.LoadFile(filepath.Join(root, "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The job label comes from the Service label the monitor selects on,
	// and is the job the generated rules and dashboards read.
	if job := sm.Spec.Selector.MatchLabels[sm.Spec.JobLabel]; sm.Spec.JobLabel == "" || job != m.Job {
		t.Errorf("the scraped job is %q (jobLabel %q), the spec's is %q", job, sm.Spec.JobLabel, m.Job)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" || sm.Spec.Endpoints[0].Port == "" {
		t.Errorf("endpoints %+v, want one named port scraped at /metrics", sm.Spec.Endpoints)
	}
}

// The kustomize base applies the PrometheusRule generated from the
// repository's slo.yaml (make rules writes it), so the rules on a cluster
// are the ones the promtool tests check.
func TestTheKubernetesBasesOperatorResourcesMatchTheGenerator(t *testing.T) {
	m, err := slo.LoadFile(filepath.Join(root, "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := slo.GenerateOperator(m)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files, func(f slo.File) bool { return f.Path == slo.PrometheusRulePath }) {
		t.Fatalf("the generator writes no %s", slo.PrometheusRulePath)
	}
	for _, f := range files {
		p := filepath.Join("kubernetes", filepath.FromSlash(f.Path))
		if *update {
			if err := os.WriteFile(p, f.Content, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, f.Content) {
			t.Errorf("deploy/%s differs from what slo.yaml generates (%v): regenerate with make rules", p, err)
		}
	}
}
