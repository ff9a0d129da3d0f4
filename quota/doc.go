// Package quota divides one rate limit among the clients that share it, each of which enforces
// its part locally: Envoys of a Rate Limit Quota Service bucket (package rlqs), or rl-exporter's
// own replicas. It knows nothing of gRPC, HTTP or Prometheus.
//
// A Meter turns one client's usage reports into its demand, requests per second measured on
// the caller's clock between reports, so that a client's own notion of elapsed time (Envoy
// sends whole seconds) and its reporting cadence do not matter. Divide hands out the limit in
// proportion to the demands, with a floor for a client that is new (no demand measured yet) or
// idle, and each demand capped so that no client can take the whole limit by inflating its
// reports. Each Share carries the token bucket that enforces it, in the whole seconds Envoy's
// filter works in. A Store exchanges the demands of several replicas' clients of one bucket, so
// that every replica divides the same total: MemoryStore for one replica, quota/redisquota for
// replicas sharing a Redis.
package quota
