// Package rls is Envoy's rate limit service (envoy.service.ratelimit.v3 ShouldRateLimit) on
// rl-exporter's limiter: a drop-in for envoyproxy/ratelimit that reads its configuration as it
// is (one YAML file per domain, nested descriptors) and decides each matched descriptor with any
// of the six algorithms, on the same store, fail policy, breaker and recorder as serve's HTTP path.
//
// LoadDir reads a directory of domain files into Rules; New builds a Service on a store; Swap
// replaces its Rules atomically; NewServer puts a Service on a gRPC server with the standard
// health service and reflection; a Watcher tells when a directory's files change.
//
// Concurrency limits (limiter.Leases) are not offered: Envoy's filter asks once per request and
// never gives a lease back (docs/envoy.md, "Concurrency limits and Envoy").
package rls
