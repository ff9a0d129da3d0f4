package limiter

import "time"

// slidingLog decides on sliding_log's state, its log. Redis: lua/sliding_log.lua.
func (e *memSlot) slidingLog(d *Decision, now int64, cl *compiledLimit, cost int64, peek bool) {
	p, r := cl.periodUS, cl.rate
	if e.log == nil {
		e.log = &timestampLog{}
	}
	lg := e.log
	lg.expire(now - p)
	n := lg.total
	allowed := n+cost <= r
	var reset, retry time.Duration
	switch {
	case allowed && !peek:
		lg.add(now, cost, r)
		n += cost
	case !allowed:
		retry = fromUS(lg.nthOldest(n+cost-r) + p - now)
	}
	if lg.size > 0 {
		newest := lg.newest()
		reset = fromUS(newest + p - now)
		e.idleAt = newest + p
	} else {
		e.idleAt = now
	}
	d.set(allowed, cl.quota, max(r-n, 0), reset, retry, 0, cost*b2i(allowed))
}

// slidingLogAdjust takes delta more units (< 0: gives back) from a slot
// brought to now: an excess adds entries at now, the log holding at most
// two quotas; a refund removes up to −delta units admitted at mark (the
// admission's time) while they are inside the window.
func (e *memSlot) slidingLogAdjust(now int64, cl *compiledLimit, delta, mark int64) {
	lg := e.log
	if delta > 0 {
		if n := min(delta, 2*cl.rate-lg.total); n > 0 {
			lg.add(now, n, cl.rate)
			e.idleAt = now + cl.periodUS
		}
	} else {
		lg.remove(mark, -delta)
	}
}

// timestampLog is a ring of (µs, units), oldest first, of at most Rate.
type timestampLog struct {
	ring  []logEntry
	head  int
	size  int
	total int64 // units
}

type logEntry struct{ ts, n int64 }

func (l *timestampLog) expire(cutoff int64) {
	for l.size > 0 && l.ring[l.head].ts <= cutoff {
		l.total -= l.ring[l.head].n
		l.head = (l.head + 1) % len(l.ring)
		l.size--
	}
	if l.size == 0 {
		l.head = 0
	}
}

func (l *timestampLog) newest() int64 {
	return l.ring[(l.head+l.size-1)%len(l.ring)].ts
}

func (l *timestampLog) add(ts, n, rate int64) {
	l.total += n
	if l.size > 0 {
		last := &l.ring[(l.head+l.size-1)%len(l.ring)]
		if last.ts == ts {
			last.n += n
			return
		}
	}
	if l.size == len(l.ring) {
		c := max(min(2*len(l.ring), int(rate)), 4, l.size+1)
		grown := make([]logEntry, c)
		for i := 0; i < l.size; i++ {
			grown[i] = l.ring[(l.head+i)%len(l.ring)]
		}
		l.ring, l.head = grown, 0
	}
	l.ring[(l.head+l.size)%len(l.ring)] = logEntry{ts: ts, n: n}
	l.size++
}

// nthOldest returns the time of the k-th oldest unit (1-based).
func (l *timestampLog) nthOldest(k int64) int64 {
	for i := 0; i < l.size; i++ {
		en := l.ring[(l.head+i)%len(l.ring)]
		if k <= en.n {
			return en.ts
		}
		k -= en.n
	}
	return l.newest()
}

// remove takes up to n units admitted at ts out of the log, if still in the window.
func (l *timestampLog) remove(ts, n int64) {
	for i := 0; i < l.size && n > 0; i++ {
		j := (l.head + i) % len(l.ring)
		en := &l.ring[j]
		if en.ts != ts {
			continue
		}
		took := min(en.n, n)
		en.n -= took
		l.total -= took
		n -= took
		if en.n > 0 {
			return
		}
		for k := i; k+1 < l.size; k++ { // close the gap
			l.ring[(l.head+k)%len(l.ring)] = l.ring[(l.head+k+1)%len(l.ring)]
		}
		l.size--
		return
	}
}
