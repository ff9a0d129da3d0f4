package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/slo"
)

const rulesTestSpec = "../../slo.yaml"

func runRulesCmd(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"rules"}, args...), nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRulesWritesWhatTheGeneratorMakes(t *testing.T) {
	dir := t.TempDir()
	// A stale generated test file from an earlier spec is removed; a file
	// someone else put there is kept.
	tests := filepath.Join(dir, "rules-tests")
	if err := os.MkdirAll(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tests, "error-budget-burn-2h-10m.yml")
	mine := filepath.Join(tests, "handwritten.yml")
	os.WriteFile(stale, []byte(generatedMarker+" from slo.yaml. DO NOT EDIT.\n"), 0o644)
	os.WriteFile(mine, []byte("# mine\n"), 0o644)

	code, stdout, stderr := runRulesCmd("--spec", rulesTestSpec, "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	m, err := slo.LoadFile(rulesTestSpec)
	if err != nil {
		t.Fatal(err)
	}
	files, err := slo.Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
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
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale generated test file kept: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file the generator did not write was removed: %v", err)
	}
}

func TestRulesCheckValidatesWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runRulesCmd("--spec", rulesTestSpec, "--out", dir, "--check")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "valid") {
		t.Errorf("stdout = %q", stdout)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("--check wrote %d entries", len(entries))
	}
}

func TestRulesExitStatus(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(bad, []byte("availability:\n  objective_percent: 100\nrejection_ratio:\n  window: 5 minutes\n"), 0o644)
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStderr []string
	}{
		{"an impossible spec exits 1 naming file, field and reason", []string{"--spec", bad, "--check"}, exitFailure,
			[]string{bad + ": availability.objective_percent: 100 is not a percentage", bad + `: rejection_ratio.window: "5 minutes" does not parse`}},
		{"a missing spec exits 1", []string{"--spec", filepath.Join(t.TempDir(), "none.yaml")}, exitFailure, []string{"none.yaml"}},
		{"an unknown flag exits 2", []string{"--bogus"}, exitUsage, []string{"usage: rl-exporter rules"}},
		{"a stray argument exits 2", []string{"--spec", rulesTestSpec, "extra"}, exitUsage, []string{`unexpected argument "extra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runRulesCmd(tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// A burn-rate row that can never fire is valid but useless: the command
// says which row and why, and still exits 0.
func TestRulesReportsABurnRateRowThatCanNeverFire(t *testing.T) {
	for _, args := range [][]string{{"--check"}, {"--out", t.TempDir()}} {
		code, _, stderr := runRulesCmd(append([]string{"--spec", "../../slo/testdata/unreachable-row.yaml"}, args...)...)
		if code != exitOK {
			t.Errorf("%v: exit %d, want 0; stderr:\n%s", args, code, stderr)
		}
		want := "warning: ../../slo/testdata/unreachable-row.yaml: availability.windows[0]: burn rate 14.4 × (1 − 0.9) = 1.44 exceeds 1: this row can never fire"
		if !strings.Contains(stderr, want) {
			t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
		}
	}
	if code, _, stderr := runRulesCmd("--spec", rulesTestSpec, "--check"); strings.Contains(stderr, "warning") || code != exitOK {
		t.Errorf("the committed spec: exit %d, stderr:\n%s", code, stderr)
	}
}
