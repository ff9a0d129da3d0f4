package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The rate limiter's binary links what serving needs: the rule generator
// checks its Alertmanager configuration with amtool and writes dashboards
// without the Grafana SDK, so neither tree is in its dependency graph.
// (github.com/grafana/regexp is Prometheus's regular expression engine,
// which the PromQL parser of `rules` uses; it is not part of Grafana.)
func TestTheBinaryLinksNeitherAlertmanagerNorGrafana(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go command is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 100 {
		t.Fatalf("go list -deps lists only %d packages:\n%s", len(pkgs), out)
	}
	for _, p := range pkgs {
		switch {
		case strings.HasPrefix(p, "github.com/prometheus/alertmanager"),
			strings.HasPrefix(p, "github.com/grafana/") && !strings.HasPrefix(p, "github.com/grafana/regexp"):
			t.Errorf("rl-exporter links %s", p)
		}
	}
}
