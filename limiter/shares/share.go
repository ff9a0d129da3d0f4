package shares

import (
	"context"
	"math"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// share is one limit and key's local share: the chunk in use, the demand that sizes the next,
// and the shared store's last refusal. Guarded by its shard's mutex.
type share struct {
	chunk
	// until is when the chunk stops being used: spans Intervals after it was taken, or the end
	// of the fixed window it was taken from.
	until time.Time
	// base is the shared store's answer to the last reservation, at: Remaining and ResetAfter
	// of the local decisions are counted from it.
	base limiter.Decision
	at   time.Time
	// recheck is, after a refusal, when the shared store is asked again: its RetryAfter, but
	// no later than one Interval, since other replicas give units back.
	recheck time.Time
	// demand is the units asked since the last sweep; last, in the interval before it.
	demand, last int64
	// asked is the units asked over the last spanned sweeps, since the last refill: a slow
	// key's rate, halved with spanned so that it stays recent.
	asked, spanned int64
	// idle is the sweeps in a row that found no demand.
	idle int64
	// spans is the chunk's life in intervals: 1 for a busy key's, up to slowSpans for a slow one.
	spans int64
	// filling is closed when the reservation in flight is answered; nil when none is.
	filling chan struct{}
}

// chunk is a reservation taken from the shared store: taken units, used of them.
type chunk struct {
	id          string
	taken, used int64
}

// detach returns the chunk and leaves the share without one.
func (e *share) detach() chunk {
	c := e.chunk
	e.chunk = chunk{}
	return c
}

// take hands out cost units of the chunk, if it is still in use and holds them.
func (e *share) take(now time.Time, cost, quota int64) (limiter.Decision, bool) {
	if e.id == "" || !now.Before(e.until) || e.taken-e.used < cost {
		return limiter.Decision{}, false
	}
	e.used += cost
	return limiter.Decision{
		Allowed: true, Limit: quota, Admitted: cost,
		// What the shared store had left after the chunk, and what is left of the chunk:
		// other replicas may have taken some since.
		Remaining:  e.base.Remaining + e.taken - e.used,
		ResetAfter: max(e.base.ResetAfter-now.Sub(e.at), 0),
	}, true
}

// refusal is the shared store's last refusal, as of now.
func (e *share) refusal(now time.Time, quota int64) limiter.Decision {
	since := now.Sub(e.at)
	return limiter.Decision{
		Limit: quota, Remaining: e.base.Remaining,
		ResetAfter: max(e.base.ResetAfter-since, 0),
		RetryAfter: max(e.base.RetryAfter-since, e.recheck.Sub(now), 0),
	}
}

// coldDemand is the demand below which a key is decided on the shared store alone: a chunk
// would cost a reservation and a give-back for fewer decisions than that.
const coldDemand = 4

// slowSpans is the most intervals a slow key's chunk lasts, and slowTarget the units it aims
// to hold: a key asking about one unit an interval (10,000 keys at 100,000 decisions/s) would
// otherwise be cold forever and cost a round trip a decision. A longer life strands no more
// than before: the chunk is the key's own demand over it, at most MaxFraction of the quota.
const (
	slowSpans  = 10
	slowTarget = 16
)

// plan sizes the next chunk of a share whose caller asks cost: size units lasting spans
// intervals, or ok false when the key asks too little to be worth one. Before a whole interval
// of the key was seen, or when it asks slowTarget units an interval, a key that asked
// coldDemand units in the last interval or this one takes chunkSize for one interval. Else its
// rate since its last refill decides: a chunk of that rate for as many intervals as make
// slowTarget units (at most slowSpans), when that is at least coldDemand.
func (e *share) plan(cost, maxChunk int64) (size, spans int64, ok bool) {
	if e.spanned == 0 || max(e.last, e.demand) >= slowTarget {
		if e.last >= coldDemand || e.demand >= coldDemand {
			return chunkSize(e.last, e.demand, cost, maxChunk), 1, true
		}
		return 0, 0, false
	}
	// Units an interval, the current one counted whole: a rare key's first asks would
	// otherwise look twice as frequent as they are.
	rate := max(float64(e.asked)/float64(e.spanned+1), float64(e.last))
	spans = min(int64(math.Ceil(slowTarget/rate)), slowSpans)
	if rate*float64(spans) < coldDemand {
		return 0, 0, false
	}
	size = min(max(int64(math.Ceil(rate*float64(spans))), cost), maxChunk)
	// A chunk cut to maxChunk is used up sooner: its life is what its size lasts.
	return size, max(min(spans, int64(math.Ceil(float64(size)/rate))), 1), true
}

// plain decides cost units of k on the shared store, as if there were no shares.
func (s *Store) plain(ctx context.Context, k shareKey, cost int64, timeout time.Duration) (limiter.Decision, error) {
	s.stats.plain.Add(1)
	if in, ok := s.inner.(limiter.Inspector); ok {
		return in.DecideMode(ctx, k.key, k.lim, cost, limiter.ModeConsume, timeout)
	}
	return s.inner.Decide(ctx, k.key, k.lim, cost)
}

// chunkSize is the next chunk of a share whose caller asks cost: the demand of the last
// interval, or twice this one's so far when that is more (a rising demand doubles the chunk
// each refill), at most maxChunk, at least cost.
func chunkSize(last, demand, cost, maxChunk int64) int64 {
	return max(min(max(last, 2*demand), maxChunk), cost)
}

// MaxChunk is the largest chunk a Store of fraction (Config.MaxFraction) reserves of lim for
// a cost of 1: fraction of the quota, at least 1.
func MaxChunk(lim limiter.Limit, fraction float64) int64 {
	return max(int64(float64(lim.Quota())*fraction), 1)
}

// maxChunk is MaxChunk of the Store's fraction.
func (s *Store) maxChunk(lim limiter.Limit) int64 { return MaxChunk(lim, s.fraction) }

// consume decides cost units of k from its share: locally while the chunk holds them, else
// after reserving the next chunk, once for all the callers that wait on it.
func (s *Store) consume(ctx context.Context, k shareKey, cost int64, timeout time.Duration) (limiter.Decision, error) {
	quota := k.lim.Quota()
	sh := s.shardOf(k.key)
	counted := false
	sh.mu.Lock()
	for {
		e := sh.m[k]
		if e == nil {
			e = &share{}
			sh.m[k] = e
		}
		if !counted {
			e.demand += cost
			e.asked += cost
			counted = true
		}
		now := s.now()
		if d, ok := e.take(now, cost, quota); ok {
			sh.mu.Unlock()
			return d, nil
		}
		if now.Before(e.recheck) {
			d := e.refusal(now, quota)
			sh.mu.Unlock()
			return d, nil
		}
		if w := e.filling; w != nil {
			sh.mu.Unlock()
			select {
			case <-w:
			case <-ctx.Done():
				return limiter.Decision{Limit: quota}, ctx.Err()
			}
			sh.mu.Lock()
			continue
		}
		size, spans, ok := e.plan(cost, s.maxChunk(k.lim))
		if !ok {
			old := e.detach()
			sh.mu.Unlock()
			s.giveBack(k, old)
			return s.plain(ctx, k, cost, timeout)
		}
		w := make(chan struct{})
		e.filling = w
		// The new chunk's demand starts with this caller's.
		e.asked, e.spanned = cost, 0
		old := e.detach()
		sh.mu.Unlock()
		return s.refill(ctx, sh, e, k, old, size, spans, cost, timeout)
	}
}

// refill gives old back, reserves a chunk of size (or, refused, of what the shared store has
// left, when that covers cost) to last spans intervals, installs it in e and takes cost of it.
func (s *Store) refill(ctx context.Context, sh *shard, e *share, k shareKey, old chunk, size, spans, cost int64, timeout time.Duration) (limiter.Decision, error) {
	// Not waited for: the give-back and the reservation go out in one batch, in order, as a
	// rule; a reservation that misses the rest given back is refused and retried smaller.
	s.giveBack(k, old)
	before := s.now() // the store's ResetAfter counts from no earlier than this
	id, d, err := s.reserve(ctx, k, size, timeout)
	if err == nil && !d.Allowed && d.Remaining >= cost && d.Remaining < size {
		size = d.Remaining
		id, d, err = s.reserve(ctx, k, size, timeout)
	}
	quota := k.lim.Quota()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	close(e.filling)
	e.filling = nil
	if err != nil {
		return limiter.Decision{Limit: quota}, err
	}
	e.base, e.at = d, before
	if !d.Allowed {
		e.recheck = before.Add(min(d.RetryAfter, s.interval))
		return e.refusal(before, quota), nil
	}
	s.stats.taken.Add(size)
	e.chunk = chunk{id: id, taken: size}
	e.spans = spans
	life := time.Duration(spans) * s.interval
	if k.lim.Algorithm == limiter.FixedWindow {
		life = min(life, d.ResetAfter)
	}
	e.until = before.Add(life)
	e.used = cost
	if s.closed.Load() {
		// Close may have drained this share before the reservation was answered.
		s.giveBack(k, e.detach())
	}
	return limiter.Decision{
		Allowed: true, Limit: quota, Admitted: cost,
		Remaining: d.Remaining + size - cost, ResetAfter: d.ResetAfter,
	}, nil
}

// reserve takes a chunk of size units of k from the shared store.
func (s *Store) reserve(ctx context.Context, k shareKey, size int64, timeout time.Duration) (string, limiter.Decision, error) {
	id, err := limiter.NewReservationID()
	if err != nil {
		return "", limiter.Decision{}, err
	}
	s.stats.reserves.Add(1)
	d, err := s.inner.Reserve(ctx, k.key, k.lim, limiter.ReserveRequest{
		ID: id, Estimate: size, Hold: s.hold, OnExpiry: limiter.ExpireCharge,
	}, timeout)
	return id, d, err
}
