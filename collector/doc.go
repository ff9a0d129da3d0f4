// Package collector turns the limiter's decisions into Prometheus metrics.
//
// A Collector implements limiter.Recorder (one call per request decision),
// limiter.Observer (one call per store round trip) and prometheus.Collector
// (Describe/Collect, with descriptors built once, in the style of
// node_exporter's collectors). Recording a decision is a lock-free lookup
// in an immutable index of pre-created per-label-set atomic counters, so it
// costs no allocation and no mutex; every series exists at zero from the
// first scrape for each configured endpoint × plan tier.
//
// Label values are bounded: endpoint only takes configured route patterns,
// plan_tier only configured tiers (anything else counts under the default
// tier), and a cap on the number of (endpoint, plan_tier) label sets folds
// the rest into endpoint="other". Users' keys never become labels: the keys
// rejected most often are kept in a fixed-size heavy-hitters sketch served
// as JSON by TopLimitedHandler, for the admin listener only.
//
// The Collector never touches the global Prometheus registry: it keeps its
// own registry (see Registry and Handler) and can also be registered on any
// prometheus.Registerer with Register.
package collector
