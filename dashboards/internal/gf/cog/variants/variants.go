// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package variants names the kinds of value a panel holds whose type
// depends on its plugin: a panel's queries.
package variants

// Dataquery is a query of a panel (a Prometheus query).
type Dataquery interface {
	ImplementsDataqueryVariant()
}
