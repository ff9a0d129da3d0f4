package httplimit

import (
	"context"
	"fmt"
	"log/slog"

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
