// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

package dashboard

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog/variants"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
)

// PanelBuilderBase is what the builders of every visualisation share. B
// is the builder that embeds it, so that its methods return that builder
// and chain with the visualisation's own.
type PanelBuilderBase[B any] struct {
	internal *Panel
	self     B
}

// NewPanelBuilderBase starts a panel of the plugin type with its options
// and custom field config; self is the builder that embeds the result.
func NewPanelBuilderBase[B any](self B, typ string, options, custom any) PanelBuilderBase[B] {
	p := NewPanel()
	p.Type = typ
	p.Options = options
	p.FieldConfig = NewFieldConfigSource()
	p.FieldConfig.Defaults.Custom = custom
	return PanelBuilderBase[B]{internal: p, self: self}
}

// Build returns the panel.
func (b *PanelBuilderBase[B]) Build() (Panel, error) { return *b.internal, nil }

// Id sets the panel id.
func (b *PanelBuilderBase[B]) Id(id uint32) B { b.internal.Id = &id; return b.self }

// Title sets the title.
func (b *PanelBuilderBase[B]) Title(t string) B { b.internal.Title = &t; return b.self }

// Description sets the description.
func (b *PanelBuilderBase[B]) Description(d string) B { b.internal.Description = &d; return b.self }

// Datasource sets the data source.
func (b *PanelBuilderBase[B]) Datasource(ds common.DataSourceRef) B {
	b.internal.Datasource = &ds
	return b.self
}

func (b *PanelBuilderBase[B]) gridPos() *GridPos {
	if b.internal.GridPos == nil {
		b.internal.GridPos = NewGridPos()
	}
	return b.internal.GridPos
}

// Span sets the width in columns.
func (b *PanelBuilderBase[B]) Span(w uint32) B { b.gridPos().W = w; return b.self }

// Height sets the height in grid rows.
func (b *PanelBuilderBase[B]) Height(h uint32) B { b.gridPos().H = h; return b.self }

// Interval sets the minimum query interval.
func (b *PanelBuilderBase[B]) Interval(i string) B { b.internal.Interval = &i; return b.self }

// TimeFrom overrides the dashboard's time range.
func (b *PanelBuilderBase[B]) TimeFrom(t string) B { b.internal.TimeFrom = &t; return b.self }

// Unit sets the unit of the values.
func (b *PanelBuilderBase[B]) Unit(u string) B {
	b.internal.FieldConfig.Defaults.Unit = &u
	return b.self
}

// Decimals sets the decimals shown.
func (b *PanelBuilderBase[B]) Decimals(d float64) B {
	b.internal.FieldConfig.Defaults.Decimals = &d
	return b.self
}

// Min sets the minimum of the axis.
func (b *PanelBuilderBase[B]) Min(m float64) B {
	b.internal.FieldConfig.Defaults.Min = &m
	return b.self
}

// WithTarget adds a query.
func (b *PanelBuilderBase[B]) WithTarget(q cog.Builder[variants.Dataquery]) B {
	built, _ := q.Build()
	b.internal.Targets = append(b.internal.Targets, built)
	return b.self
}

// Thresholds sets the thresholds.
func (b *PanelBuilderBase[B]) Thresholds(t cog.Builder[ThresholdsConfig]) B {
	built, _ := t.Build()
	b.internal.FieldConfig.Defaults.Thresholds = &built
	return b.self
}

// Links sets the panel's links.
func (b *PanelBuilderBase[B]) Links(links []cog.Builder[DashboardLink]) B {
	b.internal.Links = make([]DashboardLink, 0, len(links))
	for _, l := range links {
		built, _ := l.Build()
		b.internal.Links = append(b.internal.Links, built)
	}
	return b.self
}

// OverrideByRegexp sets properties on the series whose name matches.
func (b *PanelBuilderBase[B]) OverrideByRegexp(re string, props []DynamicConfigValue) B {
	return b.override("byRegexp", &re, props)
}

// OverrideByQuery sets properties on the series of one query.
func (b *PanelBuilderBase[B]) OverrideByQuery(ref string, props []DynamicConfigValue) B {
	return b.override("byFrameRefID", &ref, props)
}

func (b *PanelBuilderBase[B]) override(matcher string, options any, props []DynamicConfigValue) B {
	b.internal.FieldConfig.Overrides = append(b.internal.FieldConfig.Overrides, DashboardFieldConfigSourceOverrides{
		Matcher: MatcherConfig{Id: matcher, Options: options}, Properties: props,
	})
	return b.self
}
