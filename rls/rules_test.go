package rls_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/rls"
)

func TestLoadDirRejectsInvalidFilesNamingFileAndDescriptor(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		wants []string
	}{
		{"an unknown key is an error, as in envoyproxy/ratelimit", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, per_unit: 3}
`, []string{"bad.yaml", "per_unit"}},
		{"a file without a domain", `
descriptors:
  - key: a
`, []string{"bad.yaml", "domain: required"}},
		{"a descriptor without a key names its path", `
domain: d
descriptors:
  - key: a
    value: b
    descriptors:
      - value: c
`, []string{"bad.yaml", "d.a_b.descriptors[0]", "key: required"}},
		{"an unknown unit names the descriptor path", `
domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        value: x
        rate_limit: {unit: fortnight, requests_per_unit: 1}
`, []string{"bad.yaml", "d.a.b_x", "unit", "fortnight"}},
		{"an unknown algorithm", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: random}
`, []string{"bad.yaml", "d.a", "algorithm", "random"}},
		{"burst on a window algorithm", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1, burst: 5}
`, []string{"bad.yaml", "d.a", "burst"}},
		{"unlimited with a unit, as envoyproxy/ratelimit refuses", `
domain: d
descriptors:
  - key: a
    rate_limit: {unlimited: true, unit: second}
`, []string{"bad.yaml", "d.a", "unlimited"}},
		{"a duplicate descriptor", `
domain: d
descriptors:
  - key: a
    value: v
  - key: a
    value: v
`, []string{"bad.yaml", "d.a_v", "duplicate"}},
		{"a limit replacing itself", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: n}]}
`, []string{"bad.yaml", "d.a", "replaces[0]"}},
		{"a limit beyond the engine's exact range", `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: year, requests_per_unit: 1000000}
`, []string{"bad.yaml", "d.a", "2^53"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, map[string]string{"good.yaml": "domain: good\n", "bad.yaml": tc.yaml})
			_, err := rls.LoadDir(dir)
			if err == nil {
				t.Fatal("loaded without error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadDirRefusesADomainDefinedTwice(t *testing.T) {
	dir := writeDir(t, map[string]string{"a.yaml": "domain: d\n", "b.yaml": "domain: d\n"})
	_, err := rls.LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "b.yaml") || !strings.Contains(err.Error(), "a.yaml") {
		t.Fatalf("err %v, want both files named", err)
	}
}

func TestLoadDirReadsYAMLFilesOnlyAndSkipsHiddenOnes(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"a.yaml": "domain: a\n", "b.yml": "domain: b\n", "notes.txt": "not yaml", ".hidden.yaml": "garbage: [",
	})
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := rls.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Domains(), ","); got != "a,b" {
		t.Errorf("domains %s, want a,b", got)
	}
}
