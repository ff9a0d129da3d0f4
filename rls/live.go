package rls

import (
	"fmt"
	"math"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// liveLimiter is a compiled live change of one rule and plan tier.
type liveLimiter struct {
	*decision.Live
	rendered decision.RenderedLimit
	unit     string // with perUnit, the limit as Envoy shows it; "" for none of Envoy's units
	perUnit  uint32
}

// SetLive puts live changes in force, kept through Swap: live maps a rule's endpoint (as
// Rules.Limits lists it) and a plan tier to the change of that rule's limit for that tier.
// Entries naming no rule (HTTP classes), unlimited and blocked rules and the limits requests
// carry are left alone. On error the changes in force stay.
func (s *Service) SetLive(live map[string]map[string]decision.LiveLimit) error {
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	old := s.current.Load()
	compiledLive, err := s.compileLive(old.rules, live)
	if err != nil {
		return err
	}
	overrides, err := s.newOverrides()
	if err != nil {
		return err
	}
	s.live = live
	s.current.Store(&compiled{rules: old.rules, limiters: old.limiters, live: compiledLive, overrides: overrides})
	return nil
}

// compileLive compiles the live changes of rules' rules, by rule and tier; nil for none.
func (s *Service) compileLive(rules *Rules, live map[string]map[string]decision.LiveLimit) (map[*rule]map[string]*liveLimiter, error) {
	if len(live) == 0 {
		return nil, nil
	}
	out := map[*rule]map[string]*liveLimiter{}
	var err error
	for _, root := range rules.domains {
		walk(root, func(r *rule) {
			byTier := live[r.path]
			if err != nil || r.unlimited || r.blocked || len(byTier) == 0 {
				return
			}
			for tier, lv := range byTier {
				l, lerr := decision.NewLive(lv, s.cfg.Engine)
				if lerr != nil {
					err = fmt.Errorf("rls: %s tier %s: %w", r.path, tier, lerr)
					return
				}
				ll := &liveLimiter{Live: l, rendered: decision.RenderLimit(r.policyName(), lv.Limit),
					perUnit: uint32(min(max(lv.Limit.Rate, 0), math.MaxUint32))}
				for _, u := range units {
					if u.period == lv.Limit.Period {
						ll.unit = u.name
					}
				}
				if out[r] == nil {
					out[r] = map[string]*liveLimiter{}
				}
				out[r][tier] = ll
			}
		})
	}
	return out, err
}

// LiveLimit returns the limit a live change enforces on the rule of endpoint for tier, when it
// is enforced for some descriptors (not in shadow, rollout above 0), as the rate_limit_limit
// gauge shows it.
func (s *Service) LiveLimit(endpoint, tier string) (limiter.Limit, bool) {
	c := s.current.Load()
	for r, byTier := range c.live {
		if r.path != endpoint {
			continue
		}
		if lv := byTier[tier]; lv != nil && lv.Enforced() {
			return lv.Limit, true
		}
	}
	return limiter.Limit{}, false
}
