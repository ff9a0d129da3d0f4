// Derived from the Grafana Foundation SDK (github.com/grafana/grafana-foundation-sdk, Copyright Grafana Labs),
// licensed under the Apache License, Version 2.0; see NOTICE.

// Package gf and the packages below it are the part of the Grafana
// foundation SDK (github.com/grafana/grafana-foundation-sdk/go) that the
// dashboards use: the same package, type, builder and method names, the
// same JSON field names, order and defaults, so that the generator reads
// as it would with the SDK and writes the same JSON. They exist so that
// `rl-exporter rules` generates the dashboards without linking the SDK
// into the rate limiter's binary.
//
// They hold only what the dashboards call; a dashboard that needs more
// adds it here, copying the SDK's field name and position. The dashboards
// tests decode every generated dashboard with the real SDK's strict
// decoder, so a field the SDK does not know, or writes differently, fails
// there.
package gf
