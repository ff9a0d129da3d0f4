// Package stat builds stat panels.
package stat

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog/variants"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/dashboard"
)

// Options are a stat panel's options.
type Options struct {
	GraphMode              common.BigValueGraphMode      `json:"graphMode"`
	ColorMode              common.BigValueColorMode      `json:"colorMode"`
	JustifyMode            common.BigValueJustifyMode    `json:"justifyMode"`
	TextMode               common.BigValueTextMode       `json:"textMode"`
	WideLayout             bool                          `json:"wideLayout"`
	ShowPercentChange      bool                          `json:"showPercentChange"`
	ReduceOptions          common.ReduceDataOptions      `json:"reduceOptions"`
	PercentChangeColorMode common.PercentChangeColorMode `json:"percentChangeColorMode"`
	Orientation            common.VizOrientation         `json:"orientation"`
}

// PanelBuilder builds a stat panel.
type PanelBuilder struct {
	parts   dashboard.PanelParts
	options *Options
}

var _ cog.Builder[dashboard.Panel] = (*PanelBuilder)(nil)

// NewPanelBuilder starts a stat panel with Grafana's defaults.
func NewPanelBuilder() *PanelBuilder {
	b := &PanelBuilder{options: &Options{
		GraphMode:              common.BigValueGraphModeArea,
		ColorMode:              common.BigValueColorModeValue,
		JustifyMode:            common.BigValueJustifyModeAuto,
		TextMode:               common.BigValueTextModeAuto,
		WideLayout:             true,
		ReduceOptions:          common.ReduceDataOptions{Calcs: []string{}},
		PercentChangeColorMode: common.PercentChangeColorModeStandard,
	}}
	b.parts = dashboard.NewPanelParts("stat", b.options, nil)
	return b
}

// Build returns the panel.
func (b *PanelBuilder) Build() (dashboard.Panel, error) { return b.parts.Build() }

// Id sets the panel id.
func (b *PanelBuilder) Id(id uint32) *PanelBuilder { b.parts.SetId(id); return b }

// Title sets the title.
func (b *PanelBuilder) Title(t string) *PanelBuilder { b.parts.SetTitle(t); return b }

// Description sets the description.
func (b *PanelBuilder) Description(d string) *PanelBuilder { b.parts.SetDescription(d); return b }

// Datasource sets the data source.
func (b *PanelBuilder) Datasource(ds common.DataSourceRef) *PanelBuilder {
	b.parts.SetDatasource(ds)
	return b
}

// Span sets the width in columns.
func (b *PanelBuilder) Span(w uint32) *PanelBuilder { b.parts.SetSpan(w); return b }

// Height sets the height in grid rows.
func (b *PanelBuilder) Height(h uint32) *PanelBuilder { b.parts.SetHeight(h); return b }

// Unit sets the unit of the values.
func (b *PanelBuilder) Unit(u string) *PanelBuilder { b.parts.SetUnit(u); return b }

// Decimals sets the decimals shown.
func (b *PanelBuilder) Decimals(d float64) *PanelBuilder { b.parts.SetDecimals(d); return b }

// WithTarget adds a query.
func (b *PanelBuilder) WithTarget(q cog.Builder[variants.Dataquery]) *PanelBuilder {
	b.parts.AddTarget(q)
	return b
}

// Thresholds sets the thresholds.
func (b *PanelBuilder) Thresholds(t cog.Builder[dashboard.ThresholdsConfig]) *PanelBuilder {
	b.parts.SetThresholds(t)
	return b
}

// Links sets the panel's links.
func (b *PanelBuilder) Links(l []cog.Builder[dashboard.DashboardLink]) *PanelBuilder {
	b.parts.SetLinks(l)
	return b
}

// ColorMode sets what the panel colours.
func (b *PanelBuilder) ColorMode(m common.BigValueColorMode) *PanelBuilder {
	b.options.ColorMode = m
	return b
}

// GraphMode sets the graph behind the value.
func (b *PanelBuilder) GraphMode(m common.BigValueGraphMode) *PanelBuilder {
	b.options.GraphMode = m
	return b
}

// ReduceOptions sets how series are reduced to a value.
func (b *PanelBuilder) ReduceOptions(r cog.Builder[common.ReduceDataOptions]) *PanelBuilder {
	b.options.ReduceOptions, _ = r.Build()
	return b
}
