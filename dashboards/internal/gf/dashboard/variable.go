// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

package dashboard

import (
	"encoding/json"

	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/cog"
	"github.com/rl-exporter/rl-exporter/dashboards/internal/gf/common"
)

// VariableType is the kind of a template variable.
type VariableType string

// VariableModel is a template variable.
type VariableModel struct {
	Type             VariableType          `json:"type"`
	Name             string                `json:"name"`
	Label            *string               `json:"label,omitempty"`
	SkipUrlSync      *bool                 `json:"skipUrlSync,omitempty"`
	Description      *string               `json:"description,omitempty"`
	Query            *StringOrMap          `json:"query,omitempty"`
	Datasource       *common.DataSourceRef `json:"datasource,omitempty"`
	Current          *VariableOption       `json:"current,omitempty"`
	Multi            *bool                 `json:"multi,omitempty"`
	AllowCustomValue *bool                 `json:"allowCustomValue,omitempty"`
	Refresh          *VariableRefresh      `json:"refresh,omitempty"`
	Sort             *VariableSort         `json:"sort,omitempty"`
	IncludeAll       *bool                 `json:"includeAll,omitempty"`
	AllValue         *string               `json:"allValue,omitempty"`
	Auto             *bool                 `json:"auto,omitempty"`
	AutoMin          *string               `json:"auto_min,omitempty"`
	AutoCount        *int32                `json:"auto_count,omitempty"`
}

// newVariableModel is a variable of the type with Grafana's defaults.
func newVariableModel(typ VariableType, name string) VariableModel {
	return VariableModel{
		Type: typ, Name: name,
		SkipUrlSync: cog.ToPtr(false), Multi: cog.ToPtr(false), AllowCustomValue: cog.ToPtr(true),
		IncludeAll: cog.ToPtr(false), Auto: cog.ToPtr(false), AutoMin: cog.ToPtr("10s"), AutoCount: cog.ToPtr(int32(30)),
	}
}

// VariableRefresh says when a query variable's values are read again.
type VariableRefresh int64

// VariableRefreshOnTimeRangeChanged reads them when the time range changes.
const VariableRefreshOnTimeRangeChanged VariableRefresh = 2

// VariableSort orders a query variable's values.
type VariableSort int64

// VariableSortAlphabeticalAsc sorts them alphabetically.
const VariableSortAlphabeticalAsc VariableSort = 1

// StringOrMap is a variable's query: a string, or a map.
type StringOrMap struct {
	String *string
	Map    map[string]any
}

// MarshalJSON writes the string or the map.
func (s StringOrMap) MarshalJSON() ([]byte, error) {
	if s.String != nil {
		return json.Marshal(s.String)
	}
	if s.Map != nil {
		return json.Marshal(s.Map)
	}
	return []byte("null"), nil
}

// StringOrArrayOfString is one value or several.
type StringOrArrayOfString struct {
	String        *string
	ArrayOfString []string
}

// MarshalJSON writes the string or the array.
func (s StringOrArrayOfString) MarshalJSON() ([]byte, error) {
	if s.String != nil {
		return json.Marshal(s.String)
	}
	if s.ArrayOfString != nil {
		return json.Marshal(s.ArrayOfString)
	}
	return []byte("null"), nil
}

// VariableOption is a value of a variable, as shown and as used.
type VariableOption struct {
	Text  StringOrArrayOfString `json:"text"`
	Value StringOrArrayOfString `json:"value"`
}

// DatasourceVariableBuilder builds a data source variable.
type DatasourceVariableBuilder struct{ internal VariableModel }

// NewDatasourceVariableBuilder starts a data source variable.
func NewDatasourceVariableBuilder(name string) *DatasourceVariableBuilder {
	return &DatasourceVariableBuilder{internal: newVariableModel("datasource", name)}
}

// Build returns the variable.
func (b *DatasourceVariableBuilder) Build() (VariableModel, error) { return b.internal, nil }

// Label sets the variable's label.
func (b *DatasourceVariableBuilder) Label(l string) *DatasourceVariableBuilder {
	b.internal.Label = &l
	return b
}

// Type sets the data source type the variable offers.
func (b *DatasourceVariableBuilder) Type(t string) *DatasourceVariableBuilder {
	b.internal.Query = &StringOrMap{String: &t}
	return b
}

// QueryVariableBuilder builds a query variable.
type QueryVariableBuilder struct{ internal VariableModel }

// NewQueryVariableBuilder starts a query variable.
func NewQueryVariableBuilder(name string) *QueryVariableBuilder {
	return &QueryVariableBuilder{internal: newVariableModel("query", name)}
}

// Build returns the variable.
func (b *QueryVariableBuilder) Build() (VariableModel, error) { return b.internal, nil }

// Label sets the variable's label.
func (b *QueryVariableBuilder) Label(l string) *QueryVariableBuilder { b.internal.Label = &l; return b }

// Description sets the variable's description.
func (b *QueryVariableBuilder) Description(d string) *QueryVariableBuilder {
	b.internal.Description = &d
	return b
}

// Datasource sets the data source the query reads.
func (b *QueryVariableBuilder) Datasource(ds common.DataSourceRef) *QueryVariableBuilder {
	b.internal.Datasource = &ds
	return b
}

// Query sets the query that lists the values.
func (b *QueryVariableBuilder) Query(q StringOrMap) *QueryVariableBuilder {
	b.internal.Query = &q
	return b
}

// Refresh sets when the values are read again.
func (b *QueryVariableBuilder) Refresh(r VariableRefresh) *QueryVariableBuilder {
	b.internal.Refresh = &r
	return b
}

// Sort sets the order of the values.
func (b *QueryVariableBuilder) Sort(s VariableSort) *QueryVariableBuilder {
	b.internal.Sort = &s
	return b
}

// Multi lets users select several values.
func (b *QueryVariableBuilder) Multi(multi bool) *QueryVariableBuilder {
	b.internal.Multi = &multi
	return b
}

// IncludeAll offers an "All" value.
func (b *QueryVariableBuilder) IncludeAll(all bool) *QueryVariableBuilder {
	b.internal.IncludeAll = &all
	return b
}

// AllValue sets what "All" stands for in queries.
func (b *QueryVariableBuilder) AllValue(v string) *QueryVariableBuilder {
	b.internal.AllValue = &v
	return b
}

// Current sets the selected value.
func (b *QueryVariableBuilder) Current(o VariableOption) *QueryVariableBuilder {
	b.internal.Current = &o
	return b
}
