// Package limiter decides whether a request may pass a rate limit. It knows
// nothing of HTTP or Prometheus: callers give a key, a cost and a Limit and
// get a Decision.
//
//   - Limiter (limiter.go) enforces one Limit on one Store. New validates the
//     limit and binds it to the store once (storecall.go); AllowN, and PeekN,
//     AllowAtMost and Reset (inspect.go), each make one store call bounded by
//     Config.Timeout.
//   - A Store decides atomically: MemoryStore (memory.go, its hash table in
//     memtable.go) in process, or the Redis store of limiter/redisstore for a
//     fleet. An Inspector also peeks, admits at most, and resets.
//   - When the store fails, the FailPolicy decides: FailOpen, FailClosed, or
//     FailLocal, each instance enforcing its share of the limit (local.go).
//     Decision.Failure says which.
//   - A Guard (guard.go) is what the Limiters on one store share: the
//     CircuitBreaker (breaker.go; one per shard of a ShardedStore), the
//     summarised log of store failures and the LocalFallback.
//   - AlgorithmSpec (algorithms.go) is the table of the six algorithms: their
//     script parameters, their Redis keys and the state they keep.
//   - Observer (types.go) and Recorder (record.go) let the collector hear of
//     store calls and decisions without this package importing it.
//
// One decision:
//
//	Limiter.AllowN ── cost < 1 or > Quota ──────────▶ error, store not called
//	    │          └─ breaker open ─────────────────▶ fail policy
//	    ▼
//	boundStore.decide: MemoryStore, or Inspector.DecideMode with the timeout
//	    ├─ error, caller cancelled ctx ─────────────▶ refusal, FailureCanceled
//	    ├─ other error ─▶ Observer, breaker, log ───▶ fail policy
//	    ▼
//	Observer, breaker, FailLocal's hold on keys it decided ─▶ Decision
//
// On a MemoryStore with no breaker, Observer or FailLocal, Allow and AllowN
// call the store directly, as nothing else would see the call.
//
// # Algorithms
//
//	algorithm       use it for                          accuracy
//	fixed_window    admin APIs, daily quotas: cheapest  exact per window, but up to 2×Rate
//	                and easiest to explain              across a window boundary
//	sliding_window  internal APIs: smooth and cheap     approximate: up to ~2×Rate per Period
//	sliding_log     low limits that must be exact       exact: never more than Rate in any
//	                (logins, one-time codes)            span of one Period
//	token_bucket    public APIs: bursts allowed, fair   exact: Burst at once, then Rate per
//	                long-run rate                       Period; ≤ Burst + Rate·W/Period in any W
//	gcra            public APIs, cheapest exact choice  as token_bucket (the same limit)
//	leaky_bucket    smoothing traffic to a uniform      exact: a queue of Burst drained at Rate
//	                rate for a fragile backend          per Period; admitted requests get a Delay
//
//	algorithm       state per key            MemoryStore                   Redis
//	fixed_window    window start, count      170–340 B                     one hash, 2 fields
//	sliding_window  window start, 2 counts   170–340 B                     one hash, 3 fields
//	sliding_log     one entry per admitted   170–340 B + 48 B, + 16 B per  one sorted-set member per
//	                unit: grows with Rate    distinct µs in the window     unit in the window, a counter
//	token_bucket    level, time              170–340 B                     one hash, 2 fields
//	gcra            one timestamp (TAT)      170–340 B                     one string
//	leaky_bucket    level, time              170–340 B                     one hash, 2 fields
//
// The state and Redis columns are AlgorithmSpec.State and RedisState (a test
// holds them equal); the MemoryStore column is a table slot with a key of up
// to 62 bytes (see MemoryStore).
//
// Window algorithms admit Rate per window of Period. Bucket algorithms hold
// Burst (default Rate) and refill or drain Rate per Period, so "never more
// than N per minute" is Burst + Rate = N with Period one minute. A cost above
// Limit.Quota could never pass and is refused with ErrCostExceedsLimit.
//
// fixed_window and sliding_window start each key's windows at its own offset
// (WindowOffset), so that clients do not all reset at once; Limit.AlignWindows
// puts them on multiples of Period since the Unix epoch. sliding_window
// counts cur + prev·(Period−e)/Period, assuming the previous window's traffic
// was even: when it all came at that window's end, one Period can admit up to
// about 2×Rate. leaky_bucket is NGINX limit_req's queue: an empty bucket
// admits Burst at once (NGINX burst=Burst−1), each request with the Delay that
// spaces them at the drain rate; Limit.NoDelay admits at once, like nodelay.
//
// Both stores count time in whole microseconds (Redis's TIME, the
// MemoryStore's clock) and bucket levels as integers in units of 1/Period, so
// fractional refill is exact; Limit.Validate refuses a Quota×Period (µs) above
// 2^53, where Lua's numbers stop being exact. Durations in a Decision are
// rounded up to the microsecond.
package limiter
