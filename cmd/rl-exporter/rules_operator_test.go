package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRulesWritesPrometheusOperatorResourcesAndLeavesTheRuleTestsAlone(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"rules", "--spec", "../../slo.yaml", "--out", dir}, nil, &out, &errb); got != exitOK {
		t.Fatalf("files: exit %d: %s", got, errb.String())
	}
	tests, _ := filepath.Glob(filepath.Join(dir, "rules-tests", "*.yml"))
	if len(tests) == 0 {
		t.Fatal("no rule tests written")
	}
	out.Reset()
	if got := run(context.Background(), []string{"rules", "--spec", "../../slo.yaml", "--out", dir, "--format", "prometheus-operator"}, nil, &out, &errb); got != exitOK {
		t.Fatalf("prometheus-operator: exit %d: %s", got, errb.String())
	}
	for file, kind := range map[string]string{
		"prometheus-operator/rl-exporter.prometheusrule.yaml":     "kind: PrometheusRule",
		"prometheus-operator/rl-exporter.alertmanagerconfig.yaml": "kind: AlertmanagerConfig",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\n"+kind+"\n") {
			t.Errorf("%s is not a %s", file, kind)
		}
		if !strings.Contains(out.String(), filepath.Join(dir, file)) {
			t.Errorf("stdout does not list %s:\n%s", file, out.String())
		}
	}
	// The other format's files are not stale output of this one.
	after, _ := filepath.Glob(filepath.Join(dir, "rules-tests", "*.yml"))
	if len(after) != len(tests) {
		t.Errorf("%d rule tests left of %d", len(after), len(tests))
	}
	errb.Reset()
	if got := run(context.Background(), []string{"rules", "--format", "helm"}, nil, &out, &errb); got != exitUsage || !strings.Contains(errb.String(), "prometheus-operator") {
		t.Errorf("an unknown format: exit %d, stderr %q; want %d naming the formats", got, errb.String(), exitUsage)
	}
}
