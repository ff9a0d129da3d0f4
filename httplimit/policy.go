// Package httplimit enforces rate limits on HTTP requests: a net/http middleware and the engine
// behind `rl-exporter serve`. A Policy groups ServeMux patterns ("GET /api/v1/orders/{id}", the
// endpoint's name in keys, metrics and logs) into classes with a limit per plan tier; the
// Middleware matches a request, identifies its client, decides through package decision and
// answers. It knows no store and no Prometheus.
package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// CatchAll is the endpoint name of requests matching no route (default class).
const CatchAll = "/"

// Class is a group of routes limited alike.
type Class struct {
	Name   string   // the class in keys, logs and RateLimit-Policy (see ValidName)
	Routes []string // ServeMux patterns ("GET /orders/{id}", "/admin/")
	// Limits is the limit per plan tier; the default tier's is required and serves the tiers
	// without one.
	Limits map[string]limiter.Limit
	Shadow bool  // requests over the limit pass, recorded as shadow_rejected
	Shared bool  // one budget per client for all routes, not one per endpoint
	Cost   int64 // units a request takes unless Config.Cost says; default 1
	// Live is the run-time changes of the class's limits: by tier for a tier under one limit, by
	// LiveAt(tier, name) for one of a tier's several limits (TierLimits).
	Live  map[string]decision.LiveLimit
	Store limiter.Store // when set, replaces PolicyConfig.Store (a region mode's)
	// TierStores, when set for a tier, decides it instead of Store (with the default tier's limit
	// when the tier has none).
	TierStores map[string]limiter.Store
	// Penalty, when enabled, boxes a client refused Penalty.After times within Penalty.Within:
	// its requests are refused, penalized, for Penalty.For.
	Penalty limiter.Penalty
	// CostFrom, when set, reads each request's cost from its response: Estimate is reserved at
	// admission and the reservation settled at the real cost when the response ends.
	CostFrom CostFrom
	Estimate Estimate
	Hold     time.Duration        // how long a reservation waits to be settled; default limiter.DefaultHold
	OnExpiry limiter.ExpiryPolicy // what an unsettled reservation's expiry does
	// Leases is the concurrency limit per plan tier, for the tiers limited by requests in flight
	// instead of a Limits entry (limiter.Leases; the store must be a limiter.Leaser).
	Leases map[string]limiter.LeaseLimit
	// TierLimits, for a tier, puts several limits on each request, decided as one (TierLimit);
	// a tier listed here has no Limits or Leases entry.
	TierLimits map[string][]TierLimit
}

// newLimiter is the class's limiter of lim on tier's store; with CostFrom it must hold reservations.
func (c Class) newLimiter(cfg PolicyConfig, tier string, lim limiter.Limit) (*limiter.Limiter, error) {
	engine := c.engine(cfg, tier)
	engine.Limit = lim
	l, err := limiter.New(engine)
	if err != nil {
		return nil, err
	}
	return l, c.checkReserves(l)
}

// engine is every setting of the class's limiters on tier but the Limit, so that a live change
// replaces the limit alone and keeps the store and the reservations' hold and expiry policy.
func (c Class) engine(cfg PolicyConfig, tier string) limiter.Config {
	engine := cfg.Engine()
	engine.Store = c.storeFor(tier, cfg.Store)
	engine.Hold, engine.OnExpiry = c.Hold, c.OnExpiry
	return engine
}

// checkReserves refuses, for a class with CostFrom, a limiter that cannot hold reservations.
func (c Class) checkReserves(l *limiter.Limiter) error {
	if !c.CostFrom.IsZero() && !l.Reserves() {
		return fmt.Errorf("cost_from: the %s algorithm on this store cannot hold reservations", l.Limit().Algorithm)
	}
	return nil
}

// checkEstimate defaults and checks the estimate of a class with CostFrom.
func (cl *class) checkEstimate() error {
	if cl.costFrom.IsZero() {
		return nil
	}
	if cl.estimate.Default == 0 {
		cl.estimate.Default = cl.cost
	}
	return cl.estimate.Validate()
}

func (c Class) storeFor(tier string, policyStore limiter.Store) limiter.Store {
	if st := c.TierStores[tier]; st != nil {
		return st
	}
	if c.Store != nil {
		return c.Store
	}
	return policyStore
}

// PolicyConfig is everything a Policy is built from; zero values are defaults.
type PolicyConfig struct {
	Classes      []Class  // default: one class "default" of DefaultLimit
	DefaultClass string   // gets the CatchAll endpoint; default the first class
	Tiers        []string // the plan tier names; default just DefaultTier
	DefaultTier  string   // the tier of clients whose tier is unknown; default "default"

	Store limiter.Store // where decisions are made; required
	// FailPolicy, Timeout, Breaker, Guard and Observer configure every limiter (limiter.Config);
	// a shared Guard keeps breaker and local budgets across reloads.
	FailPolicy limiter.FailPolicy
	Timeout    time.Duration
	Breaker    limiter.BreakerConfig
	Guard      *limiter.Guard
	Observer   limiter.Observer

	Identity IdentityConfig // who is asking
	Headers  HeaderConfig   // which rate-limit headers and 429 body to send
	// Penalties keeps the classes' penalty boxes; default the class's store, which must then
	// be a limiter.PenaltyStore.
	Penalties limiter.PenaltyStore
	// Paths says how a path is read before it is matched, on every way in; zero: the defaults.
	Paths Paths
}

// Engine is every limiter's settings but Limit, for other ways in (rls.Config) to decide alike.
func (cfg PolicyConfig) Engine() limiter.Config {
	return limiter.Config{
		Store: cfg.Store, FailPolicy: cfg.FailPolicy, Timeout: cfg.Timeout,
		Breaker: cfg.Breaker, Guard: cfg.Guard, Observer: cfg.Observer,
	}
}

// DefaultLimit is the built-in class's limit, 100 per minute fixed_window (a function, so that
// no importer can change it).
func DefaultLimit() limiter.Limit { return limiter.PerMinute(limiter.FixedWindow, 100) }

// Policy is a compiled PolicyConfig, immutable and safe for concurrent use; a reload swaps in a
// new one (Middleware.Swap).
type Policy struct {
	mux          *http.ServeMux
	routes       map[string]*class // pattern → class
	paths        Paths
	registered   map[string]string // the pattern in mux → the route's own, where they differ
	classes      []*class
	defaultClass *class
	tiers        map[string]bool
	tierNames    []string
	defaultTier  string
	identity     *identity
	headers      HeaderConfig
}

type class struct {
	name         string
	shadow       bool
	shared       bool
	cost         int64
	byTier       map[string]*limiter.Limiter
	dflt         *limiter.Limiter
	live         map[string]*decision.Live // tier → live change
	routes       []string
	rendered     map[*limiter.Limiter]decision.RenderedLimit
	keyEndpoints map[string]string // each route's endpoint as limiter keys name it
	penalty      limiter.Penalty
	penalties    limiter.PenaltyStore // nil without a penalty
	timeout      time.Duration        // of a penalty store call
	costFrom     CostFrom
	estimate     Estimate
	leases       map[string]*limiter.Leases // tier → concurrency limit (lease.go)
	dfltLeases   *limiter.Leases
	sets         map[string]*tierSet // tier → several limits (tierlimits.go)
	dfltSet      *tierSet
}

var braces = strings.NewReplacer("{", "<", "}", ">")

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidName reports whether s may name a class, tier or admin token: ASCII letters, digits, '_'
// or '-', safe as they are in labels, keys and headers.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// NewPolicy validates cfg and compiles it; errors name the class, tier or route at fault.
func NewPolicy(cfg PolicyConfig) (*Policy, error) {
	if cfg.Store == nil {
		return nil, errors.New("policy: Store is required")
	}
	if cfg.DefaultTier == "" {
		cfg.DefaultTier = "default"
	}
	if len(cfg.Tiers) == 0 {
		cfg.Tiers = []string{cfg.DefaultTier}
	}
	if len(cfg.Classes) == 0 {
		cfg.Classes = []Class{{Name: "default", Limits: map[string]limiter.Limit{cfg.DefaultTier: DefaultLimit()}}}
	}
	if cfg.DefaultClass == "" {
		cfg.DefaultClass = cfg.Classes[0].Name
	}
	if err := cfg.Paths.Validate(); err != nil {
		return nil, fmt.Errorf("policy: paths: %w", err)
	}
	p := &Policy{
		mux:         http.NewServeMux(),
		routes:      map[string]*class{},
		paths:       cfg.Paths.WithDefaults(),
		registered:  map[string]string{},
		tiers:       map[string]bool{},
		defaultTier: cfg.DefaultTier,
		headers:     cfg.Headers,
	}
	if err := p.setTiers(cfg.Tiers); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, c := range cfg.Classes {
		if seen[c.Name] {
			return nil, fmt.Errorf("policy: class %q defined twice", c.Name)
		}
		seen[c.Name] = true
		cl, err := p.compileClass(cfg, c)
		if err != nil {
			return nil, err
		}
		p.classes = append(p.classes, cl)
		if c.Name == cfg.DefaultClass {
			p.defaultClass = cl
		}
	}
	if p.defaultClass == nil {
		return nil, fmt.Errorf("policy: default class %q is not defined", cfg.DefaultClass)
	}
	if _, ok := p.routes[CatchAll]; !ok {
		if err := register(p.mux, CatchAll); err != nil {
			return nil, fmt.Errorf("policy: catch-all route: %w", err)
		}
		p.routes[CatchAll] = p.defaultClass
		p.defaultClass.routes = append(p.defaultClass.routes, CatchAll)
	}
	for _, cl := range p.classes {
		cl.keyEndpoints = make(map[string]string, len(cl.routes))
		for _, pat := range cl.routes {
			cl.keyEndpoints[pat] = keyEndpoint(cl, pat)
		}
	}
	id, err := newIdentity(cfg.Identity)
	if err != nil {
		return nil, fmt.Errorf("policy: identity: %w", err)
	}
	p.identity = id
	return p, nil
}

func (p *Policy) setTiers(tiers []string) error {
	for _, t := range tiers {
		if !namePattern.MatchString(t) {
			return fmt.Errorf("policy: tier %q: name must be letters, digits, '_' or '-'", t)
		}
		if p.tiers[t] {
			return fmt.Errorf("policy: tier %q listed twice", t)
		}
		p.tiers[t] = true
		p.tierNames = append(p.tierNames, t)
	}
	if !p.tiers[p.defaultTier] {
		return fmt.Errorf("policy: default tier %q is not one of the tiers %v", p.defaultTier, tiers)
	}
	return nil
}

func (p *Policy) compileClass(cfg PolicyConfig, c Class) (*class, error) {
	if !namePattern.MatchString(c.Name) {
		return nil, fmt.Errorf("policy: class %q: name must be letters, digits, '_' or '-'", c.Name)
	}
	cl := &class{name: c.Name, shadow: c.Shadow, shared: c.Shared, cost: c.Cost, byTier: map[string]*limiter.Limiter{},
		costFrom: c.CostFrom, estimate: c.Estimate}
	if cl.cost == 0 {
		cl.cost = 1
	}
	if cl.cost < 0 {
		return nil, fmt.Errorf("policy: class %q: cost must be >= 1, got %d", c.Name, c.Cost)
	}
	if err := cl.compilePenalty(cfg, c); err != nil {
		return nil, err
	}
	dflt, ok := c.Limits[cfg.DefaultTier]
	_, leased := c.Leases[cfg.DefaultTier]
	if _, several := c.TierLimits[cfg.DefaultTier]; !ok && !leased && !several {
		return nil, fmt.Errorf("policy: class %q: no limit for the default tier %q", c.Name, cfg.DefaultTier)
	}
	if err := cl.checkEstimate(); err != nil {
		return nil, fmt.Errorf("policy: class %q: estimate: %w", c.Name, err)
	}
	if err := p.compileLeases(cl, cfg, c); err != nil {
		return nil, err
	}
	if err := p.compileTierLimits(cl, cfg, c); err != nil {
		return nil, err
	}
	newLimiter := func(tier string, lim limiter.Limit) (*limiter.Limiter, error) {
		return c.newLimiter(cfg, tier, lim)
	}
	for tier, lim := range c.Limits {
		if !p.tiers[tier] {
			return nil, fmt.Errorf("policy: class %q: limit for unknown tier %q", c.Name, tier)
		}
		l, err := newLimiter(tier, lim)
		if err != nil {
			return nil, fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		cl.byTier[tier] = l
		cl.render(l)
	}
	cl.dflt = cl.byTier[cfg.DefaultTier]
	for _, tier := range p.tierNames {
		// A tier on a store of its own cannot share the default tier's limiter, on the default's store.
		_, several := c.TierLimits[tier]
		if _, own := c.Limits[tier]; own || several || cl.dflt == nil || c.storeFor(tier, cfg.Store) == c.storeFor(cfg.DefaultTier, cfg.Store) {
			continue
		}
		l, err := newLimiter(tier, dflt)
		if err != nil {
			return nil, fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		cl.byTier[tier] = l
		cl.render(l)
	}
	if err := cl.compileLive(p, cfg, c); err != nil {
		return nil, err
	}
	for _, pat := range c.Routes {
		reg := p.paths.matchPattern(pat)
		if err := register(p.mux, reg); err != nil {
			return nil, fmt.Errorf("policy: class %q: route %q: %w", c.Name, pat, err)
		}
		if reg != pat {
			p.registered[reg] = pat
		}
		p.routes[pat] = cl
		cl.routes = append(cl.routes, pat)
	}
	return cl, nil
}

// compileLive makes c's live changes of a tier's limit; a concurrency limit has none, and those
// of one of a tier's several limits go to its tierSet (compileSetLive).
func (cl *class) compileLive(p *Policy, cfg PolicyConfig, c Class) error {
	if err := cl.compileSetLive(p, cfg, c); err != nil {
		return err
	}
	for tier, lv := range c.Live {
		if _, _, listed := splitLiveAt(tier); listed {
			continue
		}
		if !p.tiers[tier] {
			return fmt.Errorf("policy: class %q: live limit for unknown tier %q", c.Name, tier)
		}
		if cl.leasesFor(tier) != nil {
			return fmt.Errorf("policy: class %q tier %q: a live limit cannot change a concurrency limit", c.Name, tier)
		}
		if ts := cl.setFor(tier); ts != nil {
			return fmt.Errorf("policy: class %q tier %q: a live limit of a tier of several limits names one of them (%s), as LiveAt does", c.Name, tier, ts.names())
		}
		l, err := decision.NewLive(lv, c.engine(cfg, tier))
		if err == nil {
			err = c.checkReserves(l.Limiter)
		}
		if err != nil {
			return fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		if cl.live == nil {
			cl.live = map[string]*decision.Live{}
		}
		cl.live[tier] = l
		cl.render(l.Limiter)
	}
	return nil
}

// ValidatePattern reports whether pattern is a valid ServeMux pattern.
func ValidatePattern(pattern string) error {
	return register(http.NewServeMux(), pattern)
}

// register adds pattern to mux, turning ServeMux's panics on invalid or conflicting patterns
// into errors.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprint(r)
			// ServeMux prefixes its messages with the package and function name.
			if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "http:") {
				msg = msg[i+2:]
			}
			err = errors.New(msg)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}

type route struct {
	pattern string
	class   *class
}

// match finds the route of r, whose path is normal (Paths.normalize): the pattern it matches as
// Paths reads it, else CatchAll.
func (p *Policy) match(r *http.Request) route {
	pat := p.lookup(r, false)
	// An escaped path ends in '/' only when the path does: most requests skip escaping it again.
	if strings.HasSuffix(r.URL.Path, "/") && p.paths.TrailingSlash == PathsIgnore {
		// A trailing slash matches what the path without it matches, unless a pattern names the
		// path with its slash ("/a/b/", "/a/{x}/", "/a/b/{$}").
		if path := r.URL.EscapedPath(); len(path) > 1 && path[len(path)-1] == '/' && slashDepth(pat) != strings.Count(path, "/") {
			pat = p.lookup(r, true)
		}
	}
	if len(p.registered) > 0 {
		if own, ok := p.registered[pat]; ok {
			pat = own
		}
	}
	if c, ok := p.routes[pat]; ok {
		return route{pattern: pat, class: c}
	}
	return route{pattern: CatchAll, class: p.routes[CatchAll]}
}

// lookup is the ServeMux pattern of r's path as Paths matches it, its trailing slash trimmed.
func (p *Policy) lookup(r *http.Request, trimSlash bool) string {
	if !trimSlash && p.paths.Case != PathsInsensitive { // the usual request, matched as it is
		_, pat := p.mux.Handler(r)
		return pat
	}
	u, changed := p.paths.matchURL(r.URL, trimSlash)
	if !changed {
		_, pat := p.mux.Handler(r)
		return pat
	}
	pr := probes.Get().(*probe)
	pr.url = u
	pr.req = http.Request{Method: r.Method, Host: r.Host, URL: &pr.url}
	_, pat := p.mux.Handler(&pr.req)
	pr.req, pr.url = http.Request{}, url.URL{}
	probes.Put(pr)
	return pat
}

func (p *Policy) tier(t string) string {
	if t != "" && p.tiers[t] {
		return t
	}
	return p.defaultTier
}

// limiterFor returns tier's rate limiter; nil for a tier under a concurrency limit (leasesFor)
// or several limits (setFor).
func (c *class) limiterFor(tier string) *limiter.Limiter {
	if l, ok := c.byTier[tier]; ok {
		return l
	}
	if _, ok := c.leases[tier]; ok {
		return nil
	}
	if _, ok := c.sets[tier]; ok {
		return nil
	}
	return c.dflt
}

// EndpointLimit is the limit in force on an endpoint for a tier: Limit, before any live change
// Configured; Source is SourceFile or the live change's, RolloutPercent its share (100 without
// one); LiveShadow says a change runs in shadow beside Limit; Shadow that the class never rejects
// (of a tier of several limits: that this limit refuses nothing). Name is the limit's name in
// RateLimit-Policy and metrics' limit label: Class for a tier under one limit, the listed limit's
// own (TierLimit.Name) for a tier of several, which has one EndpointLimit per limit.
type EndpointLimit struct {
	Endpoint, Class, PlanTier string
	Name                      string
	Limit, Configured         limiter.Limit
	Shadow                    bool
	Source                    string
	RolloutPercent            int
	LiveShadow                bool
}

// SourceFile is EndpointLimit.Source for a limit that comes from the configuration.
const SourceFile = "file"

// Limits lists every endpoint × tier with its limit in force (a live change's once Enforced),
// sorted, for the collector after every Swap.
func (p *Policy) Limits() []EndpointLimit {
	var out []EndpointLimit
	for pat, c := range p.routes {
		for _, t := range p.tierNames {
			if ts := c.setFor(t); ts != nil {
				out = append(out, ts.limits(pat, c.name, t)...)
				continue
			}
			if c.limiterFor(t) == nil {
				continue // a concurrency limit: Policy.LeaseLimits
			}
			base := c.limiterFor(t).Limit()
			el := EndpointLimit{Endpoint: pat, Class: c.name, PlanTier: t, Name: c.name, Limit: base, Shadow: c.shadow,
				Configured: base, Source: SourceFile, RolloutPercent: 100}
			if lv := c.live[t]; lv != nil {
				el.Source, el.RolloutPercent, el.LiveShadow = lv.Source, lv.RolloutPercent, lv.Shadow
				if lv.Enforced() {
					el.Limit = lv.Limit
				}
			}
			out = append(out, el)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { // a tier's several limits stay in list order
		if out[i].Endpoint != out[j].Endpoint {
			return out[i].Endpoint < out[j].Endpoint
		}
		return out[i].PlanTier < out[j].PlanTier
	})
	return out
}

// limits is ts's limits on endpoint pat of class and tier, as Policy.Limits lists them: the
// enforced ones, then the shadow ones, each in list order.
func (ts *tierSet) limits(pat, class, tier string) []EndpointLimit {
	out := make([]EndpointLimit, len(ts.parts))
	for i, part := range ts.parts {
		lim := part.lim.Limit()
		out[i] = EndpointLimit{Endpoint: pat, Class: class, PlanTier: tier, Name: part.name, Limit: lim,
			Configured: lim, Shadow: ts.shadow || i >= ts.enforced, Source: SourceFile, RolloutPercent: 100}
		if ts.live != nil && ts.live[i] != nil {
			lv := ts.live[i]
			out[i].Source, out[i].RolloutPercent, out[i].LiveShadow = lv.Source, lv.RolloutPercent, lv.Shadow
			if lv.Enforced() {
				out[i].Limit = lv.Limit
			}
		}
	}
	return out
}

// Endpoints lists every endpoint name the policy can produce, sorted.
func (p *Policy) Endpoints() []string {
	out := make([]string, 0, len(p.routes))
	for pat := range p.routes {
		out = append(out, pat)
	}
	sort.Strings(out)
	return out
}

// Tiers lists the configured plan tiers in configuration order.
func (p *Policy) Tiers() []string { return append([]string(nil), p.tierNames...) }

// DefaultTier is the tier of clients whose tier is unknown.
func (p *Policy) DefaultTier() string { return p.defaultTier }

// key is a client's limiter key: class and tier (and the endpoint unless shared) keep states
// apart; braces are replaced so that wildcards never act as a Redis Cluster hash tag.
func (rt route) key(tier, client string) string {
	ep, ok := rt.class.keyEndpoints[rt.pattern]
	if !ok {
		ep = keyEndpoint(rt.class, rt.pattern)
	}
	return rt.class.name + "|" + tier + "|" + ep + "|" + client
}

// keyEndpoint is the endpoint part of c's keys for pattern.
func keyEndpoint(c *class, pattern string) string {
	if c.shared {
		return "*"
	}
	return braces.Replace(pattern)
}
