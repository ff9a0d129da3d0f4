// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package timeseries builds time series panels.
package timeseries

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/dashboard"
)

// Options are a time series panel's options.
type Options struct {
	Legend  common.VizLegendOptions  `json:"legend"`
	Tooltip common.VizTooltipOptions `json:"tooltip"`
}

// FieldConfig is a time series panel's own field options.
type FieldConfig = common.GraphFieldConfig

// PanelBuilder builds a time series panel.
type PanelBuilder struct {
	dashboard.PanelBuilderBase[*PanelBuilder]
	options *Options
	custom  *FieldConfig
}

// NewPanelBuilder starts a time series panel with a list legend at the
// bottom.
func NewPanelBuilder() *PanelBuilder {
	b := &PanelBuilder{
		options: &Options{Legend: common.VizLegendOptions{DisplayMode: common.LegendDisplayModeList, Placement: common.LegendPlacementBottom, Calcs: []string{}}},
		custom:  &FieldConfig{},
	}
	b.PanelBuilderBase = dashboard.NewPanelBuilderBase(b, "timeseries", b.options, b.custom)
	return b
}

// Legend sets the legend.
func (b *PanelBuilder) Legend(l cog.Builder[common.VizLegendOptions]) *PanelBuilder {
	b.options.Legend, _ = l.Build()
	return b
}

// Tooltip sets the tooltip.
func (b *PanelBuilder) Tooltip(t cog.Builder[common.VizTooltipOptions]) *PanelBuilder {
	b.options.Tooltip, _ = t.Build()
	return b
}

// ThresholdsStyle sets how thresholds are drawn.
func (b *PanelBuilder) ThresholdsStyle(s cog.Builder[common.GraphThresholdsStyleConfig]) *PanelBuilder {
	built, _ := s.Build()
	b.custom.ThresholdsStyle = &built
	return b
}

// DrawStyle sets how series are drawn.
func (b *PanelBuilder) DrawStyle(s common.GraphDrawStyle) *PanelBuilder {
	b.custom.DrawStyle = &s
	return b
}

// LineWidth sets the line width.
func (b *PanelBuilder) LineWidth(w float64) *PanelBuilder { b.custom.LineWidth = &w; return b }

// LineInterpolation sets how points are joined.
func (b *PanelBuilder) LineInterpolation(i common.LineInterpolation) *PanelBuilder {
	b.custom.LineInterpolation = &i
	return b
}

// FillOpacity sets the fill under lines, 0 to 100.
func (b *PanelBuilder) FillOpacity(o float64) *PanelBuilder { b.custom.FillOpacity = &o; return b }

// ShowPoints sets when points are drawn.
func (b *PanelBuilder) ShowPoints(v common.VisibilityMode) *PanelBuilder {
	b.custom.ShowPoints = &v
	return b
}

// AxisPlacement sets where the axis goes.
func (b *PanelBuilder) AxisPlacement(p common.AxisPlacement) *PanelBuilder {
	b.custom.AxisPlacement = &p
	return b
}

// AxisLabel sets the axis label.
func (b *PanelBuilder) AxisLabel(l string) *PanelBuilder { b.custom.AxisLabel = &l; return b }
