package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/rl-exporter/rl-exporter/slo"
)

// Dir is where the dashboards go, relative to the output directory of
// `rl-exporter rules` (and in the repository).
const Dir = "dashboards"

// OverviewPath is the Overview dashboard's file, relative to the output
// directory.
const OverviewPath = Dir + "/rl-exporter-overview.json"

// Generate builds every dashboard from the model as the files `rl-exporter
// rules` writes under DIR/dashboards/. The description of each says it is
// generated from the spec, named by its base name so the output does not
// depend on where it was run.
func Generate(m *slo.Model) ([]slo.File, error) {
	source := filepath.Base(m.Source)
	d, err := overview(m, source)
	if err != nil {
		return nil, fmt.Errorf("build dashboard %s: %w", OverviewUID, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, fmt.Errorf("encode dashboard %s: %w", OverviewUID, err)
	}
	return []slo.File{{Path: OverviewPath, Content: buf.Bytes()}}, nil
}
