package region

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// asyncStore decides on the local Redis against every region's slots of
// the key; in hybrid, strictly once the key's global estimate reached the
// threshold, until its window ends. A limiter.Inspector and ShardedStore,
// safe for concurrent use.
type asyncStore struct {
	set       *Set
	mode      Mode
	threshold float64 // hybrid: share of the quota decided in async
	home      string  // hybrid: pinned home, "" = hashed
	strict    *strictMarks
}

var (
	_ limiter.Inspector    = (*asyncStore)(nil)
	_ limiter.ShardedStore = (*asyncStore)(nil)
)

// stateSuffix follows the single-region key to name the multi-region hash
// (the same hash tag and escaping).
const stateSuffix = ":regions"

// strictSlot is the slot the strict decisions of hybrid write on home.
func strictSlot(home string) string { return "strict@" + home }

func newAsyncStore(s *Set, m Mode, threshold float64, home string) *asyncStore {
	a := &asyncStore{set: s, mode: m, threshold: threshold, home: home}
	if m == ModeHybrid {
		a.strict = newStrictMarks()
	}
	return a
}

// Name returns "redis".
func (a *asyncStore) Name() string { return "redis" }

func (a *asyncStore) homeOf(key string) string {
	if a.home != "" {
		return a.home
	}
	return a.set.Home(key)
}

// Shard names the region deciding key now ("region/<home>" while hybrid
// is strict), so a lost home's breaker opens for its keys alone.
func (a *asyncStore) Shard(key string) string {
	if a.strict != nil && a.strict.active(key, time.Now()) {
		return "region/" + a.homeOf(key)
	}
	return "region/" + a.set.cfg.Local
}

// Decide implements limiter.Store.
func (a *asyncStore) Decide(ctx context.Context, key string, lim limiter.Limit, cost int64) (limiter.Decision, error) {
	return a.DecideMode(ctx, key, lim, cost, limiter.ModeConsume, 0)
}

// DecideMode implements limiter.Inspector: one script call per decision.
func (a *asyncStore) DecideMode(ctx context.Context, key string, lim limiter.Limit, cost int64, mode limiter.Mode, timeout time.Duration) (limiter.Decision, error) {
	if !Supports(a.mode, lim.Algorithm) {
		return limiter.Decision{}, fmt.Errorf("region %s: %s does not support %q (supported: %v)", a.set.cfg.Local, a.mode, lim.Algorithm, Algorithms(a.mode))
	}
	if err := lim.Validate(); err != nil {
		return limiter.Decision{}, fmt.Errorf("region %s: limit: %w", a.set.cfg.Local, err)
	}
	if err := lim.CheckCost(cost); err != nil {
		return limiter.Decision{}, fmt.Errorf("region %s: %w", a.set.cfg.Local, err)
	}
	if mode > limiter.ModeAtMost {
		return limiter.Decision{}, fmt.Errorf("region %s: unknown mode %d", a.set.cfg.Local, mode)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	local := a.set.cfg.Local
	hash := a.set.stores[local].Keys(key, lim.Algorithm)[0] + stateSuffix
	if a.strict != nil && a.strict.active(key, time.Now()) {
		return a.decideStrict(ctx, key, hash, lim, cost, mode)
	}
	threshold := int64(-1)
	if a.strict != nil {
		threshold = int64(math.Floor(a.threshold * float64(lim.Quota())))
	}
	r, err := a.run(ctx, a.set.cfg.Clients[local], key, hash, local, threshold, lim, cost, mode)
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("region %s: %w", local, err)
	}
	if r.over {
		a.strict.mark(key, time.Now().Add(r.strictFor))
		return a.decideStrict(ctx, key, hash, lim, cost, mode)
	}
	a.set.obs.ObserveDecision(a.mode, HomeLocal)
	if r.slot != "" {
		a.set.ship.changed(hash)
	}
	return r.decision(lim, mode), nil
}

// decideStrict makes a hybrid decision in the home region's strict slot,
// merged back and shipped. A window's refusal is first found locally
// (local slots are at most what was admitted); not a bucket's, whose
// local view can be stricter than home's.
func (a *asyncStore) decideStrict(ctx context.Context, key, hash string, lim limiter.Limit, cost int64, mode limiter.Mode) (limiter.Decision, error) {
	home := a.homeOf(key)
	local := a.set.cfg.Local
	if home != local && !lim.Algorithm.IsBucket() && mode != limiter.ModePeek {
		need := cost
		if mode == limiter.ModeAtMost {
			need = 1
		}
		r, err := a.run(ctx, a.set.cfg.Clients[local], key, hash, local, -1, lim, need, limiter.ModePeek)
		if err == nil && r.admitted == 0 {
			a.set.obs.ObserveDecision(a.mode, HomeLocal)
			return r.decision(lim, mode), nil
		}
	}
	start := time.Now()
	r, err := a.run(ctx, a.set.remote[home], key, hash, strictSlot(home), -1, lim, cost, mode)
	if home == local {
		a.set.obs.ObserveDecision(a.mode, HomeLocal)
		if err == nil && r.slot != "" {
			a.set.ship.changed(hash)
		}
	} else {
		a.set.obs.ObserveRTT(home, time.Since(start))
		a.set.obs.ObserveDecision(a.mode, HomeRemote)
		if err == nil && r.slot != "" {
			a.set.ship.mergeLocal(hash, "r:"+strictSlot(home), r.slot, r.ttl)
		}
	}
	if err != nil {
		return limiter.Decision{}, fmt.Errorf("region %s: %w", home, err)
	}
	return r.decision(lim, mode), nil
}

// Reset implements limiter.Inspector for the local copy of the key alone:
// the other regions' slots come back with their next shipping.
func (a *asyncStore) Reset(ctx context.Context, key string, lim limiter.Limit, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	local := a.set.cfg.Local
	hash := a.set.stores[local].Keys(key, lim.Algorithm)[0] + stateSuffix
	if err := a.set.cfg.Clients[local].Del(ctx, hash).Err(); err != nil {
		return fmt.Errorf("region %s: reset: %w", local, err)
	}
	return nil
}

// result is one script answer.
type result struct {
	admitted, remaining int64
	reset, retry        time.Duration
	over                bool
	strictFor           time.Duration
	slot                string
	ttl                 time.Duration // of the written slot: reset after
}

// decision is r as the answer to a decision in mode: a peek admits
// nothing, whatever fits.
func (r result) decision(lim limiter.Limit, mode limiter.Mode) limiter.Decision {
	d := limiter.Decision{
		Allowed:    r.admitted > 0,
		Limit:      lim.Quota(),
		Remaining:  r.remaining,
		ResetAfter: r.reset,
		RetryAfter: r.retry,
		Admitted:   r.admitted,
	}
	if mode == limiter.ModePeek {
		d.Admitted = 0
	}
	return d
}

// run calls the algorithm's script on c for hash, writing slot.
func (a *asyncStore) run(ctx context.Context, c redis.UniversalClient, key, hash, slot string, threshold int64, lim limiter.Limit, cost int64, mode limiter.Mode) (result, error) {
	period := lim.Period.Microseconds()
	args := make([]any, 0, 8)
	var keep int64
	switch lim.Algorithm {
	case limiter.FixedWindow, limiter.SlidingWindow:
		// The store's own arguments: the rate, the period, the key's window
		// offset and, for fixed_window, a calendar's window starts.
		for _, v := range limiter.SpecOf(lim.Algorithm).AppendParams(nil, key, lim) {
			args = append(args, v)
		}
	default:
		args = append(args, lim.Quota(), lim.Rate, period)
		// A bucket's state lives one refill longer (lua/slots.lua).
		keep = lim.Window().Milliseconds() + 1
	}
	args = append(args, cost, int(mode), slot, threshold, keep)
	v, err := a.set.scripts.decide[lim.Algorithm].Run(ctx, c, []string{hash}, args...).Slice()
	if err != nil {
		return result{}, fmt.Errorf("%s script: %w", lim.Algorithm, err)
	}
	return decodeResult(v)
}

// decodeResult checks and converts a script's reply.
func decodeResult(v []any) (result, error) {
	if len(v) != 8 {
		return result{}, fmt.Errorf("script reply has %d values, want 8", len(v))
	}
	var n [7]int64
	for i := range n {
		x, ok := v[i].(int64)
		if !ok {
			return result{}, fmt.Errorf("script reply value %d is %T, want an integer", i, v[i])
		}
		n[i] = x
	}
	slot, ok := v[7].(string)
	if !ok {
		return result{}, fmt.Errorf("script reply value 7 is %T, want a string", v[7])
	}
	us := func(x int64) time.Duration { return time.Duration(max(x, 0)) * time.Microsecond }
	return result{
		admitted: n[0], remaining: max(n[1], 0), reset: us(n[2]), retry: us(n[3]),
		over: n[5] == 1, strictFor: us(n[6]), slot: slot, ttl: us(n[2]),
	}, nil
}

// strictMarks remembers, per key, until when hybrid decides it strictly,
// in bounded shards under a mutex each. Safe for concurrent use.
type strictMarks struct {
	shards [16]struct {
		mu    sync.Mutex
		until map[string]time.Time
	}
}

// maxStrictMarksPerShard bounds the memory of the marks (16 × 8192 keys).
const maxStrictMarksPerShard = 8192

func newStrictMarks() *strictMarks {
	m := &strictMarks{}
	for i := range m.shards {
		m.shards[i].until = map[string]time.Time{}
	}
	return m
}

func (m *strictMarks) shard(key string) int { return int(score("", key) % uint64(len(m.shards))) }

func (m *strictMarks) active(key string, now time.Time) bool {
	sh := &m.shards[m.shard(key)]
	sh.mu.Lock()
	until, ok := sh.until[key]
	if ok && !now.Before(until) {
		delete(sh.until, key)
		ok = false
	}
	sh.mu.Unlock()
	return ok
}

func (m *strictMarks) mark(key string, until time.Time) {
	sh := &m.shards[m.shard(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.until[key]; !ok && len(sh.until) >= maxStrictMarksPerShard {
		now := time.Now()
		var oldest string
		var oldestUntil time.Time
		for k, u := range sh.until {
			if !now.Before(u) {
				delete(sh.until, k)
			} else if oldest == "" || u.Before(oldestUntil) {
				oldest, oldestUntil = k, u
			}
		}
		if len(sh.until) >= maxStrictMarksPerShard {
			delete(sh.until, oldest)
		}
	}
	sh.until[key] = until
}
