// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package dashboard holds the dashboard, its panels, rows, variables,
// links and thresholds, and the builder that lays panels out on the grid
// as the Grafana foundation SDK does.
package dashboard

import (
	"encoding/json"

	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog/variants"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
)

// SchemaVersion is the dashboard schema these types follow.
const SchemaVersion = 42

// gridWidth is the number of columns of Grafana's grid.
const gridWidth = 24

// Dashboard is a Grafana dashboard.
type Dashboard struct {
	Uid                  *string                      `json:"uid,omitempty"`
	Title                *string                      `json:"title,omitempty"`
	Description          *string                      `json:"description,omitempty"`
	Tags                 []string                     `json:"tags,omitempty"`
	Timezone             *string                      `json:"timezone,omitempty"`
	Editable             *bool                        `json:"editable,omitempty"`
	GraphTooltip         *DashboardCursorSync         `json:"graphTooltip,omitempty"`
	Time                 *DashboardDashboardTime      `json:"time,omitempty"`
	FiscalYearStartMonth *uint8                       `json:"fiscalYearStartMonth,omitempty"`
	Refresh              *string                      `json:"refresh,omitempty"`
	SchemaVersion        uint16                       `json:"schemaVersion"`
	Panels               []PanelOrRowPanel            `json:"panels,omitempty"`
	Templating           DashboardDashboardTemplating `json:"templating"`
	Annotations          AnnotationContainer          `json:"annotations"`
}

// DashboardCursorSync shares the cursor or tooltip between panels.
type DashboardCursorSync int64

// DashboardCursorSyncCrosshair shares the crosshair.
const DashboardCursorSyncCrosshair DashboardCursorSync = 1

// DashboardDashboardTime is the default time range.
type DashboardDashboardTime struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// DashboardDashboardTemplating holds the variables.
type DashboardDashboardTemplating struct {
	List []VariableModel `json:"list,omitempty"`
}

// AnnotationContainer holds annotations; the dashboards define none.
type AnnotationContainer struct{}

// PanelOrRowPanel is one entry of the dashboard's panel list.
type PanelOrRowPanel struct {
	Panel    *Panel
	RowPanel *RowPanel
}

// MarshalJSON writes the panel or the row.
func (p PanelOrRowPanel) MarshalJSON() ([]byte, error) {
	if p.RowPanel != nil {
		return json.Marshal(p.RowPanel)
	}
	return json.Marshal(p.Panel)
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H uint32 `json:"h"`
	W uint32 `json:"w"`
	X uint32 `json:"x"`
	Y uint32 `json:"y"`
}

// NewGridPos is a 12×9 cell at the origin.
func NewGridPos() *GridPos { return &GridPos{H: 9, W: 12} }

// Panel is a visualisation; Options and FieldConfig.Defaults.Custom are the
// plugin's own.
type Panel struct {
	Type            string                `json:"type"`
	Id              *uint32               `json:"id,omitempty"`
	Targets         []variants.Dataquery  `json:"targets,omitempty"`
	Title           *string               `json:"title,omitempty"`
	Description     *string               `json:"description,omitempty"`
	Transparent     *bool                 `json:"transparent,omitempty"`
	Datasource      *common.DataSourceRef `json:"datasource,omitempty"`
	GridPos         *GridPos              `json:"gridPos,omitempty"`
	Links           []DashboardLink       `json:"links,omitempty"`
	RepeatDirection *string               `json:"repeatDirection,omitempty"`
	Interval        *string               `json:"interval,omitempty"`
	TimeFrom        *string               `json:"timeFrom,omitempty"`
	Options         any                   `json:"options,omitempty"`
	FieldConfig     *FieldConfigSource    `json:"fieldConfig,omitempty"`
}

// NewPanel is a panel that is not transparent and repeats horizontally.
func NewPanel() *Panel {
	return &Panel{Transparent: cog.ToPtr(false), RepeatDirection: cog.ToPtr("h")}
}

// FieldConfigSource is a panel's field defaults and overrides.
type FieldConfigSource struct {
	Defaults  FieldConfig                           `json:"defaults"`
	Overrides []DashboardFieldConfigSourceOverrides `json:"overrides"`
}

// NewFieldConfigSource has no defaults and no override.
func NewFieldConfigSource() *FieldConfigSource {
	return &FieldConfigSource{Overrides: []DashboardFieldConfigSourceOverrides{}}
}

// FieldConfig is the field defaults of a panel.
type FieldConfig struct {
	Unit       *string           `json:"unit,omitempty"`
	Decimals   *float64          `json:"decimals,omitempty"`
	Min        *float64          `json:"min,omitempty"`
	Thresholds *ThresholdsConfig `json:"thresholds,omitempty"`
	Custom     any               `json:"custom,omitempty"`
}

// DashboardFieldConfigSourceOverrides sets properties on the fields a
// matcher selects.
type DashboardFieldConfigSourceOverrides struct {
	Matcher    MatcherConfig        `json:"matcher"`
	Properties []DynamicConfigValue `json:"properties"`
}

// MatcherConfig selects fields.
type MatcherConfig struct {
	Id      string `json:"id"`
	Options any    `json:"options,omitempty"`
}

// DynamicConfigValue is one property an override sets.
type DynamicConfigValue struct {
	Id    string `json:"id"`
	Value any    `json:"value,omitempty"`
}

// ThresholdsMode says whether steps are absolute values or percentages.
type ThresholdsMode string

// ThresholdsModeAbsolute: the steps are values.
const ThresholdsModeAbsolute ThresholdsMode = "absolute"

// Threshold is one step; the base step has a nil Value.
type Threshold struct {
	Value *float64 `json:"value"`
	Color string   `json:"color"`
}

// ThresholdsConfig is the steps of a panel's thresholds.
type ThresholdsConfig struct {
	Mode  ThresholdsMode `json:"mode"`
	Steps []Threshold    `json:"steps"`
}

// ThresholdsConfigBuilder builds a ThresholdsConfig.
type ThresholdsConfigBuilder struct{ internal ThresholdsConfig }

// NewThresholdsConfigBuilder starts a thresholds config.
func NewThresholdsConfigBuilder() *ThresholdsConfigBuilder { return &ThresholdsConfigBuilder{} }

// Build returns the thresholds.
func (b *ThresholdsConfigBuilder) Build() (ThresholdsConfig, error) { return b.internal, nil }

// Mode sets the thresholds mode.
func (b *ThresholdsConfigBuilder) Mode(m ThresholdsMode) *ThresholdsConfigBuilder {
	b.internal.Mode = m
	return b
}

// Steps sets the steps.
func (b *ThresholdsConfigBuilder) Steps(steps []Threshold) *ThresholdsConfigBuilder {
	b.internal.Steps = steps
	return b
}

// DashboardLinkType is what a link points at.
type DashboardLinkType string

// DashboardLinkTypeLink points at a URL.
const DashboardLinkTypeLink DashboardLinkType = "link"

// DashboardLinkPlacement is where a link is shown.
type DashboardLinkPlacement string

// DashboardLinkPlacementInControlsMenu shows it in the controls menu.
const DashboardLinkPlacementInControlsMenu DashboardLinkPlacement = "inControlsMenu"

// DashboardLink is a link of a panel or dashboard.
type DashboardLink struct {
	Title       string                  `json:"title"`
	Type        DashboardLinkType       `json:"type"`
	Icon        string                  `json:"icon"`
	Tooltip     string                  `json:"tooltip"`
	Url         *string                 `json:"url,omitempty"`
	Tags        []string                `json:"tags"`
	AsDropdown  bool                    `json:"asDropdown"`
	Placement   *DashboardLinkPlacement `json:"placement,omitempty"`
	TargetBlank bool                    `json:"targetBlank"`
	IncludeVars bool                    `json:"includeVars"`
	KeepTime    bool                    `json:"keepTime"`
}

// DashboardLinkBuilder builds a DashboardLink.
type DashboardLinkBuilder struct{ internal DashboardLink }

// NewDashboardLinkBuilder starts a link with the title.
func NewDashboardLinkBuilder(title string) *DashboardLinkBuilder {
	return &DashboardLinkBuilder{internal: DashboardLink{
		Title: title, Tags: []string{}, Placement: cog.ToPtr(DashboardLinkPlacementInControlsMenu),
	}}
}

// Build returns the link.
func (b *DashboardLinkBuilder) Build() (DashboardLink, error) { return b.internal, nil }

// Type sets what the link points at.
func (b *DashboardLinkBuilder) Type(t DashboardLinkType) *DashboardLinkBuilder {
	b.internal.Type = t
	return b
}

// Url sets the link's URL.
func (b *DashboardLinkBuilder) Url(url string) *DashboardLinkBuilder { b.internal.Url = &url; return b }

// Tooltip sets the link's tooltip.
func (b *DashboardLinkBuilder) Tooltip(t string) *DashboardLinkBuilder {
	b.internal.Tooltip = t
	return b
}

// TargetBlank opens the link in a new tab.
func (b *DashboardLinkBuilder) TargetBlank(blank bool) *DashboardLinkBuilder {
	b.internal.TargetBlank = blank
	return b
}

// RowPanel is a row of the dashboard.
type RowPanel struct {
	Type      string   `json:"type"`
	Collapsed bool     `json:"collapsed"`
	Title     *string  `json:"title,omitempty"`
	GridPos   *GridPos `json:"gridPos,omitempty"`
	Id        uint32   `json:"id"`
	Panels    []Panel  `json:"panels"`
}

// RowBuilder builds a RowPanel.
type RowBuilder struct{ internal RowPanel }

// NewRowBuilder starts an open row with the title.
func NewRowBuilder(title string) *RowBuilder {
	return &RowBuilder{internal: RowPanel{Type: "row", Title: &title, Panels: []Panel{}}}
}

// Build returns the row.
func (b *RowBuilder) Build() (RowPanel, error) { return b.internal, nil }

// Id sets the row's panel id.
func (b *RowBuilder) Id(id uint32) *RowBuilder { b.internal.Id = id; return b }

// DashboardBuilder builds a Dashboard, placing panels left to right and
// starting a new line when the 24 columns are full.
type DashboardBuilder struct {
	internal                            Dashboard
	currentX, currentY, lastPanelHeight uint32
}

// NewDashboardBuilder starts a dashboard with the title: browser time
// zone, editable, schema 42.
func NewDashboardBuilder(title string) *DashboardBuilder {
	return &DashboardBuilder{internal: Dashboard{
		Title:                &title,
		Timezone:             cog.ToPtr("browser"),
		Editable:             cog.ToPtr(true),
		GraphTooltip:         cog.ToPtr(DashboardCursorSync(0)),
		FiscalYearStartMonth: cog.ToPtr(uint8(0)),
		SchemaVersion:        SchemaVersion,
	}}
}

// Build returns the dashboard.
func (b *DashboardBuilder) Build() (Dashboard, error) { return b.internal, nil }

// Uid sets the dashboard's stable identifier.
func (b *DashboardBuilder) Uid(uid string) *DashboardBuilder { b.internal.Uid = &uid; return b }

// Description sets the dashboard's description.
func (b *DashboardBuilder) Description(d string) *DashboardBuilder {
	b.internal.Description = &d
	return b
}

// Tags sets the dashboard's tags.
func (b *DashboardBuilder) Tags(tags []string) *DashboardBuilder { b.internal.Tags = tags; return b }

// Editable lets users change the dashboard in Grafana.
func (b *DashboardBuilder) Editable() *DashboardBuilder {
	b.internal.Editable = cog.ToPtr(true)
	return b
}

// Readonly keeps users from changing the dashboard in Grafana.
func (b *DashboardBuilder) Readonly() *DashboardBuilder {
	b.internal.Editable = cog.ToPtr(false)
	return b
}

// Tooltip sets how the cursor is shared between panels.
func (b *DashboardBuilder) Tooltip(s DashboardCursorSync) *DashboardBuilder {
	b.internal.GraphTooltip = &s
	return b
}

// Refresh sets the auto-refresh interval.
func (b *DashboardBuilder) Refresh(r string) *DashboardBuilder { b.internal.Refresh = &r; return b }

// Time sets the default time range.
func (b *DashboardBuilder) Time(from, to string) *DashboardBuilder {
	b.internal.Time = &DashboardDashboardTime{From: from, To: to}
	return b
}

// Timezone sets the time zone.
func (b *DashboardBuilder) Timezone(tz common.TimeZone) *DashboardBuilder {
	b.internal.Timezone = cog.ToPtr(string(tz))
	return b
}

// WithVariable adds a template variable.
func (b *DashboardBuilder) WithVariable(v cog.Builder[VariableModel]) *DashboardBuilder {
	built, _ := v.Build()
	b.internal.Templating.List = append(b.internal.Templating.List, built)
	return b
}

// WithRow adds a full-width row below everything placed so far.
func (b *DashboardBuilder) WithRow(r cog.Builder[RowPanel]) *DashboardBuilder {
	row, _ := r.Build()
	if row.GridPos == nil || (row.GridPos.X == 0 && row.GridPos.Y == 0) {
		row.GridPos = &GridPos{H: 1, W: gridWidth, Y: b.currentY + b.lastPanelHeight}
	}
	b.internal.Panels = append(b.internal.Panels, PanelOrRowPanel{RowPanel: &row})
	b.currentX, b.currentY, b.lastPanelHeight = 0, row.GridPos.Y+1, 0
	return b
}

// WithPanel places the panel right of the previous one, or at the start of
// a new line once the previous ones filled the width.
func (b *DashboardBuilder) WithPanel(p cog.Builder[Panel]) *DashboardBuilder {
	panel, _ := p.Build()
	if panel.GridPos == nil {
		panel.GridPos = NewGridPos()
	}
	if panel.GridPos.X == 0 && panel.GridPos.Y == 0 {
		panel.GridPos.X, panel.GridPos.Y = b.currentX, b.currentY
	}
	b.internal.Panels = append(b.internal.Panels, PanelOrRowPanel{Panel: &panel})
	b.currentX += panel.GridPos.W
	b.lastPanelHeight = max(b.lastPanelHeight, panel.GridPos.H)
	if b.currentX >= gridWidth {
		b.currentX, b.currentY, b.lastPanelHeight = 0, b.currentY+b.lastPanelHeight, 0
	}
	return b
}
