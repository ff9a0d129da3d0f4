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
// on the standard library alone (checked below) and adds about 2 % to the
// binary, less than a second binary for the generators would cost to ship.
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

// The Grafana foundation SDK stays cheap to link only while it imports
// nothing but the standard library and itself.
func TestTheGrafanaSDKThatRulesLinksImportsOnlyTheStandardLibrary(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go command is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", `{{.ImportPath}} {{.Standard}} {{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const sdk = "github.com/grafana/grafana-foundation-sdk/"
	standard := map[string]bool{}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		standard[f[0]] = f[1] == "true"
		imports[f[0]] = f[2:]
	}
	linked := 0
	for p, imps := range imports {
		if !strings.HasPrefix(p, sdk) {
			continue
		}
		linked++
		for _, imp := range imps {
			if !standard[imp] && !strings.HasPrefix(imp, sdk) {
				t.Errorf("%s imports %s, neither the standard library nor the SDK", p, imp)
			}
		}
	}
	if linked == 0 {
		t.Fatal("rl-exporter links no package of the Grafana foundation SDK: the check above checked nothing")
	}
}
