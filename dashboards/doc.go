// Package dashboards generates rl-exporter's Grafana dashboards from the SLO
// model (package slo) and the exporter's metric contract, and encodes them
// as the JSON Grafana provisions. They are built with the Grafana
// foundation SDK (github.com/grafana/grafana-foundation-sdk/go), whose
// builders collect every invalid value and return it from Build; the
// tests decode every dashboard back with the SDK's strict decoder.
//
// Every threshold line comes from the spec (the 429 ratio against its alert
// threshold, the store latency quantile against its bucket bound, fail-open
// events against their per-window limit, burn rates against the factors of
// the burn-rate table), every panel links to the runbook of the alert it
// watches, and every query is parameterised by the $datasource, $endpoint
// and $plan_tier variables rather than a hard-coded datasource. [Generate]
// returns the files `rl-exporter rules` writes under DIR/dashboards/; the
// committed copies under dashboards/ are checked against it by a test.
//
// Like slo, the package is pure: no flags, no environment, no clock; safe
// for concurrent use since it holds no state.
package dashboards
