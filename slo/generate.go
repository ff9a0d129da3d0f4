package slo

import (
	"bytes"
	"path"
	"path/filepath"
)

// Paths of the generated files, relative to the output directory. The
// promtool tests live beside rules/, not in it: rule linters such as pint
// read every file of the folder they are given.
const (
	RulesPath        = "rules/rl-exporter.rules.yml"
	RuleTestsDir     = "rules-tests"
	AlertmanagerPath = "alerts/alertmanager.yml"
)

// File is one generated file; Path is relative to the output directory and
// uses forward slashes.
type File struct {
	Path    string
	Content []byte
}

// Generate builds every file `rl-exporter rules` writes from the model: the
// rule file, its promtool tests and the Alertmanager configuration. The
// rules are validated with Prometheus's own parser; the Alertmanager
// configuration is checked by the tests and by `rl-exporter rules` (see
// [AlertmanagerConfig]), so that importing slo does not link Alertmanager.
// The header of each names the spec by its base name, so the output does
// not depend on where it was run.
func Generate(m *Model) ([]File, error) {
	source := filepath.Base(m.Source)
	rg, err := m.RuleGroups()
	if err != nil {
		return nil, err
	}
	var rules bytes.Buffer
	if err := WriteRules(&rules, rg, source); err != nil {
		return nil, err
	}
	files := []File{{Path: RulesPath, Content: rules.Bytes()}}

	rel, err := filepath.Rel(RuleTestsDir, RulesPath)
	if err != nil {
		return nil, err
	}
	tests, err := m.RuleTests(filepath.ToSlash(rel))
	if err != nil {
		return nil, err
	}
	for _, t := range tests {
		var buf bytes.Buffer
		if err := WriteRuleTests(&buf, t.File, source); err != nil {
			return nil, err
		}
		files = append(files, File{Path: path.Join(RuleTestsDir, t.Name), Content: buf.Bytes()})
	}

	am, err := m.Alertmanager()
	if err != nil {
		return nil, err
	}
	var amBuf bytes.Buffer
	if err := WriteAlertmanager(&amBuf, am, source); err != nil {
		return nil, err
	}
	files = append(files, File{Path: AlertmanagerPath, Content: amBuf.Bytes()})
	return files, nil
}
