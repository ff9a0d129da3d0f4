package limiter

import "time"

// leakyBucket decides on leaky_bucket's state (its MemoryState; a fresh
// slot is empty), drained rate per period. Redis: lua/leaky_bucket.lua.
func (e *memSlot) leakyBucket(d *Decision, now int64, cl *compiledLimit, cost int64, peek bool) {
	p, r, b := cl.periodUS, cl.rate, cl.quota
	full := b * p
	level := max(0, e.units-refillElapsed(now, e.stamp, cl)*r)
	allowed := level+cost*p <= full
	var delay, retry time.Duration
	if allowed {
		if !cl.noDelay {
			delay = fromUS(ceilDiv(level, r))
		}
		if !peek {
			level += cost * p
		}
	} else {
		retry = fromUS(ceilDiv(level+cost*p-full, r))
	}
	e.stamp, e.units = now, level
	drain := ceilDiv(level, r)
	e.idleAt = now + drain
	d.set(allowed, cl.quota, max(full-level, 0)/p, fromUS(drain), retry, delay, cost*b2i(allowed))
}

// leakyBucketAdjust queues delta more units of work (< 0: takes them out)
// on a slot brought to now: down to empty, up to two buckets.
func (e *memSlot) leakyBucketAdjust(now int64, cl *compiledLimit, delta int64) {
	full := cl.quota * cl.periodUS
	e.units = min(max(e.units+delta*cl.periodUS, 0), 2*full)
	e.idleAt = now + ceilDiv(e.units, cl.rate)
}
