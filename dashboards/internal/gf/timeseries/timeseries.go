// Package timeseries builds time series panels.
package timeseries

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog/variants"
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
	parts   dashboard.PanelParts
	options *Options
	custom  *FieldConfig
}

var _ cog.Builder[dashboard.Panel] = (*PanelBuilder)(nil)

// NewPanelBuilder starts a time series panel with a list legend at the
// bottom.
func NewPanelBuilder() *PanelBuilder {
	b := &PanelBuilder{
		options: &Options{Legend: common.VizLegendOptions{DisplayMode: common.LegendDisplayModeList, Placement: common.LegendPlacementBottom, Calcs: []string{}}},
		custom:  &FieldConfig{},
	}
	b.parts = dashboard.NewPanelParts("timeseries", b.options, b.custom)
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

// Interval sets the minimum query interval.
func (b *PanelBuilder) Interval(i string) *PanelBuilder { b.parts.SetInterval(i); return b }

// TimeFrom overrides the dashboard's time range.
func (b *PanelBuilder) TimeFrom(t string) *PanelBuilder { b.parts.SetTimeFrom(t); return b }

// Unit sets the unit of the values.
func (b *PanelBuilder) Unit(u string) *PanelBuilder { b.parts.SetUnit(u); return b }

// Min sets the minimum of the axis.
func (b *PanelBuilder) Min(m float64) *PanelBuilder { b.parts.SetMin(m); return b }

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

// OverrideByRegexp sets properties on the series whose name matches.
func (b *PanelBuilder) OverrideByRegexp(re string, props []dashboard.DynamicConfigValue) *PanelBuilder {
	b.parts.AddOverride("byRegexp", &re, props)
	return b
}

// OverrideByQuery sets properties on the series of one query.
func (b *PanelBuilder) OverrideByQuery(ref string, props []dashboard.DynamicConfigValue) *PanelBuilder {
	b.parts.AddOverride("byFrameRefID", &ref, props)
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
