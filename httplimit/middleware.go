package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/internal/summarylog"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// Config configures a Middleware. Only Policy is required.
type Config struct {
	Policy *Policy // the initial policy
	// Recorder, when set, is told of every decision once (never of a dry run) and, when it is a
	// limiter.LeaseRecorder, of the leases taken, given back and found expired, whichever way in
	// (middleware, forward-auth, decision API, release, renew) did it: decision.Reporter.Record.
	Recorder limiter.Recorder
	// Logger (default: discard) gets a debug line per refused, shadow-over or store-failed
	// decision, never per allowed one, and error lines, summarised, of costs no window admits.
	Logger *slog.Logger
	Cost   func(*http.Request) int64 // a request's cost; default the class's Cost (a CostFrom class's is its Estimate)
	// OnPolicy, when set, is called with the initial policy and each one passed to Swap, once in
	// force: the collector learns the limits in force (Policy.Limits) through it.
	OnPolicy func(*Policy)
	// Trace, when set, starts a span per decision and per settle, release and renewal of what
	// one holds (decision.Reporter); nil costs nothing.
	Trace TraceFunc
	Now   func() time.Time // the clock of X-RateLimit-Reset and the log summaries; default time.Now
	// LogInterval (default limiter.DefaultLogInterval) is the least time between two lines of
	// costs no window admits, and of forward-auth requests refused undecided (DenyAuth): the
	// first is written at once, the next count the occurrences since.
	LogInterval time.Duration
	// PassRoute gives the handler behind the middleware each request's Route in its context
	// (RouteFrom); off, the request passes on unchanged and nothing is allocated for it.
	PassRoute bool
	// Costs, when set, is told what the reservations of classes with CostFrom did, as the store
	// answered: opened, and settled by the middleware, forward-auth's gateway or the decision API.
	Costs decision.CostRecorder
}

// Route is what a request was decided as: its class, endpoint (pattern) and plan tier.
type Route struct{ Class, Endpoint, Tier string }

type routeKey struct{}

// RouteFrom returns the Route a Middleware with Config.PassRoute put in ctx.
func RouteFrom(ctx context.Context) (Route, bool) {
	rt, ok := ctx.Value(routeKey{}).(Route)
	return rt, ok
}

// Middleware enforces a Policy on HTTP requests. It is safe for concurrent use; Swap replaces
// the policy atomically, so every request sees exactly one policy, old or new.
type Middleware struct {
	policy atomic.Pointer[Policy]
	// rep traces and records every way in: decisions, and the settles, releases and renewals
	// of what they hold.
	rep      decision.Reporter
	logger   *slog.Logger
	cost     func(*http.Request) int64
	onPolicy func(*Policy)
	now      func() time.Time
	costLog  *summarylog.Line // request costs that cannot be admitted
	// identityLog: requests whose credentials identify no client (identify)
	identityLog *summarylog.Line
	route       bool             // Config.PassRoute
	denyLog     *summarylog.Line // forward-auth requests refused undecided (DenyAuth)
	// authDenied counts DenyAuth's refusals by reason.
	authDenied [denyReasons]atomic.Uint64
	// scopeFallbacks counts the limits of several (TierLimits) a request had no header or
	// claim value for, counted on its client's budget instead; scopeLog writes them.
	scopeFallbacks atomic.Uint64
	scopeLog       *summarylog.Line
}

// New returns a Middleware enforcing cfg.Policy.
func New(cfg Config) (*Middleware, error) {
	if cfg.Policy == nil {
		return nil, errors.New("httplimit: Policy is required")
	}
	m := &Middleware{rep: decision.Reporter{Trace: cfg.Trace, Recorder: cfg.Recorder, Costs: cfg.Costs},
		logger: cfg.Logger, cost: cfg.Cost, onPolicy: cfg.OnPolicy, now: cfg.Now, route: cfg.PassRoute}
	if m.logger == nil {
		m.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.now == nil {
		m.now = time.Now
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = limiter.DefaultLogInterval
	}
	m.costLog = summarylog.New(m.logger, cfg.LogInterval, m.now)
	m.identityLog = summarylog.New(m.logger, cfg.LogInterval, m.now)
	m.denyLog = summarylog.New(m.logger, cfg.LogInterval, m.now)
	m.scopeLog = summarylog.New(m.logger, cfg.LogInterval, m.now)
	m.Swap(cfg.Policy)
	return m, nil
}

// Policy returns the policy in force.
func (m *Middleware) Policy() *Policy { return m.policy.Load() }

// Swap puts p in force for every request that starts after it returns; requests being decided
// finish under the policy they started with.
func (m *Middleware) Swap(p *Policy) {
	if p == nil {
		return
	}
	m.policy.Store(p)
	if m.onPolicy != nil {
		m.onPolicy(p)
	}
}

// outcome is one decision with its route and header fields: everything needed to answer it.
type outcome struct {
	decision.Outcome
	route route
	n     decision.Fields
	set   *tierSet // the tier's several limits, when it has them
}

// ask is the Ask of client on rt and tier at the class's cost: a lease on a tier under a
// concurrency limit, else the enforced limiter (a live change's when it covers client) and any
// live change in shadow beside it.
func (rt route) ask(tier, client string) decision.Ask {
	var a decision.Ask
	rt.askInto(&a, tier, client, nil)
	return a
}

// askScoped is ask with the values of header and claim scopes read from src (nil: none), and
// how many such scopes had no value and fell back to the client's budget.
func (rt route) askScoped(tier, client string, src *scopeSource) (decision.Ask, int) {
	var a decision.Ask
	fell := rt.askInto(&a, tier, client, src)
	return a, fell
}

// askInto is askScoped writing the Ask in *a, whole: on the request path, where an Ask returned
// through each caller is a copy of hundreds of bytes at each.
func (rt route) askInto(a *decision.Ask, tier, client string, src *scopeSource) (fell int) {
	*a = decision.Ask{Endpoint: rt.pattern, Tier: tier, Key: rt.key(tier, client), Cost: rt.class.cost, Shadow: rt.class.shadow}
	if ts := rt.class.setFor(tier); ts != nil {
		ts = ts.forClient(client)
		a.Set, fell = ts.askSet(rt, tier, client, src)
		a.Shadow = ts.shadow
		return fell
	}
	if ls := rt.class.leasesFor(tier); ls != nil {
		a.Mode, a.Leases = limiter.ModeLease, ls
		return 0
	}
	a.Limiter = rt.class.limiterFor(tier)
	rt.class.live[tier].Apply(a, client)
	return 0
}

// askLimit is the limit a is traced and boxed under: its Limiter's, else its first limit's.
func askLimit(a decision.Ask) limiter.Limit {
	switch {
	case a.Limiter != nil:
		return a.Limiter.Limit()
	case a.Set != nil:
		return a.Set.Set.Limiters()[0].Limit()
	}
	return limiter.Limit{}
}

// decide judges a, asked for client on rt (its penalty box first), and records and traces it
// once; a dry run is neither. The outcome is written in *o, whole, and a is read through a
// pointer (setCosts aside): both are hundreds of bytes, which copies in and out cost every
// request more than its memory store's answer.
func (m *Middleware) decide(ctx context.Context, rt route, client string, a *decision.Ask, o *outcome) {
	// o.Outcome is written whole below (by DecideInto or a penalty box), so only the rest is
	// cleared here, not the whole outcome's 800 bytes once more on every request.
	o.route, o.n, o.set = rt, decision.Fields{}, nil
	if a.Set != nil {
		o.set = rt.class.setFor(a.Tier).forClient(client)
		o.set.setCosts(a)
	}
	// Read before the store's own clock, so that the reset the headers name is not pushed past
	// the store's by the call's latency (decision.ResetAt).
	now := m.now()
	dryRun := a.Mode == limiter.ModePeek
	if m.rep.Trace != nil && !dryRun {
		var end func(limiter.Status, limiter.Decision, error)
		ctx, end = m.rep.Trace.Start(ctx, *a, askLimit(*a))
		defer func() { o.EndTrace(end) }()
	}
	boxed := false
	if rt.class.penalties != nil {
		o.Outcome, boxed = m.penalized(ctx, rt.class, client, *a)
	}
	partBoxes := o.set != nil && o.set.boxed
	if !boxed && partBoxes {
		o.Outcome, boxed = m.partPenalized(ctx, rt.class, o.set, client, *a)
	}
	if !boxed {
		decision.DecideInto(ctx, a, &o.Outcome)
		if (rt.class.penalties != nil || partBoxes) && !dryRun && o.Verdict == decision.VerdictRejected && o.Err == nil {
			m.strikeRefusers(ctx, rt.class, o, client)
		}
	}
	if o.set != nil {
		o.n = decision.FieldsOf(o.set.renderedOf(o.Speaker), o.Decision, now)
	} else {
		o.n = decision.FieldsOf(rt.class.renderedFor(a.Limiter), o.Decision, now)
	}
	if dryRun {
		return
	}
	m.rep.Record(ctx, &o.Outcome)
	m.log(ctx, o)
}

// log writes the debug and error lines of one decision.
func (m *Middleware) log(ctx context.Context, o *outcome) {
	if o.Err != nil && o.Verdict != decision.VerdictRejected {
		// The limiter's Guard summarises store failures; a line per decision floods an outage's log.
		if m.logger.Enabled(ctx, slog.LevelDebug) {
			m.logger.LogAttrs(ctx, slog.LevelDebug, "rate limit store failed",
				slog.String("endpoint", o.Endpoint), slog.String("status", string(o.Status())), slog.String("error", o.Err.Error()))
		}
	} else if o.Err != nil {
		// A cost no window admits (a Cost fed by the client, a class cost above a quota) is
		// refused on every request that repeats it: one line per interval.
		m.costLog.Log(ctx, "request cost cannot be admitted", []slog.Attr{
			slog.String("endpoint", o.Endpoint), slog.Int64("cost", o.Cost), slog.String("error", o.Err.Error())})
	}
	switch o.Verdict {
	case decision.VerdictRejected, decision.VerdictShadowClassOver, decision.VerdictLiveShadowOver, decision.VerdictShadowLimitOver:
		if m.logger.Enabled(ctx, slog.LevelDebug) {
			attrs := []slog.Attr{
				slog.String("endpoint", o.Endpoint), slog.String("class", o.route.class.name), slog.String("plan_tier", o.Tier),
				slog.String("key", o.Key), slog.Bool("shadow", o.Verdict != decision.VerdictRejected),
				slog.Bool("live_shadow", o.Verdict == decision.VerdictLiveShadowOver),
				slog.Int64("retry_after", o.n.Retry)}
			if o.set != nil {
				attrs = append(attrs, slog.Any("refused_by", o.RefusedBy), slog.Any("shadow_refused_by", shadowRefusers(o.Parts)))
			}
			m.logger.LogAttrs(ctx, slog.LevelDebug, "rate limited", attrs...)
		}
	}
}

// respond sets on h the headers that answer o and returns the HTTP status (0 when nobody is
// left to answer, 200 when the request passes) and a refusal's body, for the middleware and the
// decision API alike.
func (p *Policy) respond(h http.Header, o *outcome) (int, RejectedBody) {
	switch v := o.Verdict; {
	case v.Drops():
		return 0, RejectedBody{}
	case v == decision.VerdictFailClosed:
		retry := decision.RetryAfterSeconds(o.Decision)
		h.Set(decision.HeaderRetryAfter, strconv.FormatInt(retry, 10))
		h.Set("Cache-Control", "no-store")
		return http.StatusServiceUnavailable, RejectedBody{
			Error: "rate_limit_unavailable", Message: "the rate limiter cannot decide right now; retry later", RetryAfter: retry,
		}
	case v == decision.VerdictPenalized:
		p.writeHeaders(h, o)
		h.Set("Cache-Control", "no-store")
		msg := fmt.Sprintf("penalized on %s for going over its limit again and again; retry in %d s", o.Endpoint, o.n.Retry)
		if len(o.RefusedBy) > 0 { // the box of one of several limits
			msg = fmt.Sprintf("penalized on %s for going over %s again and again; retry in %d s", o.Endpoint, strings.Join(o.RefusedBy, ", "), o.n.Retry)
		}
		return http.StatusTooManyRequests, RejectedBody{
			Error: "rate_limit_penalized", Message: msg,
			RetryAfter: o.n.Retry, Status: limiter.StatusPenalized, RefusedBy: o.RefusedBy,
		}
	case v.Refuses():
		p.writeHeaders(h, o)
		h.Set("Cache-Control", "no-store")
		if o.leaseRefused() {
			retry := leaseRetrySeconds(o.Leased)
			return http.StatusTooManyRequests, RejectedBody{
				Error:      "concurrency_limit_exceeded",
				Message:    fmt.Sprintf("%d requests already in flight on %s (%s); retry in %d s", o.Leased.InFlight, o.Endpoint, o.Speaker, retry),
				RetryAfter: retry,
				RefusedBy:  o.RefusedBy,
			}
		}
		msg := fmt.Sprintf("rate limit exceeded on %s; retry in %d s", o.Endpoint, o.n.Retry)
		if len(o.RefusedBy) > 0 {
			msg = fmt.Sprintf("rate limit exceeded on %s by %s; retry in %d s", o.Endpoint, strings.Join(o.RefusedBy, ", "), o.n.Retry)
		}
		return http.StatusTooManyRequests, RejectedBody{
			Error:      "rate_limit_exceeded",
			Message:    msg,
			RetryAfter: o.n.Retry,
			RefusedBy:  o.RefusedBy,
		}
	case v.Limited():
		p.writeHeaders(h, o)
	}
	return http.StatusOK, RejectedBody{}
}

// Handler returns next behind the rate limit. Allowed requests get the rate-limit headers and
// pass on after the decision's leaky-bucket delay, unless their context ends while held.
// Refused ones get 429 with Retry-After, Cache-Control: no-store and a JSON (or problem+json)
// body. When the store failed, fail-open requests pass without rate-limit headers, fail-closed
// ones get 503 with Retry-After. Shadow classes never refuse, and send no rate-limit headers
// when over their limit. decision.Verdict lists every case.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := m.policy.Load()
		r, err := p.paths.request(r)
		if err != nil {
			refusePath(w, err)
			return
		}
		rt := p.match(r)
		c, ok := m.identify(w, r, p)
		if !ok {
			return
		}
		var a decision.Ask
		m.askOf(&a, r, p, rt, c)
		switch {
		case a.Mode == limiter.ModeLease:
			m.serveLeased(w, r, p, rt, a, next)
			return
		case !rt.class.costFrom.IsZero():
			a.Mode, a.Cost = limiter.ModeReserve, m.estimate(r, rt.class.estimate, a)
		case m.cost != nil:
			a.Cost = m.cost(r)
		}
		var o outcome
		m.decide(r.Context(), rt, c.key, &a, &o)
		switch code, body := p.respond(w.Header(), &o); code {
		case 0:
			return
		case http.StatusTooManyRequests:
			writeRejected(p.headers, w, o.n, body)
			return
		case http.StatusServiceUnavailable:
			writeJSON(w, "application/json", code, body)
			return
		}
		if o.Lease.ID != "" && o.Set != nil && o.Set.Lease != nil {
			m.serveHoldingLease(w, r, next, rt, o)
			return
		}
		m.pass(w, r, next, rt, &o)
	})
}

// pass serves an admitted request: after its leaky-bucket delay, with its route on the context
// when asked, through its reservation when it holds one. o does not escape, so that an admitted
// request's outcome stays on the stack.
func (m *Middleware) pass(w http.ResponseWriter, r *http.Request, next http.Handler, rt route, o *outcome) {
	if o.Decision.Delay > 0 && o.Verdict.Limited() {
		t := time.NewTimer(o.Decision.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			m.cancel(r.Context(), o)
			return
		}
	}
	if m.route {
		r = r.WithContext(context.WithValue(r.Context(), routeKey{}, Route{Class: rt.class.name, Endpoint: o.Endpoint, Tier: o.Tier}))
	}
	if o.Mode == limiter.ModeReserve {
		m.serveReserved(w, r, next, o)
		return
	}
	next.ServeHTTP(w, r)
}
