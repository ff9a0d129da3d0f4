package limiter

import "time"

// tokenBucket decides on token_bucket's state (its MemoryState; a fresh
// slot is a full bucket), refilled rate per period. Redis: lua/token_bucket.lua.
func (e *memSlot) tokenBucket(d *Decision, now int64, fresh bool, cl *compiledLimit, cost int64, peek bool) {
	p, r, b := cl.periodUS, cl.rate, cl.quota
	full := b * p
	level := full
	if !fresh {
		level = min(full, e.units+refillElapsed(now, e.stamp, cl)*r)
	}
	allowed := level >= cost*p
	var retry time.Duration
	switch {
	case allowed && !peek:
		level -= cost * p
	case !allowed:
		retry = fromUS(ceilDiv(cost*p-level, r))
	}
	e.stamp, e.units = now, level
	refill := ceilDiv(full-level, r)
	e.idleAt = now + refill
	d.set(allowed, cl.quota, max(level, 0)/p, fromUS(refill), retry, 0, cost*b2i(allowed))
}

// tokenBucketAdjust takes delta more tokens (< 0: gives back) from a slot
// brought to now: back up to a full bucket, down to one bucket of debt.
func (e *memSlot) tokenBucketAdjust(now int64, cl *compiledLimit, delta int64) {
	full := cl.quota * cl.periodUS
	e.units = min(max(e.units-delta*cl.periodUS, -full), full)
	e.idleAt = now + ceilDiv(full-e.units, cl.rate)
}
