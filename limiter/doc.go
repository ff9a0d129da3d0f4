// Package limiter decides whether a request may pass a rate limit.
//
// It knows nothing of HTTP or Prometheus: callers give it a key, a cost and a
// Limit, and it answers with a Decision. Decisions are made by a Store — the
// embedded MemoryStore, or the Redis store in package limiter/redisstore — so
// that the same Limit behaves the same on one process and on a fleet sharing
// one Redis. A Limiter wraps a Store with validation, a deadline, a failure
// policy (FailOpen, FailClosed, FailLocal) and an optional circuit breaker.
//
// # The hops of a decision
//
// Every way in (the HTTP middleware and POST /v1/check in httplimit, the
// Envoy rate limit service in rls) ends in the same Limiter call, and a
// decision then goes through one path, in straight calls:
//
//	middleware (httplimit, rls)
//	    │ Limiter.AllowN(ctx, key, cost)      PeekN, AllowAtMost: the same path
//	    ▼                                     in another Mode
//	Limiter.decide
//	    │ cost < 1 or > quota ──────────────▶ error, the store is not called
//	    │ breaker open ─────────────────────▶ fail policy (open | closed | local)
//	    │ boundStore.decide(ctx, key, cost, mode, timeout)
//	    ▼
//	store, bound to the Limit once by New (bind)
//	    ├─ MemoryStore: the Limit compiled in its units; never waits, never fails
//	    └─ Inspector.DecideMode with the timeout: the Redis store (one Lua
//	       script), a region store, or a plain Store through an adapter
//	    │
//	    ├─ error: storeFailed ── caller cancelled ─▶ FailureCanceled, nobody told
//	    │                    └── else: Observer, breaker, fail policy decides
//	    ▼
//	Observer.ObserveStore (the collector: rate_limit_redis_duration_seconds),
//	breaker.record, FailLocal's hold on a key it decided locally
//	    │ Decision
//	    ▼
//	middleware: headers, 429 or 503, leaky_bucket delay
//	    │ Recorder.RecordDecision(Record)
//	    ▼
//	collector: counters and histograms, served on /metrics
//
// New settles everything that does not change between decisions: the limit
// is validated and bound to the store, the deadline worked out, the breaker
// and fail policy chosen. A decision checks only its cost. The store is
// called through one interface whatever its kind, and every store is given
// the deadline (the memory store ignores it; the Redis store bounds its
// network I/O by it without a context of its own) — except that Allow and
// AllowN on a memory store with no breaker, Observer or local fallback
// call the store directly, as nothing else would happen around the call.
//
// What each algorithm is to the rest of rl-exporter — window or bucket, its
// script arguments, the Redis keys it touches, the state it keeps — is one
// row of a table (AlgorithmSpec, SpecOf, AlgorithmSpecs), which the memory
// store and the collector read and which is exported for the Redis store.
//
// # Choosing an algorithm
//
// Six algorithms, named everywhere by these identifiers. In short: internal
// APIs sliding_window, public APIs token_bucket or gcra, admin APIs
// fixed_window, and leaky_bucket to smooth traffic to a uniform rate.
//
//	algorithm       use it for                          accuracy
//	fixed_window    admin APIs, daily quotas: cheapest  exact per window, but up to 2×Rate
//	                and easiest to explain              across a window boundary
//	sliding_window  internal APIs: smooth and cheap,    approximate: Rate when traffic is even,
//	                a small overshoot is harmless       up to ~2×Rate per Period in the worst case
//	sliding_log     low limits that must be exact       exact: never more than Rate in any
//	                (logins, one-time codes)            span of one Period
//	token_bucket    public APIs: bursts allowed, fair   exact: Burst at once, then Rate per
//	                long-run rate                       Period; ≤ Burst + Rate·W/Period in any W
//	gcra            public APIs, cheapest exact choice  as token_bucket (the same limit)
//	leaky_bucket    smoothing traffic to a uniform      exact: a queue of Burst drained at Rate
//	                rate for a fragile backend          per Period; admitted requests get a Delay
//
//	algorithm       state per key            MemoryStore                   Redis
//	fixed_window    window start, count      ~200 B                        one hash, 2 fields
//	sliding_window  window start, 2 counts   ~200 B                        one hash, 3 fields
//	sliding_log     one entry per admitted   ~200 B + 16 B per distinct    one sorted-set member per
//	                unit: grows with Rate    µs admitted in the window     unit in the window, a counter
//	token_bucket    level, time              ~200 B                        one hash, 2 fields
//	gcra            one timestamp (TAT)      ~200 B                        one string
//	leaky_bucket    level, time              ~200 B                        one hash, 2 fields
//
// The state and Redis columns are each algorithm's AlgorithmSpec.State and
// RedisState (a test holds them equal). The MemoryStore figures include
// its map slot and a short key (see MemoryStore for the bound on the
// number of keys it holds).
//
// For the window algorithms (fixed_window, sliding_window, sliding_log)
// Rate is the window's limit and Period its length. For the bucket
// algorithms (token_bucket, leaky_bucket, gcra) Burst is the bucket size
// (default Rate) and Rate per Period the refill or drain rate: a bucket
// admits at most Burst + Rate·W/Period in any span W, so "never more than N
// per minute" is Burst + Rate = N with Period one minute (for instance Burst
// 30 and Rate 30).
//
// A request can cost more than 1 (Limiter.AllowN): the cost is taken from
// the window or bucket in one piece. A cost above Limit.Quota could never
// pass and is refused with ErrCostExceedsLimit without calling the store.
//
// # fixed_window and staggered windows
//
// A fixed window counts admissions in consecutive windows of Period. A
// client can spend Rate at the end of one window and Rate again at the start
// of the next: 2×Rate within a moment. By default each key's windows start
// at its own offset (WindowOffset, a hash of the key), so thousands of
// clients do not all get a fresh window at the same instant; set
// Limit.AlignWindows for windows on multiples of Period since the Unix
// epoch (for limits that must read as "per calendar minute").
//
// # The sliding_window bound
//
// The sliding window counter keeps the current window's count and the
// previous one's, and counts the previous one weighted by the share of it
// still inside the sliding window: cur + prev·(Period−e)/Period, e being
// the time since the current window started. It assumes the previous
// window's admissions were spread evenly. When nothing changes windows it
// admits exactly Rate. When the previous window's admissions all came at
// its very end, the weight forgets them while they are still inside the
// sliding window, and a span of one Period can admit up to about 2×Rate
// (119 for Rate 60 in this package's tests); with evenly spread traffic the
// overshoot is small.
//
// # leaky_bucket capacity, and NGINX
//
// The leaky bucket is a queue, like NGINX limit_req with a burst: it holds
// up to Burst requests and drains Rate per Period. A request that finds room
// is admitted with a Delay — how long to hold it so that requests leave at
// the uniform drain rate (0 for the first in an empty bucket, (k−1)·Period/Rate
// for the k-th); one that would overflow is rejected with a RetryAfter. An
// empty bucket admits exactly Burst requests at once. NGINX's burst=b admits
// b+1 at once (the one being served plus b queued), so Burst B here is NGINX
// burst=B−1. With Limit.NoDelay requests are admitted at once while still
// filling the bucket, like NGINX's nodelay.
//
// # Time and exactness
//
// Both stores count time in whole microseconds (Redis's TIME on Redis, the
// injected clock on the MemoryStore) and bucket levels as integers in units
// of 1/Period, so fractional refill is carried exactly; Limit.Validate
// refuses limits whose Quota×Period (µs) exceeds 2^53, where Lua's numbers
// stop being exact. Durations in a Decision are rounded up to the
// microsecond.
package limiter
