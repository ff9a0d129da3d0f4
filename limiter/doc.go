// Package limiter decides whether a request may pass a rate limit. It knows
// nothing of HTTP or Prometheus: callers give a key, a cost and a Limit and
// get a Decision.
//
//   - Limiter (limiter.go, mode.go) enforces one Limit on one Store in a
//     Mode (consume, peek, at most; reserve and lease beside); New validates
//     it and binds it to the store once (bind.go).
//
//   - A Store decides atomically: MemoryStore (memory.go, memtable.go) in
//     process, or limiter/redisstore for a fleet; limiter/shares decides
//     from local shares reserved from a fleet's store. An Inspector also
//     peeks, admits at most, and resets.
//
//   - When the store fails, the FailPolicy decides: FailOpen, FailClosed, or
//     FailLocal, each instance enforcing its share (local.go).
//
//   - A Guard (guard.go) is what the Limiters on one store share: the
//     CircuitBreaker (breaker.go), the failure log and the LocalFallback.
//
//   - AlgorithmSpec (algorithms.go) is the table of the six algorithms. Each
//     one's arithmetic, decision and settle, is its own file: <algorithm>.go
//     in memory, limiter/redisstore/lua/<algorithm>.lua on Redis;
//     calendar.go holds the calendar window boundaries both stores use.
//
//   - Observer (types.go) and Recorder (record.go) tell the collector of
//     store calls and decisions.
//
//     Limiter.AllowN ── cost < 1 or > Quota ──────────▶ error, store not called
//     │          └─ breaker open ─────────────────▶ fail policy
//     ▼
//     boundStore.decide: MemoryStore, or Inspector.DecideMode with the timeout
//     ├─ error, caller cancelled ctx ─────────────▶ refusal, FailureCanceled
//     ├─ other error ─▶ Observer, breaker, log ───▶ fail policy
//     ▼
//     Observer, breaker, FailLocal's hold on keys it decided ─▶ Decision
//
// On a MemoryStore with no breaker, Observer or FailLocal, Allow and AllowN
// call the store directly, as nothing else would see the call.
//
// # Algorithms
//
//	algorithm       use it for                           accuracy
//	fixed_window    admin APIs, calendar quotas: cheapest per window; 2×Rate across a boundary
//	sliding_window  internal APIs: smooth and cheap      approximate: up to ~2×Rate per Period
//	sliding_log     low limits that must be exact        exact: ≤ Rate in any span of a Period
//	token_bucket    public APIs: bursts, fair rate       exact: ≤ Burst + Rate·W/Period in any W
//	gcra            public APIs, cheapest exact choice   as token_bucket
//	leaky_bucket    a uniform rate for a fragile backend exact queue of Burst, with a Delay
//
//	algorithm       state per key            MemoryStore                   Redis
//	fixed_window    window start, count      172–344 B                     one hash, 2 fields
//	sliding_window  window start, 2 counts   172–344 B                     one hash, 3 fields
//	sliding_log     one entry per admitted   172–344 B + 48 B, + 16 B per  one sorted-set member per
//	                unit: grows with Rate    distinct µs in the window     unit in the window, a counter
//	token_bucket    level, time              172–344 B                     one hash, 2 fields
//	gcra            one timestamp (TAT)      172–344 B                     one string
//	leaky_bucket    level, time              172–344 B                     one hash, 2 fields
//
// The state and Redis columns are AlgorithmSpec.State and RedisState (a test
// holds them equal); see MemoryStore for its column.
//
// Window algorithms admit Rate per window of Period, starting each key's
// windows at its own WindowOffset unless Limit.AlignWindows. Bucket
// algorithms hold Burst (default Rate) and refill or drain Rate per Period.
// sliding_window counts cur + prev·(Period−e)/Period, assuming even traffic
// in the previous window. leaky_bucket is NGINX limit_req's queue: an empty
// bucket admits Burst at once (NGINX burst=Burst−1), each with the Delay
// that spaces them at the drain rate (none with Limit.NoDelay).
//
// Limit.Calendar puts fixed_window's windows on a zone's days, weeks, months
// or years (calendar.go). Lua knows no zones: the caller passes the window
// starts around its clock and the script counts in the one holding Redis
// TIME, so callers off by less than a window share one count.
//
// Both stores count time in whole µs and bucket levels as integers in units
// of 1/Period, so refill is exact; Limit.Validate refuses a Quota×Period (µs)
// above 2^53, where Lua's numbers stop being exact. Durations in a Decision
// are rounded up to the µs.
//
// # Reservations
//
// Limiter.Reserve takes an estimate as AllowN does and opens a reservation
// for Config.Hold (reserve*.go; on Redis, lua/<algorithm>.lua's settle);
// Commit settles it at the actual cost, Cancel at 0, by taking actual −
// estimate: a refund never leaves more than a fresh key has, an excess is
// taken even past the quota, at most one quota below zero, so the next
// requests wait. A window's refund goes into the window charged, nothing
// once that has passed. The record lives with the key and a settle removes
// it in the same atomic step: once. Unsettled, it is charged (ExpireCharge)
// or refunded (ExpireRefund) by the next Reserve or Settle on the key.
// CommitAsync and CancelAsync settle without waiting (Redis: in its next batch).
//
// Overshoot bound: a window settles at most the quota plus the excesses of
// the reservations in flight at its last admission, ≤ (in flight) × the
// largest single excess: none with an upper bound as estimate, the largest
// excess when each settles before the next admission.
package limiter
