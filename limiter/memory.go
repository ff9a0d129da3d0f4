package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"
)

// Defaults of MemoryConfig.
const (
	DefaultMemoryShards  = 64
	DefaultMemoryMaxKeys = 1 << 20 // at most 258 MiB of tables when full
)

const evictionSamples = 5 // entries an insertion looks at (memShard.insert)

// MemoryConfig configures a MemoryStore. The zero value is the defaults.
type MemoryConfig struct {
	// Now is the clock. Default: the monotonic clock from creation, unmoved by wall-clock steps.
	Now func() time.Time
	// Shards is rounded up to a power of two, at most MaxKeys.
	Shards int
	// MaxKeys bounds the keys held; a full shard evicts an idle key, else the one closest to fresh.
	MaxKeys int
}

// MemoryStore is the in-process Store and Inspector, safe for concurrent use: keys
// are spread over shards, each under its own mutex. Two Limits of one algorithm share
// a key's state, so give each limit on a client its own key prefix.
//
// A key whose state is as good as fresh is dropped by Sweep, or when an insertion
// finds it idle. A shard's table of 128-byte slots, 3/8 to 3/4 full, costs 172 to
// 344 B a key: 258 MiB at worst for the default MaxKeys.
type MemoryStore struct {
	now       func() time.Time // nil: the monotonic clock below
	start     time.Time        // when the store was made, with a monotonic reading
	startNS   int64            // start as Unix ns
	seed      maphash.Seed
	mask      uint64
	perShard  int
	shards    []memShard
	penalties memoryPenalties // PenaltyStore's
	leases    leaseTable      // concurrency leases, lease_memory.go
}

func indexOf(a Algorithm) algorithmIndex {
	if spec := SpecOf(a); spec != nil {
		return spec.index
	}
	return algorithmCount
}

// compiledLimit is a validated Limit in µs.
type compiledLimit struct {
	alg       algorithmIndex
	align     bool
	noDelay   bool
	period    time.Duration
	periodUS  int64
	rate      int64
	quota     int64
	interval  float64 // gcra: Period/Rate
	tolerance float64 // gcra: how far ahead of now the TAT may be
	refillUS  int64   // buckets: the time an empty bucket takes to fill
	cal       *Calendar
}

func compileLimit(lim Limit) compiledLimit { return compileSpec(SpecOf(lim.Algorithm), lim) }

func compileSpec(spec *AlgorithmSpec, lim Limit) compiledLimit {
	p, r, q := us(lim.Period), lim.Rate, spec.quota(lim)
	cl := compiledLimit{
		alg:   spec.index,
		align: lim.AlignWindows, noDelay: lim.NoDelay, period: lim.Period,
		periodUS: p, rate: r, quota: q, interval: float64(p) / float64(r),
		cal: lim.Calendar,
	}
	// Only what the algorithm reads: Decide compiles on every call.
	switch spec.index {
	case gcraIndex:
		cl.tolerance = float64(q) * cl.interval
	case tokenBucketIndex, leakyBucketIndex:
		cl.refillUS = ceilDiv(q*p, r)
	}
	return cl
}

// NewMemoryStore returns a MemoryStore, ready for concurrent use.
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
		startNS:  start.UnixNano(),
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

func (s *MemoryStore) nowUS() int64 {
	if s.now != nil {
		return s.now().UnixMicro()
	}
	// Truncated once: truncating apart could read 1µs behind an earlier time.Now(),
	// naming a reset at a whole second a second late.
	return (s.startNS + int64(time.Since(s.start))) / int64(time.Microsecond)
}

// hash's low bits pick the shard. It is the key's alone, so that a key's
// states under several algorithms (the parts of a set on one client) share
// a shard and a probe run: a set locks once for them and finds the second
// beside the first, in the cache lines the first brought. The slot's tag
// tells the algorithms apart.
func (s *MemoryStore) hash(key string) uint64 {
	return maphash.String(s.seed, key)
}

// Name returns "memory".
func (s *MemoryStore) Name() string { return "memory" }

// Len returns the number of keys held, a key once per algorithm.
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

// Sweep drops and counts the keys as good as fresh, one shard at a time. Optional.
func (s *MemoryStore) Sweep() int {
	now := s.nowUS()
	dropped := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		dropped += sh.sweep(now)
		sh.sweepBooks(now)
		sh.mu.Unlock()
	}
	return dropped
}

// Decide implements Store. It never waits, so ctx is not consulted, and
// fails only for a limit or cost that Validate or CheckCost refuses.
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
	return b.decide(ctx, key, cost, ModeConsume, 0)
}

type memoryBinding struct {
	store *MemoryStore
	limit compiledLimit
}

func (b *memoryBinding) reset(_ context.Context, key string, _ time.Duration) error {
	b.store.reset(key, b.limit.alg)
	return nil
}

// decide never waits nor fails.
func (b *memoryBinding) decide(_ context.Context, key string, cost int64, mode Mode, _ time.Duration) (d Decision, _ error) {
	if mode == ModeConsume {
		b.consume(&d, key, cost)
	} else {
		d = b.decideMode(key, cost, mode)
	}
	return d, nil
}

// consume reads the clock under the lock, so that a key's decisions see it in order,
// and before the lookup, so that its work overlaps the slot's cache miss. The
// algorithms write *d field by field: copying a struct just written so stalls on
// store forwarding, costing more than gcra's arithmetic.
func (b *memoryBinding) consume(d *Decision, key string, cost int64) {
	s, cl := b.store, &b.limit
	h := s.hash(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	now := s.nowUS()
	var e *memSlot
	i := sh.find(h, cl.alg, key)
	fresh := i < 0
	if fresh {
		e = sh.insert(h, cl.alg, key, now, s.perShard)
	} else {
		e = sh.slot(i)
	}
	// apply, inlined by hand: one call fewer on the hot path.
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

func (b *memoryBinding) decideMode(key string, cost int64, mode Mode) Decision {
	s, cl := b.store, &b.limit
	h := s.hash(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.nowUS() // before the lookup, as in consume
	i := sh.find(h, cl.alg, key)
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

func (e *memSlot) decideMode(now int64, fresh bool, key string, cl *compiledLimit, cost int64, mode Mode) Decision {
	peek := mode == ModePeek
	d := e.apply(now, fresh, key, cl, cost, peek)
	if mode == ModeAtMost && !d.Allowed {
		if d.Remaining > 0 {
			d = e.apply(now, false, key, cl, d.Remaining, false)
		} else if cost > 1 {
			// Not one fits: RetryAfter is when one unit will.
			d = e.apply(now, false, key, cl, 1, true)
		}
	}
	if peek {
		d.Admitted = 0
	}
	return d
}

//go:noinline
func peekFresh(now int64, key string, cl *compiledLimit, cost int64) Decision {
	var blank memSlot
	d := blank.apply(now, true, key, cl, cost, true)
	d.Admitted = 0
	return d
}

func (s *MemoryStore) reset(key string, alg algorithmIndex) {
	h := s.hash(key)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	if i := sh.find(h, alg, key); i >= 0 {
		sh.remove(i)
	}
	sh.mu.Unlock()
}

// apply decides on e; with peek it changes nothing a later decision sees.
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

// set writes d field by field, not a copied composite literal (see consume).
func (d *Decision) set(allowed bool, limit, remaining int64, reset, retry, delay time.Duration, admitted int64) {
	d.Allowed, d.Limit, d.Remaining = allowed, limit, remaining
	d.ResetAfter, d.RetryAfter, d.Delay = reset, retry, delay
	d.Admitted, d.Failure = admitted, FailureNone
}

// idleGrace keeps a key used again soon from being dropped and inserted
// again by insertions; Sweep does not wait for it.
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

func windowOffset(key string, cl *compiledLimit) int64 {
	if cl.align {
		return 0
	}
	return us(WindowOffset(key, cl.period))
}

// refillElapsed is clamped so that elapsed·rate cannot overflow.
func refillElapsed(now, ts int64, cl *compiledLimit) int64 {
	el := now - ts
	if el < 0 {
		return 0
	}
	return min(el, 2*cl.refillUS) // a settled excess may leave a quota of debt
}
