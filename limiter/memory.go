package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"time"
)

// Defaults of MemoryConfig.
const (
	// DefaultMemoryShards is the default number of shards of a MemoryStore.
	DefaultMemoryShards = 64
	// DefaultMemoryMaxKeys is the default bound on the number of keys a
	// MemoryStore holds (at most 256 MiB of tables when full, see MemoryStore).
	DefaultMemoryMaxKeys = 1 << 20
)

// evictionSamples is how many entries an insertion looks at to drop idle
// keys, and, when the shard is full, to choose the one to evict.
const evictionSamples = 5

// MemoryConfig configures a MemoryStore. The zero value is usable.
type MemoryConfig struct {
	// Now is the clock; tests inject a controllable one. Default: the wall
	// clock read once when the store is made, advanced by the monotonic
	// clock (as time.Now's monotonic reading is), which costs one clock read
	// per decision instead of two and is not moved by steps of the wall
	// clock.
	// It should not go backwards; when it does, window algorithms start a
	// new window and bucket algorithms count no refill.
	Now func() time.Time
	// Shards is the number of independently locked parts the keys are
	// spread over, rounded up to a power of two (and down to at most
	// MaxKeys). Default DefaultMemoryShards.
	Shards int
	// MaxKeys bounds the number of keys held (per key and algorithm). It is
	// enforced per shard, as floor(MaxKeys/Shards) keys per shard, so the
	// store never holds more than MaxKeys keys. When a
	// shard is full, inserting a new key evicts a sampled key: an idle one
	// if the sample holds one, else the one whose state is closest to fresh.
	// Default DefaultMemoryMaxKeys.
	MaxKeys int
}

// MemoryStore is the embedded Store: decisions are made in process, under a
// per-shard mutex, so unrelated keys rarely contend. It is safe for
// concurrent use by many goroutines. Deciding for a key that already exists
// does not allocate.
//
// Memory is bounded. A key's state may be dropped once it is equivalent to
// a fresh key's (a window that has passed, a bucket full or empty again):
// each insertion of a new key samples a few entries of its shard and drops
// those that have been idle for over a second, and Sweep drops every idle
// one. Independently, a shard never holds more than floor(MaxKeys/Shards)
// keys, so the store never holds more than MaxKeys. Each shard is a hash
// table of 128-byte slots kept between 3/8 and 3/4 full, a slot holding a
// key of up to 62 bytes itself: a key costs 170 to 340 bytes of live heap,
// plus its length when longer than 62 bytes, so the default bound of
// 1,048,576 keys is 256 MiB of tables at worst. Tables of 512 slots or
// more are built from 64 KiB chunks that a growing shard hands to the next
// one instead of leaving them to the garbage collector, so the resident
// memory stays close to the live heap: measured with 1,000,000 keys of 30
// bytes, 271 B of live heap and 291 to 295 B of RSS per key (1.1×; before
// the chunks, 392 to 424 B, up to 1.6×). sliding_log keys also keep one
// 16-byte entry per distinct admission timestamp inside the window: up to
// Rate entries, so their memory grows with the limit.
//
// State is kept per key and algorithm: two Limits with the same algorithm
// share a key's state, so callers that enforce several limits of one
// algorithm on the same client give each its own key prefix.
type MemoryStore struct {
	now      func() time.Time // nil: the monotonic clock below
	start    time.Time        // when the store was made, with a monotonic reading
	startUS  int64            // start as Unix µs
	seed     maphash.Seed
	mask     uint64
	perShard int
	shards   []memShard
}

// indexOf is a's index, algorithmCount when a is not an algorithm.
func indexOf(a Algorithm) algorithmIndex {
	if spec := SpecOf(a); spec != nil {
		return spec.index
	}
	return algorithmCount
}

// compiledLimit is a validated Limit in the units the memory store counts
// in, worked out once per Limiter instead of once per decision.
type compiledLimit struct {
	alg      algorithmIndex
	align    bool
	noDelay  bool
	period   time.Duration
	periodUS int64   // Period in µs
	rate     int64   // Rate
	quota    int64   // Quota()
	interval float64 // gcra's emission interval Period/Rate (µs)
	// tolerance is gcra's Quota()·interval: how far ahead of now the
	// theoretical arrival time may be.
	tolerance float64
	// refillUS is ceil(Quota()·Period/Rate): how long an empty bucket
	// takes to fill (µs), the most elapsed time a refill counts.
	refillUS int64
}

// compileLimit compiles lim, which must have a valid algorithm.
func compileLimit(lim Limit) compiledLimit { return compileSpec(SpecOf(lim.Algorithm), lim) }

// compileSpec compiles lim, whose algorithm's spec is spec.
func compileSpec(spec *AlgorithmSpec, lim Limit) compiledLimit {
	p, r, q := us(lim.Period), lim.Rate, spec.quota(lim)
	cl := compiledLimit{
		alg:   spec.index,
		align: lim.AlignWindows, noDelay: lim.NoDelay, period: lim.Period,
		periodUS: p, rate: r, quota: q, interval: float64(p) / float64(r),
	}
	// Only what the algorithm reads: Store.Decide compiles on every call.
	switch spec.index {
	case gcraIndex:
		cl.tolerance = float64(q) * cl.interval
	case tokenBucketIndex, leakyBucketIndex:
		cl.refillUS = ceilDiv(q*p, r)
	}
	return cl
}

// NewMemoryStore returns a MemoryStore configured by cfg.
func NewMemoryStore(cfg MemoryConfig) *MemoryStore {
	if cfg.Shards <= 0 {
		cfg.Shards = DefaultMemoryShards
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMemoryMaxKeys
	}
	n := 1
	for n < cfg.Shards {
		n <<= 1
	}
	for n > 1 && n > cfg.MaxKeys { // at least one key per shard
		n >>= 1
	}
	start := time.Now()
	s := &MemoryStore{
		now:      cfg.Now,
		start:    start,
		startUS:  start.UnixMicro(),
		seed:     maphash.MakeSeed(),
		mask:     uint64(n - 1),
		perShard: cfg.MaxKeys / n,
		shards:   make([]memShard, n),
	}
	pool := &chunkPool{}
	for i := range s.shards {
		s.shards[i].pool = pool
	}
	return s
}

// nowUS is the current time in Unix µs. Without an injected clock it is the
// wall clock read when the store was made advanced by the monotonic clock:
// an exact reading of the current instant (not a cached or coarse one)
// that costs one clock read instead of time.Now's two, and never goes
// backwards when the wall clock is stepped.
func (s *MemoryStore) nowUS() int64 {
	if s.now != nil {
		return s.now().UnixMicro()
	}
	return s.startUS + int64(time.Since(s.start)/time.Microsecond)
}

// hash is the 64-bit hash of (alg, key): its low bits pick the shard,
// the table slot is derived from all of it.
func (s *MemoryStore) hash(alg algorithmIndex, key string) uint64 {
	return maphash.String(s.seed, key) ^ (uint64(alg)+1)*0xC2B2AE3D27D4EB4F
}

// Name returns "memory".
func (s *MemoryStore) Name() string { return "memory" }

// Len returns the number of keys held, counting each key once per algorithm.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// Sweep drops every key whose state is equivalent to a fresh key's and
// returns how many it dropped. It locks one shard at a time. Calling it is
// optional: insertions already drop idle keys they come across.
func (s *MemoryStore) Sweep() int {
	now := s.nowUS()
	dropped := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		dropped += sh.sweep(now)
		sh.mu.Unlock()
	}
	return dropped
}

// Decide implements Store. It returns an error only for a limit or cost
// that Limit.Validate or Limit.CheckCost would refuse (a Limiter never
// passes one); ctx is not consulted because a decision never waits.
func (s *MemoryStore) Decide(ctx context.Context, key string, lim Limit, cost int64) (Decision, error) {
	spec := SpecOf(lim.Algorithm)
	if spec == nil || lim.Rate <= 0 || lim.Period < time.Millisecond {
		if err := lim.Validate(); err != nil {
			return Decision{}, fmt.Errorf("memory store: limit: %w", err)
		}
	}
	b := memoryBinding{store: s, limit: compileSpec(spec, lim)}
	if cost < 1 || cost > b.limit.quota {
		return Decision{Limit: b.limit.quota}, fmt.Errorf("memory store: %w", lim.CheckCost(cost))
	}
	return b.decide(ctx, key, cost, ModeConsume, 0) // never fails
}

// decide makes one decision on the store for its validated limit and a
// checked cost; ctx and timeout are not consulted, as it never waits, and
// it never fails. It is the memory store's Decide, DecideMode and a
// Limiter's call alike (see boundStore).
func (b *memoryBinding) decide(_ context.Context, key string, cost int64, mode Mode, _ time.Duration) (d Decision, _ error) {
	if mode == ModeConsume {
		b.consume(&d, key, cost)
	} else {
		d = b.decideMode(key, cost, mode)
	}
	return d, nil
}

// consume is decide in ModeConsume, the decision of AllowN: it writes the
// Decision into *d. It reads the clock under the shard's lock, after
// finding the key, so that decisions on one key see the clock in the
// order they take the lock (measured, this order also measured about 10%
// faster over 10,000 keys than reading the clock first).
//
// The algorithms write their Decision field by field where the caller
// wants it, rather than returning it: Go keeps a struct of more than four
// fields in memory and copies it in 16-byte words, and a copy that reads
// in 16-byte words what was just written field by field waits for the
// stores to reach the cache instead of taking them from the store buffer
// (measured, two such copies cost more than a gcra decision's
// arithmetic).
func (b *memoryBinding) consume(d *Decision, key string, cost int64) {
	s, cl := b.store, &b.limit
	h := s.hash(cl.alg, key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	var e *memSlot
	i := sh.find(h, cl.alg, key)
	now := s.nowUS()
	fresh := i < 0
	if fresh {
		e = sh.insert(h, cl.alg, key, now, s.perShard)
	} else {
		e = sh.slot(i)
	}
	// apply, spelled out: the decision path is one call shorter.
	switch cl.alg {
	case gcraIndex:
		e.gcra(d, now, cl, cost, false)
	case tokenBucketIndex:
		e.tokenBucket(d, now, fresh, cl, cost, false)
	case fixedWindowIndex:
		e.fixedWindow(d, now, key, cl, cost, false)
	case slidingWindowIndex:
		e.slidingWindow(d, now, key, cl, cost, false)
	case slidingLogIndex:
		e.slidingLog(d, now, cl, cost, false)
	default:
		e.leakyBucket(d, now, cl, cost, false)
	}
	sh.mu.Unlock()
}

// decideMode is decide in ModePeek or ModeAtMost.
func (b *memoryBinding) decideMode(key string, cost int64, mode Mode) Decision {
	s, cl := b.store, &b.limit
	h := s.hash(cl.alg, key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.find(h, cl.alg, key)
	now := s.nowUS()
	fresh := i < 0
	var e *memSlot
	switch {
	case fresh && mode == ModePeek:
		return peekFresh(now, key, cl, cost)
	case fresh:
		e = sh.insert(h, cl.alg, key, now, s.perShard)
	default:
		e = sh.slot(i)
	}
	return e.decideMode(now, fresh, key, cl, cost, mode)
}

// decideMode is a peek or an at-most decision on the slot e.
func (e *memSlot) decideMode(now int64, fresh bool, key string, cl *compiledLimit, cost int64, mode Mode) Decision {
	peek := mode == ModePeek
	d := e.apply(now, fresh, key, cl, cost, peek)
	if mode == ModeAtMost && !d.Allowed {
		if d.Remaining > 0 {
			// Remaining is the most that fits now: take that instead.
			d = e.apply(now, false, key, cl, d.Remaining, false)
		} else if cost > 1 {
			// Not one fits: answer as a refused single unit, whose
			// RetryAfter is when one will.
			d = e.apply(now, false, key, cl, 1, true)
		}
	}
	if peek {
		d.Admitted = 0
	}
	return d
}

// peekFresh answers a peek at a key the store does not hold, from a fresh
// state that it does not keep.
//
//go:noinline
func peekFresh(now int64, key string, cl *compiledLimit, cost int64) Decision {
	var blank memSlot
	d := blank.apply(now, true, key, cl, cost, true)
	d.Admitted = 0
	return d
}

// reset forgets key's state under cl's algorithm.
func (s *MemoryStore) reset(key string, alg algorithmIndex) {
	h := s.hash(alg, key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	if i := sh.find(h, alg, key); i >= 0 {
		sh.remove(i)
	}
	sh.mu.Unlock()
}

// apply makes one decision on the slot e; with peek it answers as for a
// request of cost but changes nothing a later decision would see. An
// allowed decision has Admitted = cost, a peek's too (decideMode clears it).
func (e *memSlot) apply(now int64, fresh bool, key string, cl *compiledLimit, cost int64, peek bool) (d Decision) {
	switch cl.alg {
	case fixedWindowIndex:
		e.fixedWindow(&d, now, key, cl, cost, peek)
	case slidingWindowIndex:
		e.slidingWindow(&d, now, key, cl, cost, peek)
	case slidingLogIndex:
		e.slidingLog(&d, now, cl, cost, peek)
	case tokenBucketIndex:
		e.tokenBucket(&d, now, fresh, cl, cost, peek)
	case leakyBucketIndex:
		e.leakyBucket(&d, now, cl, cost, peek)
	default:
		e.gcra(&d, now, cl, cost, peek)
	}
	return d
}

// set writes the fields of a decision one by one (Failure: none), from
// values worked out beforehand. Assigning a composite literal to *d would
// be built aside first (d might alias what the literal reads) and copied
// in 16-byte words, which the processor cannot forward from the
// field-by-field stores just made (see memoryBinding.consume).
func (d *Decision) set(allowed bool, limit, remaining int64, reset, retry, delay time.Duration, admitted int64) {
	d.Allowed, d.Limit, d.Remaining = allowed, limit, remaining
	d.ResetAfter, d.RetryAfter, d.Delay = reset, retry, delay
	d.Admitted, d.Failure = admitted, FailureNone
}

// idleGrace is how long past becoming equivalent to fresh a key is kept
// when insertions come across it, so that a key used again soon keeps its
// entry instead of being dropped and allocated again. Sweep does not wait
// for it.
const idleGrace = int64(time.Second / time.Microsecond)

func us(d time.Duration) int64     { return int64(d / time.Microsecond) }
func fromUS(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
func ceilDiv(a, b int64) int64     { return (a + b - 1) / b } // a >= 0, b > 0
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
func windowStart(now, off, p int64) int64 { return floorDiv(now-off, p)*p + off }

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// windowOffset is the offset of key's windows in µs (0 when aligned).
func windowOffset(key string, cl *compiledLimit) int64 {
	if cl.align {
		return 0
	}
	return us(WindowOffset(key, cl.period))
}

func (e *memSlot) fixedWindow(d *Decision, now int64, key string, cl *compiledLimit, cost int64, peek bool) {
	p, r := cl.periodUS, cl.rate
	// extra records the period and alignment e.stamp's window was computed for:
	// while now is inside that window it is the current one, which spares
	// hashing the key for its offset on every decision.
	ws := e.stamp
	if kind := cl.periodUS<<1 | b2i(cl.align); e.extra != kind || now < ws || now >= ws+p {
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

// slidingWindow compares in integers scaled by P, which is exact: the
// float weighted = prev·(P−e)/P of the definition is only compared and
// floored, and R·P ≤ 2^53 (Limit.Validate).
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

// refillElapsed is now − ts, clamped to [0, cl.refillUS] (ceil(full/rate))
// so that elapsed·rate cannot overflow for a long-idle key.
func refillElapsed(now, ts int64, cl *compiledLimit) int64 {
	el := now - ts
	if el < 0 {
		return 0
	}
	return min(el, cl.refillUS)
}

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
	d.set(allowed, cl.quota, level/p, fromUS(refill), retry, 0, cost*b2i(allowed))
}

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
	d.set(allowed, cl.quota, (full-level)/p, fromUS(drain), retry, delay, cost*b2i(allowed))
}

// gcraEpsilon absorbs float rounding when a quantity measured in emission
// intervals should be a whole number (the values compared are at most about
// 2^53/P in magnitude, far above their rounding error, far below 1).
const gcraEpsilon = 1e-9

// gcra works relative to now: d = TAT − now is exact (both are timestamps
// of similar magnitude), and every later step handles small numbers.
func (e *memSlot) gcra(d *Decision, now int64, cl *compiledLimit, cost int64, peek bool) {
	t := cl.interval
	nowF := float64(now)
	ahead := max(math.Float64frombits(uint64(e.stamp))-nowF, 0) // tat − now
	newAhead := ahead + float64(cost)*t
	tolerance := cl.tolerance
	// wait/t > ε, with the division only when it can be: t > 0.
	if wait := newAhead - tolerance; wait > 0 && wait/t > gcraEpsilon {
		e.idleAt = now + int64(math.Ceil(ahead))
		remaining := max(int64(math.Floor((tolerance-ahead)/t+gcraEpsilon)), 0)
		reset := fromUS(int64(math.Ceil(ahead - gcraEpsilon*t)))
		retry := fromUS(int64(math.Ceil(wait - gcraEpsilon*t)))
		d.set(false, cl.quota, remaining, reset, retry, 0, 0)
		return
	}
	if peek {
		e.idleAt = now + int64(math.Ceil(ahead))
		remaining := max(int64(math.Floor((tolerance-ahead)/t+gcraEpsilon)), 0)
		d.set(true, cl.quota, remaining, fromUS(int64(math.Ceil(ahead-gcraEpsilon*t))), 0, 0, cost)
		return
	}
	e.stamp = int64(math.Float64bits(nowF + newAhead))
	e.idleAt = now + int64(math.Ceil(newAhead))
	remaining := max(int64(math.Floor((tolerance-newAhead)/t+gcraEpsilon)), 0)
	d.set(true, cl.quota, remaining, fromUS(int64(math.Ceil(newAhead-gcraEpsilon*t))), 0, 0, cost)
}

// timestampLog is a ring of (timestamp, units) pairs in ascending time
// order; admissions within one microsecond share a pair. It grows by
// doubling up to the limit's Rate pairs.
type timestampLog struct {
	ring  []logEntry
	head  int
	size  int
	total int64 // units in the log
}

type logEntry struct{ ts, n int64 }

// expire drops entries with ts ≤ cutoff.
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

// nthOldest returns the timestamp of the k-th oldest unit (1-based).
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
