package httplimit

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// ResetState is one piece of limiter state that ResetClient forgot: a client's budget under one
// class, plan tier and endpoint (or the class's shared budget) and one limit. A plain value.
type ResetState struct {
	Class    string `json:"class"`     // the class whose limit it was
	PlanTier string `json:"plan_tier"` // the plan tier it was kept for
	Endpoint string `json:"endpoint"`  // the route pattern the budget is kept for; "*" when shared
	// Algorithm is the limit's algorithm, as state is kept per algorithm.
	Algorithm limiter.Algorithm `json:"algorithm"`
	// Live is "" for the configured limit, else the source of the live change whose state this
	// was, with " shadow" appended for a change in shadow.
	Live string `json:"live,omitempty"`
	// Penalty says this is the class's penalty box, lifted, not a budget; with Limit, the box of
	// that limit.
	Penalty bool `json:"penalty,omitempty"`
	// Limit names the limit of a tier of several limits (TierLimit.Name) the state was kept for.
	Limit string `json:"limit,omitempty"`
}

// ErrUnknownClass is returned, wrapped, by ResetClient for a class the policy does not have.
var ErrUnknownClass = errors.New("no such class")

// ResetClient forgets every budget the policy keeps for client (a key as the identity gives it,
// such as "user:42" or "ip:10.0.0.1", an address grouped as the middleware groups it) under
// every class (or only className), plan tier and endpoint, for the configured limit and any
// live change, so that its next requests find full quotas. It returns the states it forgot,
// sorted, budgets never used among them; a store failure stops it and is returned with the
// states forgotten so far. Safe for concurrent use.
func (m *Middleware) ResetClient(ctx context.Context, client, className string) ([]ResetState, error) {
	p := m.policy.Load()
	client = p.identity.clientKey(client)
	var classes []*class
	for _, c := range p.classes {
		if className == "" || c.name == className {
			classes = append(classes, c)
		}
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownClass, className)
	}
	type target struct {
		key string
		alg limiter.Algorithm
	}
	done := map[target]bool{}
	var out []ResetState
	var reset resetFunc = func(l *limiter.Limiter, key string, st ResetState) error {
		t := target{key, l.Limit().Algorithm}
		if done[t] {
			return nil
		}
		done[t] = true
		if err := l.Reset(ctx, key); err != nil {
			return fmt.Errorf("reset %s for class %s, tier %s, endpoint %s: %w", client, st.Class, st.PlanTier, st.Endpoint, err)
		}
		st.Algorithm = t.alg
		out = append(out, st)
		return nil
	}
	for _, c := range classes {
		if c.penalties != nil {
			if err := c.lift(ctx, client); err != nil {
				return sortResets(out), fmt.Errorf("lift the penalty of %s for class %s: %w", client, c.name, err)
			}
			out = append(out, ResetState{Class: c.name, Endpoint: "*", Penalty: true})
		}
		lifted, err := c.liftParts(ctx, p.tierNames, client)
		out = append(out, lifted...)
		if err != nil {
			return sortResets(out), err
		}
		for _, tier := range p.tierNames {
			if ts := c.setFor(tier); ts != nil {
				for _, pat := range c.routes {
					if err := ts.resetClient(route{pattern: pat, class: c}, tier, client, reset); err != nil {
						return sortResets(out), err
					}
				}
				continue
			}
			if c.limiterFor(tier) == nil {
				continue // leases in flight are given back as their requests end
			}
			for _, pat := range c.routes { // the default class's include CatchAll
				rt := route{pattern: pat, class: c}
				st := ResetState{Class: c.name, PlanTier: tier, Endpoint: rt.resetEndpoint()}
				var live *decision.LiveLimit
				var liveLim *limiter.Limiter
				if lv := c.live[tier]; lv != nil {
					live, liveLim = &lv.LiveLimit, lv.Limiter
				}
				if err := resetWithLive(reset, c.limiterFor(tier), rt.key(tier, client), st, live, liveLim); err != nil {
					return sortResets(out), err
				}
			}
		}
	}
	return sortResets(out), nil
}

func sortResets(rs []ResetState) []ResetState {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Class != b.Class {
			return a.Class < b.Class
		}
		if a.PlanTier != b.PlanTier {
			return a.PlanTier < b.PlanTier
		}
		if a.Endpoint != b.Endpoint {
			return a.Endpoint < b.Endpoint
		}
		if a.Limit != b.Limit {
			return a.Limit < b.Limit
		}
		if a.Live != b.Live {
			return a.Live < b.Live
		}
		return !a.Penalty && b.Penalty
	})
	return rs
}

// resetFunc forgets the budget of a limiter at a key, the state st names.
type resetFunc func(l *limiter.Limiter, key string, st ResetState) error

// resetWithLive forgets, with reset, the budget of l at key (st names it) and, when live is set,
// that of its live change (liveLim) beside it: at key, or key+ShadowSuffix in shadow.
func resetWithLive(reset resetFunc, l *limiter.Limiter, key string, st ResetState, live *decision.LiveLimit, liveLim *limiter.Limiter) error {
	if err := reset(l, key, st); err != nil || live == nil {
		return err
	}
	st.Live = live.Source
	if live.Shadow {
		st.Live, key = live.Source+" shadow", key+decision.ShadowSuffix
	}
	return reset(liveLim, key, st)
}

// resetEndpoint is the endpoint a ResetState names for rt: its pattern, "*" for a shared class.
func (rt route) resetEndpoint() string {
	if rt.class.shared {
		return "*"
	}
	return rt.pattern
}

// resetClient forgets, with reset, client's own budgets of ts's limits on rt and tier: those
// scoped by the client (an organisation's or the class's budget is not one client's), with any
// live change's beside the file's.
func (ts *tierSet) resetClient(rt route, tier, client string, reset resetFunc) error {
	key := rt.key(tier, client)
	for i, part := range ts.parts {
		if part.scope.Kind != ScopeClient {
			continue
		}
		var live *decision.LiveLimit
		var liveLim *limiter.Limiter
		if ts.live != nil && ts.live[i] != nil {
			live, liveLim = &ts.live[i].LiveLimit, ts.live[i].lim
		}
		st := ResetState{Class: rt.class.name, PlanTier: tier, Endpoint: rt.resetEndpoint(), Limit: part.name}
		if err := resetWithLive(reset, part.lim, key+"|"+part.name, st, live, liveLim); err != nil {
			return err
		}
	}
	return nil
}

// liftParts takes client out of the boxes of the limits of c's tiers that have their own.
func (c *class) liftParts(ctx context.Context, tiers []string, client string) ([]ResetState, error) {
	var out []ResetState
	seen := map[string]bool{}
	for _, tier := range tiers {
		ts := c.setFor(tier)
		if ts == nil {
			continue
		}
		for _, part := range ts.parts {
			if part.box == nil || seen[part.name] {
				continue
			}
			seen[part.name] = true
			if err := part.box.penalties.Lift(ctx, c.partPenaltyKey(part.name, client), part.box.timeout); err != nil {
				return out, fmt.Errorf("lift the penalty of %s for class %s limit %s: %w", client, c.name, part.name, err)
			}
			out = append(out, ResetState{Class: c.name, Endpoint: "*", Penalty: true, Limit: part.name})
		}
	}
	return out, nil
}
