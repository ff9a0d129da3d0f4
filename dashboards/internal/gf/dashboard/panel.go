package dashboard

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog/variants"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
)

// PanelParts is what every visualisation's builder sets the same way; the
// timeseries, stat and heatmap builders wrap it and add their options.
type PanelParts struct{ Internal *Panel }

// NewPanelParts starts a panel of the plugin type with its options and
// custom field config.
func NewPanelParts(typ string, options, custom any) PanelParts {
	p := NewPanel()
	p.Type = typ
	p.Options = options
	p.FieldConfig = NewFieldConfigSource()
	p.FieldConfig.Defaults.Custom = custom
	return PanelParts{Internal: p}
}

// Build returns the panel.
func (p PanelParts) Build() (Panel, error) { return *p.Internal, nil }

// SetId sets the panel id.
func (p PanelParts) SetId(id uint32) { p.Internal.Id = &id }

// SetTitle sets the title.
func (p PanelParts) SetTitle(t string) { p.Internal.Title = &t }

// SetDescription sets the description.
func (p PanelParts) SetDescription(d string) { p.Internal.Description = &d }

// SetDatasource sets the data source.
func (p PanelParts) SetDatasource(ds common.DataSourceRef) { p.Internal.Datasource = &ds }

func (p PanelParts) gridPos() *GridPos {
	if p.Internal.GridPos == nil {
		p.Internal.GridPos = NewGridPos()
	}
	return p.Internal.GridPos
}

// SetSpan sets the width in columns.
func (p PanelParts) SetSpan(w uint32) { p.gridPos().W = w }

// SetHeight sets the height in grid rows.
func (p PanelParts) SetHeight(h uint32) { p.gridPos().H = h }

// SetInterval sets the minimum query interval.
func (p PanelParts) SetInterval(i string) { p.Internal.Interval = &i }

// SetTimeFrom overrides the dashboard's time range.
func (p PanelParts) SetTimeFrom(t string) { p.Internal.TimeFrom = &t }

// SetUnit sets the unit of the values.
func (p PanelParts) SetUnit(u string) { p.Internal.FieldConfig.Defaults.Unit = &u }

// SetDecimals sets the decimals shown.
func (p PanelParts) SetDecimals(d float64) { p.Internal.FieldConfig.Defaults.Decimals = &d }

// SetMin sets the minimum of the axis.
func (p PanelParts) SetMin(m float64) { p.Internal.FieldConfig.Defaults.Min = &m }

// AddTarget adds a query.
func (p PanelParts) AddTarget(q cog.Builder[variants.Dataquery]) {
	built, _ := q.Build()
	p.Internal.Targets = append(p.Internal.Targets, built)
}

// SetThresholds sets the thresholds.
func (p PanelParts) SetThresholds(t cog.Builder[ThresholdsConfig]) {
	built, _ := t.Build()
	p.Internal.FieldConfig.Defaults.Thresholds = &built
}

// SetLinks sets the panel's links.
func (p PanelParts) SetLinks(links []cog.Builder[DashboardLink]) {
	p.Internal.Links = make([]DashboardLink, 0, len(links))
	for _, l := range links {
		built, _ := l.Build()
		p.Internal.Links = append(p.Internal.Links, built)
	}
}

// AddOverride sets properties on the fields the matcher selects.
func (p PanelParts) AddOverride(matcher string, options any, props []DynamicConfigValue) {
	p.Internal.FieldConfig.Overrides = append(p.Internal.FieldConfig.Overrides, DashboardFieldConfigSourceOverrides{
		Matcher: MatcherConfig{Id: matcher, Options: options}, Properties: props,
	})
}
