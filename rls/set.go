package rls

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// checkSetStore returns why engine's store cannot decide a call's descriptors as one.
func checkSetStore(engine limiter.Config) error {
	engine.Limit = limiter.PerMinute(limiter.FixedWindow, 1)
	l, err := limiter.New(engine)
	if err != nil {
		return fmt.Errorf("rls: all_or_nothing: %w", err)
	}
	if _, err := limiter.NewSet(l); err != nil {
		return fmt.Errorf("rls: all_or_nothing: %w", err)
	}
	return nil
}

// callSet is the store parts of one call's set: the descriptors deciding in it, merged by store
// key (two descriptors on one key count on one state, their costs summed).
type callSet struct {
	keys  []string
	lims  []*limiter.Limiter
	costs []int64
	quota []bool // the part's descriptors are quota_mode ones
	live  []bool // still asked: a quota found over leaves the set
	part  []int  // by descriptor: its part, -1 when not in the set
	asks  []decision.Ask
	sets  *setCache // the Sets kept for the rules in force; nil for a call carrying limits
}

// add puts descriptor i's ask in the set and reports whether it could: not when its key's
// part is another limiter's or their summed cost is more than any window admits.
func (cs *callSet) add(i int, a decision.Ask, quota bool) bool {
	for p, k := range cs.keys {
		if k != a.Key {
			continue
		}
		if cs.lims[p] != a.Limiter || cs.quota[p] != quota || a.Limiter.Limit().CheckCost(cs.costs[p]+a.Cost) != nil {
			return false
		}
		cs.costs[p] += a.Cost
		cs.part[i], cs.asks[i] = p, a
		return true
	}
	cs.keys, cs.lims, cs.costs = append(cs.keys, a.Key), append(cs.lims, a.Limiter), append(cs.costs, a.Cost)
	cs.quota, cs.live = append(cs.quota, quota), append(cs.live, true)
	cs.part[i], cs.asks[i] = len(cs.keys)-1, a
	return true
}

// decideAll decides the call's descriptors as one (Config.AllOrNothing), writing outs[i] for
// every descriptor rules[i] limits. The store parts of the set are the descriptors of limited,
// enforced rules at their own hits_addend; the call is admitted, taking every part's cost, only
// when each part admits, and a refused call takes from none. Inside it each rule keeps its
// envoyproxy/ratelimit meaning:
//
//   - no matching rule, unlimited, replaced: OK, no part of the set (rules[i] nil).
//   - shadow_mode: decided after the set on its own, as a shadow rule is (its refusal refuses
//     nothing), taking its cost when the call was admitted and only peeking when it was not.
//   - quota_mode: a part while it admits; one found over leaves the set (its OVER_LIMIT is its
//     status) and the rest is decided again, so that the call passes while one quota admits
//     and takes from the quotas that admit; with every quota over the call is refused.
//   - requests_per_unit 0, hits_addend 0 (a peek: takes nothing), charge_on_stream_done (the
//     cost of a request already served, taken whatever the answer), a cost no window admits:
//     decided on their own before the set, as by default; one of them refusing refuses the
//     call, the set then only peeked.
//
// The descriptors of a refused call that would admit alone answer OK with their standing
// (limit_remaining as it is, nothing taken) and are neither recorded nor charged: the refusal
// is recorded by the descriptors that refused. Limits of the call on one store key are one
// part, at the sum of their costs.
func (s *Service) decideAll(ctx context.Context, c *compiled, req *rlsv3.RateLimitRequest, rules []*rule, lims []*limiter.Limiter, outs []outcome) {
	descs := req.GetDescriptors()
	n := len(descs)
	cs := callSet{part: make([]int, n), asks: make([]decision.Ask, n)}
	cs.sets = &c.sets
	for _, d := range descs {
		if d.GetLimit() != nil {
			// A limit the call carries is compiled anew once its LRU drops it (or at once, on a
			// long path): a combination holding it would be kept for nothing.
			cs.sets = nil
			break
		}
	}
	refused := false             // a descriptor of no quota_mode refused
	quotas, quotasPassed := 0, 0 // quota_mode descriptors, and those not over, outside the set
	for i, d := range descs {
		cs.part[i] = -1
		r := rules[i]
		if r == nil {
			continue
		}
		if r.quota {
			quotas++
		}
		if r.shadow {
			if r.quota {
				quotasPassed++ // a shadow refusal is no refusal
			}
			continue
		}
		if !peeks(d) && !r.blocked && !r.charge {
			a, o := s.ask(c, lims[i], r, req, d)
			if a.Limiter.Limit().CheckCost(a.Cost) == nil && cs.add(i, a, r.quota) {
				outs[i] = o
				continue
			}
		}
		outs[i] = s.decide(ctx, c, lims[i], r, req, d, false)
		switch {
		case !outs[i].Verdict.Refuses() && r.quota:
			quotasPassed++
		case outs[i].Verdict.Refuses() && !r.quota:
			refused = true
		}
	}
	if len(cs.keys) > 0 {
		refused = s.decideSet(ctx, c, &cs, rules, outs, refused, quotas, quotasPassed)
	} else if quotas > 0 && quotasPassed == 0 {
		refused = true
	}
	for i, d := range descs {
		if r := rules[i]; r != nil && r.shadow {
			outs[i] = s.decide(ctx, c, lims[i], r, req, d, refused)
		}
	}
}

// decideSet decides cs's parts, consuming unless the call is already refused, and writes each
// member descriptor's outcome to outs; it reports whether the call is refused. A quota part
// found over leaves the set, and the set is decided again: at most one call per quota part more.
func (s *Service) decideSet(ctx context.Context, c *compiled, cs *callSet, rules []*rule, outs []outcome, refused bool, quotas, quotasPassed int) bool {
	var ends []func(limiter.Status, limiter.Decision, error)
	if s.cfg.Trace != nil {
		ends = make([]func(limiter.Status, limiter.Decision, error), len(outs))
		for i, p := range cs.part {
			if p >= 0 {
				_, ends[i] = s.cfg.Trace.Start(ctx, cs.asks[i], cs.lims[p].Limit())
			}
		}
	}
	if quotas > 0 && quotasPassed == 0 && !cs.quotaLeft() {
		refused = true // every quota of the call is over already
	}
	answers := make([]limiter.Decision, len(cs.keys))
	final := make([]bool, len(cs.keys)) // the part's answer is its own refusal, recorded
	errs := make([]error, len(cs.keys))
	admitted := false
	for {
		var idx []int
		for p, live := range cs.live {
			if live {
				idx = append(idx, p)
			}
		}
		if len(idx) == 0 {
			admitted = !refused // only quotas were parts, each over, and another passed
			break
		}
		keys, costs, lims := make([]string, len(idx)), make([]int64, len(idx)), make([]*limiter.Limiter, len(idx))
		for j, p := range idx {
			keys[j], costs[j], lims[j] = cs.keys[p], cs.costs[p], cs.lims[p]
		}
		mode := limiter.ModeConsume
		if refused {
			mode = limiter.ModePeek
		}
		out := make([]limiter.Decision, len(idx))
		ok, err := decideParts(ctx, cs.sets, mode, lims, keys, costs, out)
		for j, p := range idx {
			answers[p], errs[p] = out[j], nil
			if out[j].Failure != limiter.FailureNone || errors.Is(err, context.Canceled) {
				errs[p] = err
			}
		}
		if refused || ok {
			admitted = ok && !refused
			break
		}
		if !cs.dropOverQuotas(idx, out, final) {
			refused = true
			break
		}
		if !cs.quotaLeft() && quotasPassed == 0 {
			refused = true // every quota of the call is over
			break
		}
	}
	s.judgeSet(ctx, cs, answers, errs, final, admitted, ends, outs)
	return refused
}

// judgeSet writes each set member's outcome from its part's answer, records those that count
// (taken, or refusing) and ends their spans.
func (s *Service) judgeSet(ctx context.Context, cs *callSet, answers []limiter.Decision, errs []error, final []bool, admitted bool,
	ends []func(limiter.Status, limiter.Decision, error), outs []outcome) {
	for i, p := range cs.part {
		if p < 0 {
			continue
		}
		a, o := cs.asks[i], &outs[i]
		d := answers[p]
		if admitted && cs.live[p] {
			d.Admitted = a.Cost
		} else {
			d.Admitted = 0
		}
		o.Outcome = decision.Judge(d, errs[p], cs.lims[p].Limit(), false)
		o.Ask = a
		if admitted && cs.live[p] && a.LiveShadow != nil {
			// As decision.Decide: a live change in shadow is asked once the limit admitted.
			if sd, serr := a.LiveShadow.AllowN(ctx, a.Key+decision.ShadowSuffix, a.Cost); serr == nil && !sd.Allowed {
				o.Verdict = decision.VerdictLiveShadowOver
			}
		}
		if ends != nil {
			o.EndTrace(ends[i])
		}
		if (admitted && cs.live[p]) || final[p] || o.Verdict.Refuses() {
			s.rep.Record(ctx, &o.Outcome)
		}
		if o.Err != nil {
			s.logFailure(ctx, *o, a.Cost)
		}
	}
}

// dropOverQuotas takes the quota parts over their limit out of a set refused on consume (out
// are the answers of the parts idx), marking their answers final, and reports whether only
// quotas refused; when a part of no quota_mode refused it marks the refusals final and drops
// nothing.
func (cs *callSet) dropOverQuotas(idx []int, out []limiter.Decision, final []bool) bool {
	for j, p := range idx {
		if !out[j].Allowed && !cs.quota[p] {
			for j, p := range idx {
				final[p] = !out[j].Allowed
			}
			return false
		}
	}
	for j, p := range idx {
		if !out[j].Allowed {
			cs.live[p], final[p] = false, true
		}
	}
	return true
}

// quotaLeft reports a quota part still in the set.
func (cs *callSet) quotaLeft() bool {
	for p, q := range cs.quota {
		if q && cs.live[p] {
			return true
		}
	}
	return false
}

// decideParts decides the parts as one set of lims, the Set sets keeps for them (nil: a Set
// built for the call).
func decideParts(ctx context.Context, sets *setCache, mode limiter.Mode, lims []*limiter.Limiter, keys []string, costs []int64, out []limiter.Decision) (bool, error) {
	set, err := sets.of(lims)
	if err == nil {
		return set.Decide(ctx, mode, keys, costs, out)
	}
	// New checked the store; a live change on another store is the one way here.
	for j, l := range lims {
		out[j] = limiter.Decision{Limit: l.Limit().Quota(), RetryAfter: time.Second, Failure: limiter.FailureClosed}
	}
	return false, err
}

// Bounds of a setCache: a call deciding more parts than maxCachedSetParts builds its Set, as does
// a combination past maxCachedSets. Calls carrying limits of their own use none (decideAll).
const (
	maxCachedSetParts = 8
	maxCachedSets     = 1024
)

// setKey is a combination of Limiters in order, nil past its last.
type setKey [maxCachedSetParts]*limiter.Limiter

// setCache keeps the limiter.Set of each combination of Limiters all_or_nothing calls decide
// as one, so that a call builds none: a Set depends on its Limiters alone, which are immutable,
// and a compiled holds one cache, so that a Swap or SetLive, which compiles new Limiters,
// starts an empty one and lets the old Sets go with the old rules. Lookups take no lock: the
// map is replaced whole, under mu, to add a Set, which happens once per combination. Safe for
// concurrent use; the zero value is ready.
type setCache struct {
	mu   sync.Mutex
	sets atomic.Pointer[map[setKey]*limiter.Set]
}

// of returns the Set of lims, in their order: the one kept, else a new one, kept while the
// cache has room.
func (sc *setCache) of(lims []*limiter.Limiter) (*limiter.Set, error) {
	if sc == nil || len(lims) > maxCachedSetParts {
		return limiter.NewSet(lims...)
	}
	var k setKey
	copy(k[:], lims)
	if m := sc.sets.Load(); m != nil {
		if set, ok := (*m)[k]; ok {
			return set, nil
		}
		if len(*m) >= maxCachedSets {
			return limiter.NewSet(lims...) // full: no lock taken
		}
	}
	// A Set keeps the slice it is given: lims is the caller's to reuse.
	set, err := limiter.NewSet(slices.Clone(lims)...)
	if err != nil {
		return nil, err
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	old := sc.sets.Load()
	if old == nil {
		old = &map[setKey]*limiter.Set{}
	}
	if kept, ok := (*old)[k]; ok {
		return kept, nil // another call added it first
	}
	if len(*old) >= maxCachedSets {
		return set, nil
	}
	m := make(map[setKey]*limiter.Set, len(*old)+1)
	maps.Copy(m, *old)
	m[k] = set
	sc.sets.Store(&m)
	return set, nil
}
