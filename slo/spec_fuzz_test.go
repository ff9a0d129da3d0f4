package slo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
)

// fuzzSpec is the name fuzzed specs are loaded under; every error must
// name it.
const fuzzSpec = "fuzz-slo.yaml"

// FuzzLoadSpec loads any file as an SLO spec. It never panics; a spec it
// refuses gets errors that are each a FieldError naming the file; a spec
// with a field the spec does not have is refused; and a spec it accepts
// generates a rule file that Prometheus's own loader
// accepts, the same bytes each time, and an Alertmanager configuration.
// (The promtool tests generated beside the rules take about 0.1 s per
// spec, too slow to fuzz; the golden and drift tests cover them.)
func FuzzLoadSpec(f *testing.F) {
	var seeds []string
	for _, pattern := range []string{"../slo.yaml", "../deploy/slo.yaml", "testdata/valid/*.yaml", "testdata/invalid/*.yaml"} {
		paths, _ := filepath.Glob(pattern)
		seeds = append(seeds, paths...)
	}
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, seed := range []string{
		"",
		"job: api\n",
		"job: \"a\\\"b\"\n",
		"availability: {objective: 99.9, period: 30d}\n",
		"availability: {objective: 100}\n",
		"availability: {windows: []}\n",
		"rejection_ratio: {threshold: .nan}\n",
		"store_latency: {quantile: 1, threshold: 1e309}\n",
		"labels: {team: \"{{ $value }}\"}\n",
		"- 1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Load(data, fuzzSpec)
		if err != nil {
			for _, e := range leafErrors(err) {
				var fe *FieldError
				if !errors.As(e, &fe) || fe.File != fuzzSpec || !strings.HasPrefix(e.Error(), fuzzSpec+": ") {
					t.Fatalf("spec %q: error %q (%T) is not a FieldError naming the file", data, e, e)
				}
			}
			return
		}
		if unknown := unknownField(data); unknown != "" {
			t.Fatalf("spec %q: accepted with the unknown field %q", data, unknown)
		}
		rules := generateRules(t, data, m)
		if again := generateRules(t, data, m); !bytes.Equal(rules, again) {
			t.Fatalf("spec %q: two generations of the rules differ:\n%s\n%s", data, rules, again)
		}
		if err := CheckRules(rules); err != nil {
			t.Fatalf("spec %q: accepted, but its rule file does not load: %v", data, err)
		}
		if _, err := m.Alertmanager(); err != nil {
			t.Fatalf("spec %q: accepted, but its Alertmanager configuration fails: %v", data, err)
		}
	})
}

// leafErrors flattens errors.Join trees into their leaves.
func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// generateRules is the rule file of m, as `rl-exporter rules` writes it.
func generateRules(t *testing.T, data []byte, m *Model) []byte {
	t.Helper()
	rg, err := m.RuleGroups()
	if err != nil {
		t.Fatalf("spec %q: accepted, but generating its rules fails: %v", data, err)
	}
	var buf bytes.Buffer
	if err := WriteRules(&buf, rg, fuzzSpec); err != nil {
		t.Fatalf("spec %q: accepted, but writing its rules fails: %v", data, err)
	}
	return buf.Bytes()
}

// unknownField returns a key of the YAML document data that names no field
// of Spec (following koanf tags, squashed embedded structs and map values),
// or "" when every key is known or data is not a YAML mapping.
func unknownField(data []byte) string {
	doc, err := yaml.Parser().Unmarshal(data) // as Decode reads it
	if err != nil {
		return ""
	}
	var walk func(m map[string]any, t reflect.Type, path string) string
	walk = func(m map[string]any, t reflect.Type, path string) string {
		for k, sub := range m {
			next, known := fieldType(t, k)
			if !known {
				return strings.TrimPrefix(path+"."+k, ".")
			}
			if sm, isMap := sub.(map[string]any); isMap && next != nil {
				if u := walk(sm, next, path+"."+k); u != "" {
					return u
				}
			}
		}
		return ""
	}
	return walk(doc, reflect.TypeOf(Spec{}), "")
}

// fieldType is the type under key k of a value of type t: a struct field by
// its koanf tag (squashed structs included) or a map's element; nil when k
// is known but what is under it is not walked (a scalar or a list).
func fieldType(t reflect.Type, k string) (reflect.Type, bool) {
	switch t.Kind() {
	case reflect.Map:
		if t.Elem().Kind() == reflect.Struct {
			return t.Elem(), true
		}
		return nil, true
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("koanf")
			if tag == ",squash" {
				if ft, ok := fieldType(f.Type, k); ok {
					return ft, true
				}
				continue
			}
			if tag == k {
				if f.Type.Kind() == reflect.Struct || f.Type.Kind() == reflect.Map {
					return f.Type, true
				}
				return nil, true
			}
		}
		return nil, false
	}
	return nil, true
}
