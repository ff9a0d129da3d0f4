// Package variants names the kinds of value a panel holds whose type
// depends on its plugin: a panel's queries.
package variants

// Dataquery is a query of a panel (a Prometheus query).
type Dataquery interface {
	ImplementsDataqueryVariant()
}
