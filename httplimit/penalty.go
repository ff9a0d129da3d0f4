package httplimit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

func (cl *class) compilePenalty(cfg PolicyConfig, c Class) error {
	if err := c.Penalty.Validate(); err != nil {
		return fmt.Errorf("policy: class %q: penalty: %w", c.Name, err)
	}
	if !c.Penalty.Enabled() {
		return nil
	}
	ps := cfg.Penalties
	if ps == nil {
		var err error
		if ps, err = limiter.PenaltiesOf(c.storeFor(cfg.DefaultTier, cfg.Store)); err != nil {
			return fmt.Errorf("policy: class %q: penalty: %w", c.Name, err)
		}
	}
	cl.penalty, cl.penalties, cl.timeout = c.Penalty, ps, cfg.Timeout
	if cl.timeout == 0 {
		cl.timeout = limiter.DefaultTimeout
	}
	return nil
}

// penaltyKey is client's key in c's penalty box: one box per class, whatever the endpoint.
func (c *class) penaltyKey(client string) string { return c.name + "|" + client }

// penalized returns the outcome of a, asked for client, while client is in c's box. A box that
// cannot be read boxes nobody: the limit still decides.
func (m *Middleware) penalized(ctx context.Context, c *class, client string, a decision.Ask) (decision.Outcome, bool) {
	left, err := c.penalties.Penalized(ctx, c.penaltyKey(client), c.timeout)
	if err != nil {
		m.logger.LogAttrs(ctx, slog.LevelDebug, "penalty box unreadable", slog.String("class", c.name), slog.String("error", err.Error()))
		return decision.Outcome{}, false
	}
	if left <= 0 {
		return decision.Outcome{}, false
	}
	lim := askLimit(a)
	return decision.Outcome{Ask: a, Verdict: decision.VerdictPenalized, Limit: lim,
		Decision: limiter.Decision{Limit: lim.Quota(), RetryAfter: left, ResetAfter: left}}, true
}

// strike counts a refusal of client in c's box.
func (m *Middleware) strike(ctx context.Context, c *class, client string) {
	if _, err := c.penalties.Strike(ctx, c.penaltyKey(client), c.penalty, c.timeout); err != nil {
		m.logger.LogAttrs(ctx, slog.LevelDebug, "penalty strike failed", slog.String("class", c.name), slog.String("error", err.Error()))
	}
}

// lift takes client out of c's box.
func (c *class) lift(ctx context.Context, client string) error {
	if c.penalties == nil {
		return nil
	}
	return c.penalties.Lift(ctx, c.penaltyKey(client), c.timeout)
}

// partBox is the penalty box of one of a tier's several limits (TierLimit.Penalty): it counts the
// refusals that limit makes of a client and, once tripped, refuses the client in its name. It
// overrides the class's box for that limit's refusals.
type partBox struct {
	penalty   limiter.Penalty
	penalties limiter.PenaltyStore
	timeout   time.Duration
}

// compilePenalty gives part the box of pen on tier's store; nil pen: none.
func (part *tierPart) compilePenalty(cfg PolicyConfig, c Class, tier string, pen *limiter.Penalty) error {
	if pen == nil || !pen.Enabled() {
		return nil
	}
	if err := pen.Validate(); err != nil {
		return fmt.Errorf("penalty: %w", err)
	}
	ps := cfg.Penalties
	if ps == nil {
		var err error
		if ps, err = limiter.PenaltiesOf(c.storeFor(tier, cfg.Store)); err != nil {
			return fmt.Errorf("penalty: %w", err)
		}
	}
	part.box = &partBox{penalty: *pen, penalties: ps, timeout: cfg.Timeout}
	if part.box.timeout == 0 {
		part.box.timeout = limiter.DefaultTimeout
	}
	return nil
}

// partPenaltyKey is client's key in the box of c's limit name.
func (c *class) partPenaltyKey(name, client string) string { return c.name + "|" + name + "|" + client }

// partPenalized returns the outcome of a, asked for client, while one of the boxes of ts's
// enforced limits holds client: refused in that limit's name. A box that cannot be read boxes
// nobody.
func (m *Middleware) partPenalized(ctx context.Context, c *class, ts *tierSet, client string, a decision.Ask) (decision.Outcome, bool) {
	for _, p := range ts.parts[:ts.enforced] {
		if p.box == nil {
			continue
		}
		left, err := p.box.penalties.Penalized(ctx, c.partPenaltyKey(p.name, client), p.box.timeout)
		if err != nil {
			m.logger.LogAttrs(ctx, slog.LevelDebug, "penalty box unreadable", slog.String("class", c.name), slog.String("limit", p.name), slog.String("error", err.Error()))
			continue
		}
		if left > 0 {
			lim := p.lim.Limit()
			return decision.Outcome{Ask: a, Verdict: decision.VerdictPenalized, Limit: lim, Speaker: p.name, RefusedBy: []string{p.name},
				Decision: limiter.Decision{Limit: lim.Quota(), RetryAfter: left, ResetAfter: left}}, true
		}
	}
	return decision.Outcome{}, false
}

// strikeRefusers counts o's refusal of client: in the box of each refusing limit that has its
// own, and in c's box when some refusing limit has none (or o is not of several limits).
func (m *Middleware) strikeRefusers(ctx context.Context, c *class, o *outcome, client string) {
	classToo := o.set == nil || !o.set.boxed
	if !classToo {
		for _, name := range o.RefusedBy {
			p := o.set.parts[o.set.partIndex(name)]
			if p.box == nil {
				classToo = true
				continue
			}
			if _, err := p.box.penalties.Strike(ctx, c.partPenaltyKey(name, client), p.box.penalty, p.box.timeout); err != nil {
				m.logger.LogAttrs(ctx, slog.LevelDebug, "penalty strike failed", slog.String("class", c.name), slog.String("limit", name), slog.String("error", err.Error()))
			}
		}
	}
	if classToo && c.penalties != nil {
		m.strike(ctx, c, client)
	}
}
