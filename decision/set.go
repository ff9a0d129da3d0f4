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
}

// SetAsk is the several limits of one request, decided as one: Set's Limiters, with Parts in
// their order, admit the request only together and a refusal takes from none. ShadowSet and
// ShadowParts, when set, are limits whose refusal refuses nothing: decided after Set admits
// (consume only), as one too, their refusal makes the verdict VerdictShadowLimitOver. A plain
// value; the Sets are safe for concurrent use.
type SetAsk struct {
	Set         *limiter.Set
	Parts       []SetPart
	ShadowSet   *limiter.Set
	ShadowParts []SetPart
}

// PartOutcome is one limit's answer within an Outcome of several (Outcome.Parts). A plain value.
type PartOutcome struct {
	Name     string
	Key      string
	Limit    limiter.Limit
	Decision limiter.Decision
	Shadow   bool // a shadow limit: its refusal refused nothing
}

// decideSet is Decide of a.Set.
func (o *Outcome) decideSet(ctx context.Context, a Ask) {
	s := a.Set
	lims := s.Set.Limiters()
	o.Parts = make([]PartOutcome, len(s.Parts), len(s.Parts)+len(s.ShadowParts))
	for i, p := range s.Parts {
		o.Parts[i] = PartOutcome{Name: p.Name, Key: p.Key, Limit: lims[i].Limit()}
	}
	if o.refuseCosts(a.Shadow) {
		return
	}
	keys, costs, out := partArgs(s.Parts)
	ok, err := s.Set.Decide(ctx, a.Mode, keys, costs, out)
	for i := range s.Parts {
		o.Parts[i].Decision = out[i]
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
	if o.Verdict != VerdictAllowed || s.ShadowSet == nil || a.Mode != limiter.ModeConsume {
		return
	}
	keys, costs, out = partArgs(s.ShadowParts)
	sok, serr := s.ShadowSet.Decide(ctx, limiter.ModeConsume, keys, costs, out)
	for i, p := range s.ShadowSet.Limiters() {
		o.Parts = append(o.Parts, PartOutcome{Name: s.ShadowParts[i].Name, Key: s.ShadowParts[i].Key,
			Limit: p.Limit(), Decision: out[i], Shadow: true})
	}
	if !sok && serr == nil {
		o.Verdict = VerdictShadowLimitOver
	}
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

// partArgs are the keys, costs and answers of a set's decision on parts.
func partArgs(parts []SetPart) ([]string, []int64, []limiter.Decision) {
	keys, costs := make([]string, len(parts)), make([]int64, len(parts))
	for i, p := range parts {
		keys[i], costs[i] = p.Key, p.Cost
	}
	return keys, costs, make([]limiter.Decision, len(parts))
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
