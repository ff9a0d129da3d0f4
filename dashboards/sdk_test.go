package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	sdkcog "github.com/grafana/grafana-foundation-sdk/go/cog"
	sdkplugins "github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	sdkcommon "github.com/grafana/grafana-foundation-sdk/go/common"
	sdkdashboard "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	sdkheatmap "github.com/grafana/grafana-foundation-sdk/go/heatmap"
	sdkprometheus "github.com/grafana/grafana-foundation-sdk/go/prometheus"
	sdkstat "github.com/grafana/grafana-foundation-sdk/go/stat"
	sdktimeseries "github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/rl-exporter/rl-exporter/slo"
)

// The SDK's builders do not check what Grafana's schema reads: options
// passed as raw values (overrides, a panel's options) can hold anything.
// Its strict decoder checks them here: it refuses an unknown field, a
// missing required field or a wrong type, and encoding what it decoded
// must give the same bytes, so every field is one the SDK knows, written
// as the SDK writes it.
func TestTheGrafanaSDKReadsEveryDashboardBackUnchanged(t *testing.T) {
	sdkplugins.RegisterDefaultPlugins()
	custom, err := slo.Load([]byte(customSpec), "custom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*slo.Model{"the repository's spec": repoModel(t), "a custom spec": custom}
	for name, m := range models {
		for path, content := range generate(t, m) {
			t.Run(name+": "+path, func(t *testing.T) {
				d, err := decodeWithSDK(content)
				if err != nil {
					t.Fatalf("the SDK's strict decoder refuses %s: %v", path, err)
				}
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				if err := enc.Encode(d); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), content) {
					t.Errorf("the SDK writes %s back differently:\n%s", path, firstDifference(content, buf.Bytes()))
				}
			})
		}
	}
}

// The check above fails on what Grafana's schema does not have, at the
// top of the dashboard and inside a panel's options.
func TestTheGrafanaSDKRefusesWhatGrafanaDoesNotKnow(t *testing.T) {
	sdkplugins.RegisterDefaultPlugins()
	content := generate(t, repoModel(t))[OverviewPath]
	for name, edit := range map[string][2]string{
		"an unknown dashboard field":         {`"uid": "rl-exporter-overview"`, `"uid": "rl-exporter-overview", "owner": "nobody"`},
		"an unknown heatmap option":          {`"selectionMode": "x"`, `"selectionMode": "x", "bogus": 1`},
		"a heatmap option of the wrong type": {`"cellGap": 1`, `"cellGap": "one"`},
	} {
		t.Run(name, func(t *testing.T) {
			bad := bytes.Replace(content, []byte(edit[0]), []byte(edit[1]), 1)
			if bytes.Equal(bad, content) {
				t.Fatalf("%s is not in the dashboard", edit[0])
			}
			if _, err := decodeWithSDK(bad); err == nil {
				t.Error("the SDK's strict decoder accepts it")
			}
		})
	}
}

// strictDecoder is what the SDK's types decode strictly with.
type strictDecoder interface{ UnmarshalJSONStrict([]byte) error }

// strictDecode decodes with the SDK's strict decoder, which returns an
// empty cog.BuildErrors (a non-nil error value) when all is well.
func strictDecode(v strictDecoder, content []byte) error {
	err := v.UnmarshalJSONStrict(content)
	if errs, ok := err.(sdkcog.BuildErrors); ok && len(errs) == 0 {
		return nil
	}
	return err
}

// decodeWithSDK decodes a dashboard strictly with the SDK. The SDK's
// dashboard decoder drops every panel it decodes without error (it takes
// the empty error list of a good panel for an error), so the panels are
// decoded one by one, each as a row or a panel.
func decodeWithSDK(content []byte) (sdkdashboard.Dashboard, error) {
	var d sdkdashboard.Dashboard
	if err := strictDecode(&d, content); err != nil {
		return d, err
	}
	var raw struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(content, &raw); err != nil {
		return d, err
	}
	d.Panels = d.Panels[:0]
	for i, p := range raw.Panels {
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(p, &kind); err != nil {
			return d, err
		}
		var entry sdkdashboard.PanelOrRowPanel
		var err error
		if kind.Type == "row" {
			entry.RowPanel = &sdkdashboard.RowPanel{}
			err = strictDecode(entry.RowPanel, p)
			if entry.RowPanel.Panels == nil {
				entry.RowPanel.Panels = []sdkdashboard.Panel{} // as the SDK's NewRowPanel has it; the decoder leaves nil
			}
		} else {
			entry.Panel, err = decodePanelWithSDK(p)
		}
		if err != nil {
			return d, fmt.Errorf("panels[%d]: %w", i, err)
		}
		d.Panels = append(d.Panels, entry)
	}
	return d, nil
}

// pluginTypes are the SDK's types of each visualisation's options and
// custom field config.
var pluginTypes = map[string]struct{ options, custom func() strictDecoder }{
	"timeseries": {func() strictDecoder { return &sdktimeseries.Options{} }, func() strictDecoder { return &sdkcommon.GraphFieldConfig{} }},
	"stat":       {func() strictDecoder { return &sdkstat.Options{} }, nil},
	"heatmap":    {func() strictDecoder { return &sdkheatmap.Options{} }, func() strictDecoder { return &sdkheatmap.FieldConfig{} }},
}

// decodePanelWithSDK decodes a panel strictly with the SDK. Its panel
// decoder drops the queries, the options and the custom field config it
// decodes without error (it reads the queries before the data source that
// says their kind, and takes an empty error list for an error), so those
// are decoded apart, with the SDK's types for the panel's type.
func decodePanelWithSDK(raw []byte) (*sdkdashboard.Panel, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	var kind string
	if err := json.Unmarshal(fields["type"], &kind); err != nil {
		return nil, err
	}
	plugin, ok := pluginTypes[kind]
	if !ok {
		return nil, fmt.Errorf("no SDK types for a %q panel", kind)
	}
	var targets []json.RawMessage
	if t, ok := fields["targets"]; ok {
		if err := json.Unmarshal(t, &targets); err != nil {
			return nil, err
		}
	}
	var fieldConfig struct {
		Defaults  map[string]json.RawMessage `json:"defaults"`
		Overrides json.RawMessage            `json:"overrides"`
	}
	if err := json.Unmarshal(fields["fieldConfig"], &fieldConfig); err != nil {
		return nil, err
	}
	options, custom := fields["options"], fieldConfig.Defaults["custom"]
	delete(fields, "targets")
	delete(fields, "options")
	delete(fieldConfig.Defaults, "custom")
	var err error
	if fields["fieldConfig"], err = json.Marshal(fieldConfig); err != nil {
		return nil, err
	}
	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	p := &sdkdashboard.Panel{}
	if err := strictDecode(p, rest); err != nil {
		return nil, err
	}
	for i, t := range targets {
		q := &sdkprometheus.Dataquery{}
		if err := strictDecode(q, t); err != nil {
			return nil, fmt.Errorf("targets[%d]: %w", i, err)
		}
		p.Targets = append(p.Targets, q)
	}
	if options != nil {
		o := plugin.options()
		if err := strictDecode(o, options); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
		p.Options = o
	}
	if custom != nil {
		if plugin.custom == nil {
			return nil, fmt.Errorf("a %q panel has no custom field config", kind)
		}
		c := plugin.custom()
		if err := strictDecode(c, custom); err != nil {
			return nil, fmt.Errorf("fieldConfig.defaults.custom: %w", err)
		}
		p.FieldConfig.Defaults.Custom = c
	}
	return p, nil
}

// firstDifference shows a few lines around where two texts part.
func firstDifference(want, got []byte) string {
	w, g := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	for i := 0; i < len(w) && i < len(g); i++ {
		if !bytes.Equal(w[i], g[i]) {
			return fmt.Sprintf("line %d:\n  generated: %s\n  SDK:       %s", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d and %d lines)", len(w), len(g))
}
