package limiter

import "time"

// slidingWindow decides on sliding_window's state (its MemoryState),
// comparing prev·(P−e)/P in integers scaled by P, exact as R·P ≤ 2^53
// (Limit.Validate). Redis: lua/sliding_window.lua.
func (e *memSlot) slidingWindow(d *Decision, now int64, key string, cl *compiledLimit, cost int64, peek bool) {
	p, r := cl.periodUS, cl.rate
	ws := windowStart(now, windowOffset(key, cl), p)
	switch e.stamp {
	case ws:
	case ws - p:
		e.stamp, e.units, e.extra = ws, 0, e.units
	default:
		e.stamp, e.units, e.extra = ws, 0, 0
	}
	cur, prev := e.units, e.extra
	el := now - ws
	weightedP := prev * (p - el) // weighted·P
	allowed := (cur+cost)*p+weightedP <= r*p
	if allowed && !peek {
		cur += cost
		e.units = cur
	}
	remaining := max(floorDiv(r*p-cur*p-weightedP, p), 0)
	var reset, retry time.Duration
	switch {
	case cur > 0:
		reset = fromUS(ws + 2*p - now)
		e.idleAt = ws + 2*p
	case prev > 0:
		reset = fromUS(ws + p - now)
		e.idleAt = ws + p
	default:
		e.idleAt = now
	}
	switch {
	case allowed:
	case prev > 0 && cur+cost <= r:
		// Smallest e' with prev·(P−e') ≤ (R−cur−c)·P within this window.
		at := p - (r-cur-cost)*p/prev
		retry = fromUS(at - el)
	default:
		// Into the next window, where the previous count is cur.
		at := p - (r-cost)*p/cur
		retry = fromUS(ws + p - now + at)
	}
	d.set(allowed, cl.quota, remaining, reset, retry, 0, cost*b2i(allowed))
}

// slidingWindowAdjust takes delta more units (< 0: gives back) from a slot
// brought to now: an excess into this window's count, at most two quotas;
// a refund into the window charged (mark), this window's count or, once
// the slot has moved on one window, the previous count it weighs.
func (e *memSlot) slidingWindowAdjust(cl *compiledLimit, delta, mark int64) {
	p := cl.periodUS
	switch {
	case delta > 0:
		e.units = min(e.units+delta, 2*cl.rate)
		e.idleAt = e.stamp + 2*p
	case e.stamp == mark:
		e.units = max(e.units+delta, 0)
	case e.stamp-p == mark:
		e.extra = max(e.extra+delta, 0)
	}
}
