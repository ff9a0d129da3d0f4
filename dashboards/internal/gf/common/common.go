// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package common holds the option types shared by several visualisations.
package common

// DataSourceRef names a data source.
type DataSourceRef struct {
	Type *string `json:"type,omitempty"`
	Uid  *string `json:"uid,omitempty"`
}

// TimeZone is a dashboard's time zone.
type TimeZone string

// TimeZoneBrowser shows times in the viewer's time zone.
const TimeZoneBrowser TimeZone = "browser"

// LegendDisplayMode is how a legend lists series.
type LegendDisplayMode string

// LegendDisplayModeList lists the series one under the other.
const LegendDisplayModeList LegendDisplayMode = "list"

// LegendPlacement is where a legend goes.
type LegendPlacement string

// LegendPlacementBottom puts the legend under the graph.
const LegendPlacementBottom LegendPlacement = "bottom"

// TooltipDisplayMode is what a tooltip shows.
type TooltipDisplayMode string

// TooltipDisplayModeMulti shows every series at the cursor.
const TooltipDisplayModeMulti TooltipDisplayMode = "multi"

// SortOrder orders a tooltip's series.
type SortOrder string

// SortOrderDescending puts the largest value first.
const SortOrderDescending SortOrder = "desc"

// VisibilityMode says when something is drawn.
type VisibilityMode string

// Visibility modes.
const (
	VisibilityModeAuto  VisibilityMode = "auto"
	VisibilityModeNever VisibilityMode = "never"
)

// GraphThresholdsStyleMode is how thresholds are drawn on a graph.
type GraphThresholdsStyleMode string

// Threshold styles.
const (
	GraphThresholdsStyleModeOff    GraphThresholdsStyleMode = "off"
	GraphThresholdsStyleModeDashed GraphThresholdsStyleMode = "dashed"
)

// GraphDrawStyle is how a series is drawn.
type GraphDrawStyle string

// GraphDrawStyleBars draws bars.
const GraphDrawStyleBars GraphDrawStyle = "bars"

// AxisPlacement is where an axis goes.
type AxisPlacement string

// AxisPlacementRight puts the axis on the right.
const AxisPlacementRight AxisPlacement = "right"

// LineInterpolation is how points are joined.
type LineInterpolation string

// LineInterpolationStepAfter draws steps.
const LineInterpolationStepAfter LineInterpolation = "stepAfter"

// HeatmapCellLayout is how a heatmap's buckets map to rows.
type HeatmapCellLayout string

// HeatmapCellLayoutLe reads the le label as the bucket's upper bound.
const HeatmapCellLayoutLe HeatmapCellLayout = "le"

// BigValueColorMode is what a stat panel colours.
type BigValueColorMode string

// Stat colour modes.
const (
	BigValueColorModeValue      BigValueColorMode = "value"
	BigValueColorModeBackground BigValueColorMode = "background"
	BigValueColorModeNone       BigValueColorMode = "none"
)

// BigValueGraphMode is the graph a stat panel draws behind its value.
type BigValueGraphMode string

// Stat graph modes.
const (
	BigValueGraphModeNone BigValueGraphMode = "none"
	BigValueGraphModeArea BigValueGraphMode = "area"
)

// BigValueJustifyMode aligns a stat panel's values.
type BigValueJustifyMode string

// BigValueJustifyModeAuto lets Grafana align.
const BigValueJustifyModeAuto BigValueJustifyMode = "auto"

// BigValueTextMode is what a stat panel writes.
type BigValueTextMode string

// BigValueTextModeAuto lets Grafana choose.
const BigValueTextModeAuto BigValueTextMode = "auto"

// PercentChangeColorMode colours a stat panel's change.
type PercentChangeColorMode string

// PercentChangeColorModeStandard is green up, red down.
const PercentChangeColorModeStandard PercentChangeColorMode = "standard"

// VizOrientation lays out a stat panel's values.
type VizOrientation string

// VizLegendOptions is a graph's legend.
type VizLegendOptions struct {
	DisplayMode LegendDisplayMode `json:"displayMode"`
	Placement   LegendPlacement   `json:"placement"`
	ShowLegend  bool              `json:"showLegend"`
	Calcs       []string          `json:"calcs"`
}

// VizLegendOptionsBuilder builds a VizLegendOptions.
type VizLegendOptionsBuilder struct{ internal VizLegendOptions }

// NewVizLegendOptionsBuilder starts a list legend at the bottom.
func NewVizLegendOptionsBuilder() *VizLegendOptionsBuilder {
	return &VizLegendOptionsBuilder{internal: VizLegendOptions{DisplayMode: LegendDisplayModeList, Placement: LegendPlacementBottom, Calcs: []string{}}}
}

// Build returns the legend.
func (b *VizLegendOptionsBuilder) Build() (VizLegendOptions, error) { return b.internal, nil }

// ShowLegend shows or hides the legend.
func (b *VizLegendOptionsBuilder) ShowLegend(show bool) *VizLegendOptionsBuilder {
	b.internal.ShowLegend = show
	return b
}

// DisplayMode sets how the series are listed.
func (b *VizLegendOptionsBuilder) DisplayMode(m LegendDisplayMode) *VizLegendOptionsBuilder {
	b.internal.DisplayMode = m
	return b
}

// Placement sets where the legend goes.
func (b *VizLegendOptionsBuilder) Placement(p LegendPlacement) *VizLegendOptionsBuilder {
	b.internal.Placement = p
	return b
}

// VizTooltipOptions is a graph's tooltip.
type VizTooltipOptions struct {
	Mode TooltipDisplayMode `json:"mode"`
	Sort SortOrder          `json:"sort"`
}

// VizTooltipOptionsBuilder builds a VizTooltipOptions.
type VizTooltipOptionsBuilder struct{ internal VizTooltipOptions }

// NewVizTooltipOptionsBuilder starts an empty tooltip configuration.
func NewVizTooltipOptionsBuilder() *VizTooltipOptionsBuilder { return &VizTooltipOptionsBuilder{} }

// Build returns the tooltip.
func (b *VizTooltipOptionsBuilder) Build() (VizTooltipOptions, error) { return b.internal, nil }

// Mode sets what the tooltip shows.
func (b *VizTooltipOptionsBuilder) Mode(m TooltipDisplayMode) *VizTooltipOptionsBuilder {
	b.internal.Mode = m
	return b
}

// Sort sets the order of the tooltip's series.
func (b *VizTooltipOptionsBuilder) Sort(s SortOrder) *VizTooltipOptionsBuilder {
	b.internal.Sort = s
	return b
}

// GraphThresholdsStyleConfig is how a graph draws its thresholds.
type GraphThresholdsStyleConfig struct {
	Mode GraphThresholdsStyleMode `json:"mode"`
}

// GraphThresholdsStyleConfigBuilder builds a GraphThresholdsStyleConfig.
type GraphThresholdsStyleConfigBuilder struct{ internal GraphThresholdsStyleConfig }

// NewGraphThresholdsStyleConfigBuilder starts a thresholds style.
func NewGraphThresholdsStyleConfigBuilder() *GraphThresholdsStyleConfigBuilder {
	return &GraphThresholdsStyleConfigBuilder{}
}

// Build returns the thresholds style.
func (b *GraphThresholdsStyleConfigBuilder) Build() (GraphThresholdsStyleConfig, error) {
	return b.internal, nil
}

// Mode sets how thresholds are drawn.
func (b *GraphThresholdsStyleConfigBuilder) Mode(m GraphThresholdsStyleMode) *GraphThresholdsStyleConfigBuilder {
	b.internal.Mode = m
	return b
}

// ReduceDataOptions says how a stat panel reduces a series to a value.
type ReduceDataOptions struct {
	Calcs []string `json:"calcs"`
}

// ReduceDataOptionsBuilder builds a ReduceDataOptions.
type ReduceDataOptionsBuilder struct{ internal ReduceDataOptions }

// NewReduceDataOptionsBuilder starts with no calculation.
func NewReduceDataOptionsBuilder() *ReduceDataOptionsBuilder {
	return &ReduceDataOptionsBuilder{internal: ReduceDataOptions{Calcs: []string{}}}
}

// Build returns the options.
func (b *ReduceDataOptionsBuilder) Build() (ReduceDataOptions, error) { return b.internal, nil }

// Calcs sets the calculations (lastNotNull, mean, ...).
func (b *ReduceDataOptionsBuilder) Calcs(calcs []string) *ReduceDataOptionsBuilder {
	b.internal.Calcs = calcs
	return b
}

// GraphFieldConfig is a time series panel's own field options.
type GraphFieldConfig struct {
	DrawStyle         *GraphDrawStyle             `json:"drawStyle,omitempty"`
	ThresholdsStyle   *GraphThresholdsStyleConfig `json:"thresholdsStyle,omitempty"`
	LineWidth         *float64                    `json:"lineWidth,omitempty"`
	LineInterpolation *LineInterpolation          `json:"lineInterpolation,omitempty"`
	FillOpacity       *float64                    `json:"fillOpacity,omitempty"`
	ShowPoints        *VisibilityMode             `json:"showPoints,omitempty"`
	AxisPlacement     *AxisPlacement              `json:"axisPlacement,omitempty"`
	AxisLabel         *string                     `json:"axisLabel,omitempty"`
}
