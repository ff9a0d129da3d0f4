package deploytest

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// Release and Namespace are the names the chart is rendered under, as
// helm install rl deploy/helm/rl-exporter -n limits names them.
const (
	Release   = "rl"
	Namespace = "limits"
)

// Render renders the chart in chartDir with Helm's own engine, as helm
// install does, in strict mode: a template reading a value the chart does
// not define fails. values is a values file's YAML (empty: the chart's
// defaults); apiVersions are served by the cluster beyond Helm's defaults
// (monitoring.coreos.com/v1 for the prometheus-operator's objects). The
// answer maps each template's path to what it rendered.
func Render(chartDir string, values []byte, apiVersions []string) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(values, &vals); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.APIVersions = append(slices.Clone(caps.APIVersions), apiVersions...)
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: Release, Namespace: Namespace, IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return engine.Engine{Strict: true}.Render(ch, rv)
}

// WriteManifests writes the rendered manifests as helm template prints
// them: in Helm's install order, each after "---" and a "# Source:" line.
// NOTES.txt is left out, as helm template leaves it.
func WriteManifests(w io.Writer, rendered map[string]string) error {
	files := map[string]string{}
	for name, content := range rendered {
		if !strings.HasSuffix(name, "NOTES.txt") {
			files[name] = content
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return fmt.Errorf("sort manifests: %w", err)
	}
	for _, m := range manifests {
		if _, err := fmt.Fprintf(w, "---\n# Source: %s\n%s\n", m.Name, m.Content); err != nil {
			return err
		}
	}
	return nil
}
