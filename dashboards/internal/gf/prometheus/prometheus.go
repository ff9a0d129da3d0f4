// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package prometheus holds the Prometheus query of a panel.
package prometheus

import (
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog/variants"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
)

// PromQueryFormat is how Grafana reads a query's result.
type PromQueryFormat string

// PromQueryFormatHeatmap reads histogram buckets as a heatmap.
const PromQueryFormatHeatmap PromQueryFormat = "heatmap"

// Dataquery is a Prometheus query.
type Dataquery struct {
	Datasource   *common.DataSourceRef `json:"datasource,omitempty"`
	Expr         string                `json:"expr"`
	Format       *PromQueryFormat      `json:"format,omitempty"`
	Instant      *bool                 `json:"instant,omitempty"`
	LegendFormat *string               `json:"legendFormat,omitempty"`
	Range        *bool                 `json:"range,omitempty"`
	RefId        *string               `json:"refId,omitempty"`
}

// ImplementsDataqueryVariant makes a Dataquery a panel query.
func (Dataquery) ImplementsDataqueryVariant() {}

// DataqueryBuilder builds a Dataquery.
type DataqueryBuilder struct{ internal Dataquery }

// NewDataqueryBuilder starts a query.
func NewDataqueryBuilder() *DataqueryBuilder { return &DataqueryBuilder{} }

// Build returns the query.
func (b *DataqueryBuilder) Build() (variants.Dataquery, error) { return b.internal, nil }

// RefId sets the query's reference (A, B, ...).
func (b *DataqueryBuilder) RefId(ref string) *DataqueryBuilder { b.internal.RefId = &ref; return b }

// Datasource sets the data source.
func (b *DataqueryBuilder) Datasource(ds common.DataSourceRef) *DataqueryBuilder {
	b.internal.Datasource = &ds
	return b
}

// Expr sets the PromQL.
func (b *DataqueryBuilder) Expr(expr string) *DataqueryBuilder { b.internal.Expr = expr; return b }

// LegendFormat sets the series' legend.
func (b *DataqueryBuilder) LegendFormat(f string) *DataqueryBuilder {
	b.internal.LegendFormat = &f
	return b
}

// Format sets how the result is read.
func (b *DataqueryBuilder) Format(f PromQueryFormat) *DataqueryBuilder {
	b.internal.Format = &f
	return b
}

// Range makes it a range query.
func (b *DataqueryBuilder) Range() *DataqueryBuilder {
	b.internal.Range, b.internal.Instant = boolPtr(true), boolPtr(false)
	return b
}

// Instant makes it an instant query.
func (b *DataqueryBuilder) Instant() *DataqueryBuilder {
	b.internal.Range, b.internal.Instant = boolPtr(false), boolPtr(true)
	return b
}

func boolPtr(v bool) *bool { return &v }
