package slo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Rule linters such as pint read every file of the folder they are given:
// the rules folder holds rule files alone, and the promtool tests live in
// a folder of their own.
func TestTheRulesFolderHoldsOnlyRuleFiles(t *testing.T) {
	m, err := LoadFile(filepath.Join(repoRoot, "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	rulesDir := filepath.Dir(RulesPath) + "/"
	tests := 0
	for _, f := range files {
		if strings.HasPrefix(f.Path, RuleTestsDir+"/") {
			tests++
		}
		if strings.HasPrefix(f.Path, rulesDir) && f.Path != RulesPath {
			t.Errorf("%s is generated inside %s, where rule linters read it as rules", f.Path, rulesDir)
		}
	}
	if tests == 0 || strings.HasPrefix(RuleTestsDir, rulesDir) {
		t.Errorf("%d rule tests in %s, want some, outside %s", tests, RuleTestsDir, rulesDir)
	}
	// What is committed, in the repository and in the demo stack: every
	// file under rules/ parses as a Prometheus rule file.
	for _, dir := range []string{repoRoot, filepath.Join(repoRoot, "deploy", "generated")} {
		err := filepath.WalkDir(filepath.Join(dir, filepath.Dir(RulesPath)), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := CheckRules(b); err != nil {
				t.Errorf("%s is not a rule file: %v", p, err)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
}
