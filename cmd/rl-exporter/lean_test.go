package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The rate limiter's binary does not link Alertmanager: the rule generator
// checks its Alertmanager configuration with amtool, so that tree, and the
// dependencies it pulls in, stay out of the dependency graph. The Grafana
// foundation SDK that `rules` builds dashboards with is linked: it depends
// on the standard library alone and adds about 2 % to the binary, less
// than a second binary for the generators would cost to ship.
func TestTheBinaryDoesNotLinkAlertmanager(t *testing.T) {
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
		if strings.HasPrefix(p, "github.com/prometheus/alertmanager") {
			t.Errorf("rl-exporter links %s", p)
		}
	}
}
