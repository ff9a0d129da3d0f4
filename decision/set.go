package decision

import (
	"context"
	"fmt"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// SetPart is one limit of an Ask of several (Ask.Set): its name (in RateLimit-Policy, refused_by
// and usage), the key it counts on and the cost it takes. A plain value.
type SetPart struct {
	Name string
	Key  string
	Cost int64
	// Held, in a limiter.ModeReserve ask, holds the part's Cost, an estimate, in a reservation
	// settled at the real cost (SettleSet): a limit of cost beside limits of requests, which
	// keep their 1. Read in that mode only.
	Held bool
}

// SetAsk is the several limits of one request, decided as one: Set's Limiters, with Parts in
// their order, admit the request only together and a refusal takes from none. ShadowSet and
// ShadowParts, when set, are limits whose refusal refuses nothing: decided after Set admits
// (consume or reserve), as one too, their refusal makes the verdict VerdictShadowLimitOver. In
// limiter.ModeReserve the Held parts' costs are reservations, opened with the take
// (limiter.Set.Reserve). A plain value; the Sets are safe for concurrent use.
type SetAsk struct {
	Set         *limiter.Set
	Parts       []SetPart
	ShadowSet   *limiter.Set
	ShadowParts []SetPart
	// Lease, when set, is a concurrency limit among the several: a consume takes a lease on it
	// first (Outcome.Lease, Outcome.Leased) and takes from Set only when it is granted; a lease
	// it refuses leaves Set undecided, and a Set that refuses gives the lease back at once. A
	// peek looks at Set alone: a lease cannot be peeked without being taken.
	Lease *SetLease
}

// SetLease is the concurrency limit of an Ask of several (SetAsk.Lease): its name, the key its
// leases are held on and its Leases. A plain value; Leases is safe for concurrent use.
type SetLease struct {
	Name   string
	Key    string
	Leases *limiter.Leases
}

// PartOutcome is one limit's answer within an Outcome of several (Outcome.Parts). A plain value.
type PartOutcome struct {
	Name     string
	Key      string
	Limit    limiter.Limit
	Decision limiter.Decision
	Shadow   bool // a shadow limit: its refusal refused nothing
	// Reservation is what a limiter.ModeReserve ask opened on a Held part (ID "" otherwise):
	// settled on Limiter, the part's, by SettleSet.
	Reservation limiter.Reservation
	Limiter     *limiter.Limiter
}

// decideSet is Decide of a.Set.
func (o *Outcome) decideSet(ctx context.Context, a Ask) {
	s := a.Set
	o.Parts = make([]PartOutcome, len(s.Parts), len(s.Parts)+len(s.ShadowParts))
	for i, p := range s.Parts {
		l := s.Set.Limiter(i)
		o.Parts[i] = PartOutcome{Name: p.Name, Key: p.Key, Limit: l.Limit(), Limiter: l}
	}
	if o.refuseCosts(a.Shadow) {
		return
	}
	if s.Lease != nil && a.Mode != limiter.ModePeek {
		if !o.acquireSetLease(ctx, a) {
			return
		}
		defer o.giveBackRefused(ctx)
	}
	out, res, ok, err := decideParts(ctx, s.Set, a.Mode, s.Parts)
	for i := range s.Parts {
		o.Parts[i].Decision, o.Parts[i].Reservation = out[i], res[i]
		if o.Reservation.ID == "" {
			o.Reservation = res[i] // the request's estimate, once, for the cost metrics
		}
	}
	at := speaker(o.Parts, ok)
	if !ok && err == nil {
		for _, p := range o.Parts {
			if !p.Decision.Allowed {
				o.RefusedBy = append(o.RefusedBy, p.Name)
			}
		}
	}
	o.judge(o.Parts[at].Decision, err, o.Parts[at].Limit, a.Shadow)
	o.Speaker = o.Parts[at].Name
	if o.Verdict != VerdictAllowed {
		o.Reservation = limiter.Reservation{} // the fail policy's pass holds none
	}
	if o.Verdict != VerdictAllowed || s.ShadowSet == nil || (a.Mode != limiter.ModeConsume && a.Mode != limiter.ModeReserve) {
		return
	}
	out, res, sok, serr := decideParts(ctx, s.ShadowSet, a.Mode, s.ShadowParts)
	for i, p := range s.ShadowSet.Limiters() {
		o.Parts = append(o.Parts, PartOutcome{Name: s.ShadowParts[i].Name, Key: s.ShadowParts[i].Key,
			Limit: p.Limit(), Decision: out[i], Shadow: true, Reservation: res[i], Limiter: p})
		if o.Reservation.ID == "" {
			o.Reservation = res[i] // only shadow limits hold the cost: they are settled all the same
		}
	}
	if !sok && serr == nil {
		o.Verdict = VerdictShadowLimitOver
	}
}

// acquireSetLease takes the lease of a.Set.Lease, reporting whether the rate limits are to be
// decided: when the lease is refused (or the store failed, or the caller went away), o is its
// answer, naming the lease in RefusedBy when it refused.
func (o *Outcome) acquireSetLease(ctx context.Context, a Ask) bool {
	sl := a.Set.Lease
	lease, ld, err := sl.Leases.Acquire(ctx, sl.Key)
	d := limiter.Decision{Allowed: ld.Allowed, Limit: ld.Limit, Remaining: ld.Remaining(), RetryAfter: ld.RetryAfter, Failure: ld.Failure}
	o.Lease, o.Leased = lease, ld
	if ld.Allowed {
		return true
	}
	o.judge(d, err, limiter.Limit{Algorithm: limiter.Concurrency, Rate: ld.Limit}, a.Shadow)
	o.Speaker = sl.Name
	if err == nil && ld.Failure == limiter.FailureNone {
		o.RefusedBy = []string{sl.Name}
	}
	return false
}

// giveBackRefused releases the lease of a request its rate limits did not let pass (refused,
// failed closed, the caller gone): it holds nothing afterwards. The store's answer is not
// waited on by anyone: a lease it fails to drop expires at its TTL.
func (o *Outcome) giveBackRefused(ctx context.Context) {
	if o.Lease.ID == "" || (!o.Verdict.Refuses() && !o.Verdict.Drops()) {
		return
	}
	if n, err := o.Set.Lease.Leases.Release(context.WithoutCancel(ctx), o.Lease); err == nil {
		o.Leased.Expired += n
	}
	o.Lease = limiter.Lease{}
}

// refuseCosts refuses, taking nothing, a request whose cost some limit's window cannot admit:
// refused by those limits, as a single limit refuses it (judge).
func (o *Outcome) refuseCosts(shadow bool) bool {
	at := -1
	var cerr error
	for i := range o.Parts {
		p := &o.Parts[i]
		err := p.Limit.CheckCost(o.Set.Parts[i].Cost)
		if err == nil {
			continue
		}
		p.Decision = limiter.Decision{Limit: p.Limit.Quota(), RetryAfter: p.Limit.Window()}
		o.RefusedBy = append(o.RefusedBy, p.Name)
		if at < 0 || p.Limit.Window() > o.Parts[at].Limit.Window() {
			at, cerr = i, fmt.Errorf("limit %s: %w", p.Name, err)
		}
	}
	if at < 0 {
		return false
	}
	o.judge(o.Parts[at].Decision, cerr, o.Parts[at].Limit, shadow)
	o.Speaker = o.Parts[at].Name
	return true
}

// decideParts decides parts on set in mode: in limiter.ModeReserve it holds the Held parts'
// costs in reservations (res, by part; all "" otherwise).
func decideParts(ctx context.Context, set *limiter.Set, mode limiter.Mode, parts []SetPart) (out []limiter.Decision, res []limiter.Reservation, ok bool, err error) {
	keys, costs := make([]string, len(parts)), make([]int64, len(parts))
	held := make([]bool, len(parts))
	for i, p := range parts {
		keys[i], costs[i], held[i] = p.Key, p.Cost, p.Held
	}
	out, res = make([]limiter.Decision, len(parts)), make([]limiter.Reservation, len(parts))
	if mode == limiter.ModeReserve {
		ok, err = set.Reserve(ctx, keys, costs, held, out, res)
	} else {
		ok, err = set.Decide(ctx, mode, keys, costs, out)
	}
	return out, res, ok, err
}

// speaker is the part an answer of several speaks for: when refused, the refusing part that
// admits last (the longest RetryAfter); when admitted, the part with the least Remaining ÷
// quota, the first on a tie.
func speaker(parts []PartOutcome, allowed bool) int {
	at := 0
	if !allowed {
		at = -1
		for i, p := range parts {
			if !p.Decision.Allowed && (at < 0 || p.Decision.RetryAfter > parts[at].Decision.RetryAfter) {
				at = i
			}
		}
		return max(at, 0)
	}
	share := func(p PartOutcome) float64 {
		q := p.Decision.Limit
		if q <= 0 {
			q = p.Limit.Quota()
		}
		if q <= 0 {
			return 1
		}
		return float64(p.Decision.Remaining) / float64(q)
	}
	for i := 1; i < len(parts); i++ {
		if share(parts[i]) < share(parts[at]) {
			at = i
		}
	}
	return at
}
