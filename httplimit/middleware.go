package httplimit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Config configures a Middleware. Only Policy is required.
type Config struct {
	// Policy is the initial policy. Required.
	Policy *Policy
	// Recorder, when set, is told of every decision exactly once per request.
	Recorder limiter.Recorder
	// Logger receives one debug line per rejected request (never one per
	// allowed request) and errors. Default: discard.
	Logger *slog.Logger
	// Cost returns the cost of a request; default 1 for every request.
	Cost func(*http.Request) int64
	// OnPolicy, when set, is called with the initial policy and with every
	// policy passed to Swap, after it is in force — the hook through which
	// the collector learns the limits in force (Policy.Limits).
	OnPolicy func(*Policy)
	// Trace, when set, wraps every decision in a span (see TraceFunc).
	// Nil: no tracing, at no cost.
	Trace TraceFunc
	// Now is the clock used for X-RateLimit-Reset; default time.Now.
	Now func() time.Time
}

// Middleware enforces a Policy on HTTP requests. It is safe for concurrent
// use; Swap replaces the policy atomically, so every request sees exactly one
// policy, old or new.
type Middleware struct {
	policy   atomic.Pointer[Policy]
	recorder limiter.Recorder
	logger   *slog.Logger
	cost     func(*http.Request) int64
	onPolicy func(*Policy)
	trace    TraceFunc
	now      func() time.Time
}

// New returns a Middleware enforcing cfg.Policy.
func New(cfg Config) (*Middleware, error) {
	if cfg.Policy == nil {
		return nil, errors.New("httplimit: Policy is required")
	}
	m := &Middleware{recorder: cfg.Recorder, logger: cfg.Logger, cost: cfg.Cost, onPolicy: cfg.OnPolicy, now: cfg.Now, trace: cfg.Trace}
	if m.logger == nil {
		m.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.Swap(cfg.Policy)
	return m, nil
}

// Policy returns the policy in force.
func (m *Middleware) Policy() *Policy { return m.policy.Load() }

// Swap puts p in force for every request that starts after it returns.
// Requests already being decided finish under the policy they started with.
func (m *Middleware) Swap(p *Policy) {
	if p == nil {
		return
	}
	m.policy.Store(p)
	if m.onPolicy != nil {
		m.onPolicy(p)
	}
}

// ipKey is the client part of a limiter key for the address a, "ip:" and
// the address, built with one allocation.
func ipKey(a netip.Addr) string {
	if !a.IsValid() {
		return "ip:" + a.String()
	}
	var buf [64]byte
	return string(a.AppendTo(append(buf[:0], "ip:"...)))
}

// outcome is one decision with everything needed to answer and record it.
type outcome struct {
	route  route
	tier   string
	key    string
	limit  limiter.Limit
	d      limiter.Decision
	err    error
	status limiter.Status
	n      numbers
	// passed is true when the enforced limit admitted the request, even if
	// a live change in shadow would not have (status shadow_rejected).
	passed bool
}

// shadowSuffix keeps the state of a live change in shadow apart from the
// state of the limit enforced on the same client.
const shadowSuffix = "|shadow"

// decide asks the route's limiter and records the decision once.
func (m *Middleware) decide(ctx context.Context, rt route, tier, client string, cost int64) outcome {
	l, shadow := rt.class.pick(tier, client)
	o := outcome{route: rt, tier: tier, key: rt.key(tier, client), limit: l.Limit()}
	if m.trace != nil {
		var end func(limiter.Status, limiter.Decision, error)
		ctx, end = m.trace(ctx, rt.pattern, tier, o.limit.Algorithm)
		defer func() { end(o.status, o.d, o.err) }()
	}
	o.d, o.err = l.AllowN(ctx, o.key, cost)
	switch {
	case o.err != nil && (errors.Is(o.err, limiter.ErrCostExceedsLimit) || errors.Is(o.err, limiter.ErrInvalidCost)):
		// A cost the limit can never admit: refused, never passed on.
		o.d.Allowed = false
		o.d.RetryAfter = o.limit.Window()
		o.status = limiter.StatusRejected
	case o.d.Failure == limiter.FailureCanceled:
		// The caller went away while the store decided: nobody to answer.
		o.status = limiter.StatusCanceled
	case o.d.Failure == limiter.FailureOpen:
		o.status = limiter.StatusFailOpen
	case o.d.Failure == limiter.FailureClosed:
		o.status = limiter.StatusFailClosed
		if rt.class.shadow {
			// Shadow classes never refuse, not even when the store is down.
			o.status = limiter.StatusFailOpen
		}
	case o.d.Allowed:
		o.status = limiter.StatusAllowed
		o.passed = true
		if shadow != nil && !rt.class.shadow {
			// A live change in shadow: ask it too, on its own state, and
			// record what it would have done.
			sd, serr := shadow.lim.AllowN(ctx, o.key+shadowSuffix, cost)
			if serr == nil && !sd.Allowed {
				o.status = limiter.StatusShadowRejected
			}
		}
	case rt.class.shadow:
		o.status = limiter.StatusShadowRejected
	default:
		o.status = limiter.StatusRejected
	}
	o.n = computeNumbers(rt.class.renderedFor(l), o.d, m.now())
	if m.recorder != nil {
		var recErr error
		if o.status == limiter.StatusFailOpen || o.status == limiter.StatusFailClosed || o.d.Failure == limiter.FailureLocal {
			recErr = o.err
		}
		m.recorder.RecordDecision(ctx, limiter.Record{
			Endpoint: rt.pattern, PlanTier: tier, Key: o.key, Limit: o.limit,
			Status: o.status, Decision: o.d, Err: recErr,
		})
	}
	if o.err != nil && o.status != limiter.StatusRejected {
		// Store failures are summarised by the limiter's Guard; one line
		// per decision would flood the log during an outage.
		if m.logger.Enabled(ctx, slog.LevelDebug) {
			m.logger.LogAttrs(ctx, slog.LevelDebug, "rate limit store failed",
				slog.String("endpoint", rt.pattern), slog.String("status", string(o.status)), slog.String("error", o.err.Error()))
		}
	} else if o.err != nil {
		m.logger.LogAttrs(ctx, slog.LevelError, "request cost cannot be admitted",
			slog.String("endpoint", rt.pattern), slog.Int64("cost", cost), slog.String("error", o.err.Error()))
	}
	if (o.status == limiter.StatusRejected || o.status == limiter.StatusShadowRejected) && m.logger.Enabled(ctx, slog.LevelDebug) {
		m.logger.LogAttrs(ctx, slog.LevelDebug, "rate limited",
			slog.String("endpoint", rt.pattern), slog.String("class", rt.class.name), slog.String("plan_tier", tier),
			slog.String("key", o.key), slog.Bool("shadow", o.status == limiter.StatusShadowRejected),
			slog.Bool("live_shadow", o.passed && o.status == limiter.StatusShadowRejected),
			slog.Int64("retry_after", o.n.retry))
	}
	return o
}

// Handler returns next behind the rate limit.
//
// Allowed requests get the rate-limit headers and pass on, after the
// leaky-bucket delay when the decision carries one (bounded by the request
// context: a request whose context ends while held is not passed on).
// Refused requests get 429 with Retry-After, Cache-Control: no-store and a
// JSON (or problem+json) body. When the store failed, fail-open requests
// pass without rate-limit headers and fail-closed ones get 503 with
// Retry-After. Shadow classes never refuse and send no rate-limit headers.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := m.policy.Load()
		rt := p.match(r)
		c := p.identity.resolve(r)
		tier := p.tier(c.tier)
		cost := rt.class.cost
		if m.cost != nil {
			cost = m.cost(r)
		}
		o := m.decide(r.Context(), rt, tier, c.key, cost)
		switch o.status {
		case limiter.StatusCanceled:
			return
		case limiter.StatusFailClosed:
			writeUnavailable(w, o.d)
			return
		case limiter.StatusRejected:
			p.headers.write(w.Header(), o.n)
			p.headers.writeRejected(w, rt.pattern, o.n)
			return
		case limiter.StatusAllowed:
			p.headers.write(w.Header(), o.n)
		case limiter.StatusShadowRejected:
			if o.passed {
				// Only a live change in shadow objected: the enforced
				// limit's headers still hold.
				p.headers.write(w.Header(), o.n)
			}
		}
		if o.d.Delay > 0 && o.passed {
			t := time.NewTimer(o.d.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
