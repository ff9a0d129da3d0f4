package slo

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// slo.yaml and the docs' spec example (docs/alerts-and-slos.md) both say
// they show the defaults (apart from the labels, and for the docs the
// receivers): they must compile to the model an empty spec does, with the
// opt-in regions: block turned on at its defaults, or they teach wrong
// values.
func TestTheDocumentedSpecsShowTheDefaults(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "alerts-and-slos.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### The spec\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/alerts-and-slos.md has no yaml block under \"### The spec\"")
	}
	committed, err := os.ReadFile(filepath.Join(repoRoot, "slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := DefaultSpec()
	regions := DefaultRegions()
	defaults.Regions = &regions
	want, err := Compile(defaults, "defaults")
	if err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct {
		content       string
		keepReceivers bool
	}{
		"slo.yaml":               {string(committed), true},
		"the docs' example spec": {block, false},
	} {
		t.Run(name, func(t *testing.T) {
			spec, err := Decode([]byte(tt.content), name)
			if err != nil {
				t.Fatal(err)
			}
			spec.Labels = nil
			if !tt.keepReceivers {
				spec.Routing.Page, spec.Routing.Ticket = ReceiverSpec{}, ReceiverSpec{}
			}
			got, err := Compile(spec, "defaults")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s does not compile to the defaults:\n got %+v\nwant %+v", name, got, want)
			}
		})
	}
}
