package limiter

import "math"

// gcraEpsilon absorbs float rounding in counts of intervals that are whole.
const gcraEpsilon = 1e-9

// gcra decides on the TAT (its MemoryState) relative to now: TAT − now is
// exact, so every later step handles small numbers. Redis: lua/gcra.lua.
func (e *memSlot) gcra(d *Decision, now int64, cl *compiledLimit, cost int64, peek bool) {
	t := cl.interval
	nowF := float64(now)
	ahead := max(math.Float64frombits(uint64(e.stamp))-nowF, 0) // tat − now
	newAhead := ahead + float64(cost)*t
	tolerance := cl.tolerance
	if wait := newAhead - tolerance; wait > 0 && wait/t > gcraEpsilon {
		e.idleAt = now + int64(math.Ceil(ahead))
		remaining := max(int64(math.Floor((tolerance-ahead)/t+gcraEpsilon)), 0)
		reset := fromUS(max(int64(math.Ceil(ahead-gcraEpsilon*t)), 0))
		retry := fromUS(int64(math.Ceil(wait - gcraEpsilon*t)))
		d.set(false, cl.quota, remaining, reset, retry, 0, 0)
		return
	}
	if peek {
		e.idleAt = now + int64(math.Ceil(ahead))
		remaining := max(int64(math.Floor((tolerance-ahead)/t+gcraEpsilon)), 0)
		// ahead may be 0: the rounding allowance must not make the reset negative.
		d.set(true, cl.quota, remaining, fromUS(max(int64(math.Ceil(ahead-gcraEpsilon*t)), 0)), 0, 0, cost)
		return
	}
	e.stamp = int64(math.Float64bits(nowF + newAhead))
	e.idleAt = now + int64(math.Ceil(newAhead))
	remaining := max(int64(math.Floor((tolerance-newAhead)/t+gcraEpsilon)), 0)
	d.set(true, cl.quota, remaining, fromUS(int64(math.Ceil(newAhead-gcraEpsilon*t))), 0, 0, cost)
}

// gcraAdjust moves the TAT of a slot brought to now by delta emission
// intervals: back to now at most on a refund, ahead of now by two
// tolerances at most on an excess.
func (e *memSlot) gcraAdjust(now int64, cl *compiledLimit, delta int64) {
	ahead := max(math.Float64frombits(uint64(e.stamp))-float64(now), 0) + float64(delta)*cl.interval
	ahead = min(max(ahead, 0), 2*cl.tolerance)
	e.stamp = int64(math.Float64bits(float64(now) + ahead))
	e.idleAt = now + int64(math.Ceil(ahead))
}
