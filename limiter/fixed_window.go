package limiter

// fixedWindow decides on fixed_window's state (its MemoryState), windows on
// the key's offset or a calendar (calendar.go). Redis: lua/fixed_window.lua.
func (e *memSlot) fixedWindow(d *Decision, now int64, key string, cl *compiledLimit, cost int64, peek bool) {
	p, r := cl.periodUS, cl.rate
	// extra is the period and alignment e.stamp was computed for: while now
	// is in that window, the key's offset need not be hashed again.
	ws := e.stamp
	if cl.cal != nil {
		// extra is the window's end: a window of another calendar is not this one.
		w := cl.cal.windowsAt(now)
		if ws = w[1]; e.stamp != ws || e.extra != w[2] {
			e.stamp, e.extra, e.units = ws, w[2], 0
		}
		p = w[2] - ws
	} else if kind := cl.periodUS<<1 | b2i(cl.align); e.extra != kind || now < ws || now >= ws+p {
		ws = windowStart(now, windowOffset(key, cl), p)
		e.extra = kind
		if e.stamp != ws {
			e.stamp, e.units = ws, 0
		}
	}
	e.idleAt = ws + p
	reset := fromUS(ws + p - now)
	if e.units+cost > r {
		d.set(false, cl.quota, max(r-e.units, 0), reset, reset, 0, 0)
		return
	}
	if peek {
		d.set(true, cl.quota, r-e.units, reset, 0, 0, cost)
		return
	}
	e.units += cost
	d.set(true, cl.quota, r-e.units, reset, 0, 0, cost)
}

// fixedWindowAdjust takes delta more units (< 0: gives back) from a slot
// brought to now: an excess into the window of now, at most two quotas; a
// refund into the window charged (mark), if the slot still holds it.
func (e *memSlot) fixedWindowAdjust(cl *compiledLimit, delta, mark int64) {
	if delta > 0 {
		e.units = min(e.units+delta, 2*cl.rate)
	} else if e.stamp == mark {
		e.units = max(e.units+delta, 0)
	}
}
