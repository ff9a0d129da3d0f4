// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package stat builds stat panels.
package stat

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
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
	dashboard.PanelBuilderBase[*PanelBuilder]
	options *Options
}

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
	b.PanelBuilderBase = dashboard.NewPanelBuilderBase(b, "stat", b.options, nil)
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
