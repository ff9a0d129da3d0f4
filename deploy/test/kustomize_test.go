package deploytest

import (
	"os"
	"path/filepath"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const base = "../kubernetes"

// generatedRule is the PrometheusRule make rules generates from slo.yaml.
func generatedRule(t *testing.T, path string) *monitoringv1.PrometheusRule {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects, want one PrometheusRule", path, len(objs))
	}
	pr, ok := objs[0].(*monitoringv1.PrometheusRule)
	if !ok {
		t.Fatalf("%s holds a %T", path, objs[0])
	}
	return pr
}

func TestEveryManifestOfTheBaseDecodesStrictly(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if len(k.Resources) < 6 {
		t.Fatalf("resources %v", k.Resources)
	}
	var objs []any
	for _, r := range k.Resources {
		p := filepath.Join(base, r)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeStrict(p, raw)
		if err != nil {
			t.Error(err)
		}
		objs = append(objs, o...)
	}
	if len(objs) != len(k.Resources) {
		t.Errorf("%d objects in %d files, want one each", len(objs), len(k.Resources))
	}
}

// What kubectl apply -k deploy/kubernetes applies: kustomize's own build.
func TestTheBaseBuildsIntoObjectsThatFitTogether(t *testing.T) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), base)
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict("kustomize build "+base, out)
	if err != nil {
		t.Fatal(err)
	}
	s := collect(t, objs)
	checkSet(t, s, want{pdb: true, hpa: true, operator: true,
		rules: generatedRule(t, filepath.Join(base, "prometheus-operator", "rl-exporter.prometheusrule.yaml"))})
}
