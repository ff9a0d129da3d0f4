package slo

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the committed rules/ and alerts/ from ../slo.yaml")

// repoRoot is where slo.yaml and the committed generated files live.
const repoRoot = ".."

// The generated files are committed for people who do not run Go; nobody
// edits them by hand. `go test ./slo -update` (or `make rules`) rewrites them.
func TestCommittedGeneratedFilesMatchTheGenerator(t *testing.T) {
	m, err := LoadFile(filepath.Join(repoRoot, "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(repoRoot, filepath.FromSlash(f.Path))
		want[p] = true
		if *update {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Content, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v (run `make rules`)", p, err)
			continue
		}
		if !bytes.Equal(got, f.Content) {
			t.Errorf("%s differs from what the generator makes of slo.yaml; run `make rules` instead of editing it", p)
		}
	}
	committed, _ := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(RuleTestsDir), "*.yml"))
	for _, p := range committed {
		if want[p] {
			continue
		}
		if *update {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is committed but no longer generated; run `make rules`", p)
	}
}
