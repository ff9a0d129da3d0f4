// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package heatmap builds heatmap panels.
package heatmap

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/dashboard"
)

// Options are a heatmap panel's options.
type Options struct {
	Calculate     *bool                 `json:"calculate,omitempty"`
	Color         HeatmapColorOptions   `json:"color"`
	FilterValues  *FilterValueRange     `json:"filterValues,omitempty"`
	RowsFrame     *RowsHeatmapOptions   `json:"rowsFrame,omitempty"`
	ShowValue     common.VisibilityMode `json:"showValue"`
	CellGap       *uint8                `json:"cellGap,omitempty"`
	CellValues    *CellValues           `json:"cellValues,omitempty"`
	YAxis         YAxisConfig           `json:"yAxis"`
	Legend        HeatmapLegend         `json:"legend"`
	Tooltip       HeatmapTooltip        `json:"tooltip"`
	Exemplars     ExemplarConfig        `json:"exemplars"`
	SelectionMode *string               `json:"selectionMode,omitempty"`
}

// HeatmapColorMode is how cells are coloured.
type HeatmapColorMode string

// HeatmapColorModeScheme colours with a scheme.
const HeatmapColorModeScheme HeatmapColorMode = "scheme"

// HeatmapColorScale maps counts to colours.
type HeatmapColorScale string

// HeatmapColorScaleExponential maps them on an exponential scale.
const HeatmapColorScaleExponential HeatmapColorScale = "exponential"

// HeatmapColorOptions colour the cells.
type HeatmapColorOptions struct {
	Mode     *HeatmapColorMode  `json:"mode,omitempty"`
	Scheme   string             `json:"scheme"`
	Fill     string             `json:"fill"`
	Scale    *HeatmapColorScale `json:"scale,omitempty"`
	Exponent float32            `json:"exponent"`
	Steps    uint64             `json:"steps"`
	Reverse  bool               `json:"reverse"`
}

// HeatmapColorOptionsBuilder builds HeatmapColorOptions.
type HeatmapColorOptionsBuilder struct{ internal HeatmapColorOptions }

// NewHeatmapColorOptionsBuilder starts empty colour options.
func NewHeatmapColorOptionsBuilder() *HeatmapColorOptionsBuilder {
	return &HeatmapColorOptionsBuilder{}
}

// Build returns the colour options.
func (b *HeatmapColorOptionsBuilder) Build() (HeatmapColorOptions, error) { return b.internal, nil }

// Mode sets how cells are coloured.
func (b *HeatmapColorOptionsBuilder) Mode(m HeatmapColorMode) *HeatmapColorOptionsBuilder {
	b.internal.Mode = &m
	return b
}

// Scheme sets the colour scheme.
func (b *HeatmapColorOptionsBuilder) Scheme(s string) *HeatmapColorOptionsBuilder {
	b.internal.Scheme = s
	return b
}

// Scale sets how counts map to colours.
func (b *HeatmapColorOptionsBuilder) Scale(s HeatmapColorScale) *HeatmapColorOptionsBuilder {
	b.internal.Scale = &s
	return b
}

// Exponent sets the exponent of an exponential scale.
func (b *HeatmapColorOptionsBuilder) Exponent(e float32) *HeatmapColorOptionsBuilder {
	b.internal.Exponent = e
	return b
}

// Fill sets the colour of filled cells in opacity mode.
func (b *HeatmapColorOptionsBuilder) Fill(f string) *HeatmapColorOptionsBuilder {
	b.internal.Fill = f
	return b
}

// Steps sets the number of colour steps.
func (b *HeatmapColorOptionsBuilder) Steps(s uint64) *HeatmapColorOptionsBuilder {
	b.internal.Steps = s
	return b
}

// FilterValueRange hides cells outside it.
type FilterValueRange struct {
	Le *float32 `json:"le,omitempty"`
}

// RowsHeatmapOptions say how buckets become rows.
type RowsHeatmapOptions struct {
	Layout *common.HeatmapCellLayout `json:"layout,omitempty"`
}

// RowsHeatmapOptionsBuilder builds RowsHeatmapOptions.
type RowsHeatmapOptionsBuilder struct{ internal RowsHeatmapOptions }

// NewRowsHeatmapOptionsBuilder starts empty row options.
func NewRowsHeatmapOptionsBuilder() *RowsHeatmapOptionsBuilder { return &RowsHeatmapOptionsBuilder{} }

// Build returns the row options.
func (b *RowsHeatmapOptionsBuilder) Build() (RowsHeatmapOptions, error) { return b.internal, nil }

// Layout sets how buckets map to rows.
func (b *RowsHeatmapOptionsBuilder) Layout(l common.HeatmapCellLayout) *RowsHeatmapOptionsBuilder {
	b.internal.Layout = &l
	return b
}

// CellValues format the values in cells.
type CellValues struct {
	Unit *string `json:"unit,omitempty"`
}

// CellValuesBuilder builds CellValues.
type CellValuesBuilder struct{ internal CellValues }

// NewCellValuesBuilder starts empty cell value options.
func NewCellValuesBuilder() *CellValuesBuilder { return &CellValuesBuilder{} }

// Build returns the cell value options.
func (b *CellValuesBuilder) Build() (CellValues, error) { return b.internal, nil }

// Unit sets the cells' unit.
func (b *CellValuesBuilder) Unit(u string) *CellValuesBuilder { b.internal.Unit = &u; return b }

// YAxisConfig is the heatmap's y axis.
type YAxisConfig struct {
	Unit      *string `json:"unit,omitempty"`
	AxisLabel *string `json:"axisLabel,omitempty"`
}

// YAxisConfigBuilder builds a YAxisConfig.
type YAxisConfigBuilder struct{ internal YAxisConfig }

// NewYAxisConfigBuilder starts an empty axis configuration.
func NewYAxisConfigBuilder() *YAxisConfigBuilder { return &YAxisConfigBuilder{} }

// Build returns the axis configuration.
func (b *YAxisConfigBuilder) Build() (YAxisConfig, error) { return b.internal, nil }

// Unit sets the axis unit.
func (b *YAxisConfigBuilder) Unit(u string) *YAxisConfigBuilder { b.internal.Unit = &u; return b }

// AxisLabel sets the axis label.
func (b *YAxisConfigBuilder) AxisLabel(l string) *YAxisConfigBuilder {
	b.internal.AxisLabel = &l
	return b
}

// HeatmapLegend shows or hides the legend.
type HeatmapLegend struct {
	Show bool `json:"show"`
}

// HeatmapTooltip is the tooltip.
type HeatmapTooltip struct {
	Mode common.TooltipDisplayMode `json:"mode"`
}

// ExemplarConfig colours exemplars.
type ExemplarConfig struct {
	Color string `json:"color"`
}

// FieldConfig is the heatmap's own field options; the dashboards set none.
type FieldConfig struct{}

// PanelBuilder builds a heatmap panel.
type PanelBuilder struct {
	dashboard.PanelBuilderBase[*PanelBuilder]
	options *Options
}

// NewPanelBuilder starts a heatmap panel with Grafana's defaults.
func NewPanelBuilder() *PanelBuilder {
	b := &PanelBuilder{options: &Options{
		Calculate:     cog.ToPtr(false),
		Color:         HeatmapColorOptions{Scheme: "Oranges", Fill: "dark-orange", Exponent: 0.5, Steps: 64},
		FilterValues:  &FilterValueRange{Le: cog.ToPtr(float32(1e-09))},
		ShowValue:     common.VisibilityModeAuto,
		CellGap:       cog.ToPtr(uint8(1)),
		Exemplars:     ExemplarConfig{Color: "rgba(255,0,255,0.7)"},
		SelectionMode: cog.ToPtr("x"),
	}}
	b.PanelBuilderBase = dashboard.NewPanelBuilderBase(b, "heatmap", b.options, &FieldConfig{})
	return b
}

// Calculate makes Grafana bucket raw values itself.
func (b *PanelBuilder) Calculate(c bool) *PanelBuilder { b.options.Calculate = &c; return b }

// RowsFrame sets how buckets become rows.
func (b *PanelBuilder) RowsFrame(r cog.Builder[RowsHeatmapOptions]) *PanelBuilder {
	built, _ := r.Build()
	b.options.RowsFrame = &built
	return b
}

// YAxis sets the y axis.
func (b *PanelBuilder) YAxis(y cog.Builder[YAxisConfig]) *PanelBuilder {
	b.options.YAxis, _ = y.Build()
	return b
}

// Color sets the colours.
func (b *PanelBuilder) Color(c cog.Builder[HeatmapColorOptions]) *PanelBuilder {
	b.options.Color, _ = c.Build()
	return b
}

// CellValues sets how cell values are formatted.
func (b *PanelBuilder) CellValues(c cog.Builder[CellValues]) *PanelBuilder {
	built, _ := c.Build()
	b.options.CellValues = &built
	return b
}

// ShowLegend shows the legend.
func (b *PanelBuilder) ShowLegend() *PanelBuilder { b.options.Legend.Show = true; return b }
