package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/dashboards"
	"github.com/rl-exporter/rl-exporter/slo"
)

func TestRulesWritesTheDashboardsToo(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runRulesCmd("--spec", rulesTestSpec, "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	m, err := slo.LoadFile(rulesTestSpec)
	if err != nil {
		t.Fatal(err)
	}
	boards, err := dashboards.Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(boards) == 0 {
		t.Fatal("no dashboard generated")
	}
	for _, f := range boards {
		if !strings.HasPrefix(f.Path, dashboards.Dir+"/") {
			t.Errorf("%s is not under %s/", f.Path, dashboards.Dir)
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s not written: %v", f.Path, err)
			continue
		}
		if !bytes.Equal(got, f.Content) {
			t.Errorf("%s differs from the generator's output", f.Path)
		}
		if !strings.Contains(stdout, p) {
			t.Errorf("stdout does not list %s:\n%s", p, stdout)
		}
	}
	// --out . in the repository rewrites the committed dashboards, which the
	// dashboards package's drift test compares with the generator.
	committed, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(dashboards.OverviewPath)))
	if err != nil {
		t.Fatal(err)
	}
	written, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(dashboards.OverviewPath)))
	if !bytes.Equal(committed, written) {
		t.Errorf("rl-exporter rules --spec slo.yaml writes a different %s than the one committed", dashboards.OverviewPath)
	}
}
