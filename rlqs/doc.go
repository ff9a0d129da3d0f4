// Package rlqs is Envoy's Rate Limit Quota Service (envoy.service.rate_limit_quota.v3
// StreamRateLimitQuotas): each Envoy enforces a quota assignment locally and reports, per bucket,
// the requests it allowed and denied; the Service divides each bucket's limit among the Envoys
// watching it in proportion to their demand (package quota) and pushes each its token bucket.
//
// Buckets are matched by the domain files of the rate limit service (package rls,
// Rules.MatchBucket): a stream's domain names the file, a BucketId's key/value pairs are the
// descriptor entries. A rule of requests_per_unit 0 is answered DENY_ALL, an unlimited or
// shadow_mode one ALLOW_ALL, as is a bucket no rule matches; a bucket whose rule a reload removes
// is abandoned. The demands live in a quota.Store (quota/redisquota on Redis), so that several
// replicas divide one limit among the Envoys of all of them. A replica that stops Drains: its
// streams end (UNAVAILABLE) so that each Envoy moves to another replica at its next report, and
// its streams' entries leave the store so that the others' shares grow at their next interval.
//
// The behaviour of Envoy's filter the Service relies on (docs/envoy.md, "Quota shares"): the
// first report of a bucket on a stream subscribes it; the filter reports every bucket on one
// timer (5 s in Envoy's source, whatever reporting_interval says) and restarts a broken stream at
// that timer, without a new first report; it reads assignment_time_to_live and a token bucket's
// fill_interval in whole seconds, and ignores requests_per_time_unit.
package rlqs
