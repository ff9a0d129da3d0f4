// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package cog holds the generic builder interface of the dashboard
// builders and a pointer helper, as the Grafana foundation SDK names them.
package cog

// Builder builds a T; every builder of the dashboards implements it.
type Builder[T any] interface {
	Build() (T, error)
}

// ToPtr returns a pointer to a copy of v.
func ToPtr[T any](v T) *T { return &v }
