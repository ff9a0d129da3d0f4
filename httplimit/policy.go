// Package httplimit enforces rate limits on HTTP requests: a net/http
// middleware for Go services and the engine behind `rl-exporter serve`.
//
// A Policy groups route patterns (Go 1.22 ServeMux syntax, such as
// "GET /api/v1/orders/{id}") into classes; each class has a limit per plan
// tier. For each request the Middleware finds the matched pattern — the
// endpoint's name everywhere: limiter keys, metrics, logs —, its class, the
// client's identity and plan tier, asks the class's limiter, writes the
// rate-limit headers and either passes the request on or answers 429 (or 503
// when the store failed and the policy is fail-closed).
//
// The package knows the limiter and its Recorder interface, never which store
// is behind the limiter nor Prometheus.
package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// CatchAll is the pattern under which requests that match no configured
// route are counted, in the default class. It is their endpoint name.
const CatchAll = "/"

// Class is a group of routes that share how they are limited. It is a plain
// value used to build a Policy.
type Class struct {
	// Name identifies the class in keys, logs and the RateLimit-Policy
	// field. Letters, digits, '_' and '-' only.
	Name string
	// Routes are ServeMux patterns ("GET /orders/{id}", "/admin/").
	Routes []string
	// Limits is the limit per plan tier. The policy's default tier must be
	// present; a tier without an entry uses the default tier's limit.
	Limits map[string]limiter.Limit
	// Shadow makes the class decide and record but never reject: requests
	// over the limit pass and are recorded as shadow_rejected.
	Shadow bool
	// Shared makes all routes of the class share one budget per client,
	// instead of one budget per endpoint and client.
	Shared bool
	// Cost is the units each request of the class takes, unless the
	// Middleware's Config.Cost says otherwise. Default 1.
	Cost int64
	// Live holds, per plan tier, a limit changed at run time that replaces
	// the tier's limit for the clients it covers (see decision.LiveLimit).
	Live map[string]decision.LiveLimit
	// Store, when set, decides the class's limits and live limits instead
	// of PolicyConfig.Store (the store of a multi-region mode, say).
	Store limiter.Store
	// TierStores, when set for a plan tier, decides that tier's limit and
	// live limit instead of Store. A tier without a limit of its own then
	// gets a limiter of its own, with the default tier's limit, on its store.
	TierStores map[string]limiter.Store
}

// storeFor is the store deciding tier's limits: the tier's, the class's,
// else the policy's.
func (c Class) storeFor(tier string, policyStore limiter.Store) limiter.Store {
	if st := c.TierStores[tier]; st != nil {
		return st
	}
	if c.Store != nil {
		return c.Store
	}
	return policyStore
}

// PolicyConfig is everything a Policy is built from. The zero value of each
// optional field is a usable default.
type PolicyConfig struct {
	// Classes are the route classes. Default: one class named "default"
	// with 100 requests per minute (fixed_window) for every endpoint per client.
	Classes []Class
	// DefaultClass receives requests that match no route, under the
	// CatchAll endpoint. Default: the first class.
	DefaultClass string
	// Tiers are the plan tier names. Default: just DefaultTier.
	Tiers []string
	// DefaultTier is the tier of clients whose tier is unknown. Default "default".
	DefaultTier string

	// Store is where decisions are made. Required.
	Store limiter.Store
	// FailPolicy, Timeout, Breaker, Guard and Observer configure every
	// limiter built for the policy (see limiter.Config). Guard, shared by
	// every policy built on the same store, keeps the breaker's state and
	// the local budgets across reloads.
	FailPolicy limiter.FailPolicy
	Timeout    time.Duration
	Breaker    limiter.BreakerConfig
	Guard      *limiter.Guard
	Observer   limiter.Observer

	// Identity says who is asking.
	Identity IdentityConfig
	// Headers says which rate-limit headers and 429 body to send.
	Headers HeaderConfig
}

// Engine returns the settings every limiter of the policy is built with:
// Store, FailPolicy, Timeout, Breaker, Guard and Observer, with no Limit.
// Other ways in than HTTP build their limiters from it (see rls.Config),
// so that they decide alike.
func (cfg PolicyConfig) Engine() limiter.Config {
	return limiter.Config{
		Store: cfg.Store, FailPolicy: cfg.FailPolicy, Timeout: cfg.Timeout,
		Breaker: cfg.Breaker, Guard: cfg.Guard, Observer: cfg.Observer,
	}
}

// DefaultLimit returns the limit of the built-in default class: 100
// requests per minute, fixed_window. A function, so that no importer can
// change it; safe for concurrent use.
func DefaultLimit() limiter.Limit { return limiter.PerMinute(limiter.FixedWindow, 100) }

// Policy is a compiled PolicyConfig: routes, classes with their limiters,
// identity and header settings. It is immutable and safe for concurrent use;
// a reload builds a new Policy and swaps it in (Middleware.Swap).
type Policy struct {
	mux          *http.ServeMux
	routes       map[string]*class // pattern → class
	classes      []*class
	defaultClass *class
	tiers        map[string]bool
	tierNames    []string
	defaultTier  string
	identity     *identity
	headers      HeaderConfig
}

type class struct {
	name   string
	shadow bool
	shared bool
	cost   int64
	byTier map[string]*limiter.Limiter
	dflt   *limiter.Limiter
	live   map[string]*decision.Live // tier → live change
	routes []string
	// rendered holds each limiter's header values (see renderedFor).
	rendered map[*limiter.Limiter]decision.RenderedLimit
	// keyEndpoints is each route's endpoint as limiter keys name it.
	keyEndpoints map[string]string
}

var braces = strings.NewReplacer("{", "<", "}", ">")

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidName reports whether s may name a class or a plan tier (and, in the
// configuration, an admin token): one or more ASCII letters, digits, '_'
// or '-'. Such names appear in metric labels, Redis keys and headers as
// they are. It is a pure function.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// NewPolicy validates cfg and compiles it. Errors name the class, tier or
// route at fault.
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
	p := &Policy{
		mux:         http.NewServeMux(),
		routes:      map[string]*class{},
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

// setTiers checks and records the plan tiers, the default one among them.
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

// compileClass builds c's limiters (each tier's on its store) and live
// limiters, and registers its routes in p.
func (p *Policy) compileClass(cfg PolicyConfig, c Class) (*class, error) {
	if !namePattern.MatchString(c.Name) {
		return nil, fmt.Errorf("policy: class %q: name must be letters, digits, '_' or '-'", c.Name)
	}
	cl := &class{name: c.Name, shadow: c.Shadow, shared: c.Shared, cost: c.Cost, byTier: map[string]*limiter.Limiter{}}
	if cl.cost == 0 {
		cl.cost = 1
	}
	if cl.cost < 0 {
		return nil, fmt.Errorf("policy: class %q: cost must be >= 1, got %d", c.Name, c.Cost)
	}
	dflt, ok := c.Limits[cfg.DefaultTier]
	if !ok {
		return nil, fmt.Errorf("policy: class %q: no limit for the default tier %q", c.Name, cfg.DefaultTier)
	}
	newLimiter := func(tier string, lim limiter.Limit) (*limiter.Limiter, error) {
		engine := cfg.Engine()
		engine.Limit, engine.Store = lim, c.storeFor(tier, cfg.Store)
		return limiter.New(engine)
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
		// A tier deciding on a store of its own cannot share the default
		// tier's limiter, which decides on the default tier's store.
		if _, own := c.Limits[tier]; own || c.storeFor(tier, cfg.Store) == c.storeFor(cfg.DefaultTier, cfg.Store) {
			continue
		}
		l, err := newLimiter(tier, dflt)
		if err != nil {
			return nil, fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		cl.byTier[tier] = l
		cl.render(l)
	}
	for tier, lv := range c.Live {
		if !p.tiers[tier] {
			return nil, fmt.Errorf("policy: class %q: live limit for unknown tier %q", c.Name, tier)
		}
		engine := cfg.Engine()
		engine.Store = c.storeFor(tier, cfg.Store)
		l, err := decision.NewLive(lv, engine)
		if err != nil {
			return nil, fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		if cl.live == nil {
			cl.live = map[string]*decision.Live{}
		}
		cl.live[tier] = l
		cl.render(l.Limiter)
	}
	for _, pat := range c.Routes {
		if err := register(p.mux, pat); err != nil {
			return nil, fmt.Errorf("policy: class %q: route %q: %w", c.Name, pat, err)
		}
		p.routes[pat] = cl
		cl.routes = append(cl.routes, pat)
	}
	return cl, nil
}

// ValidatePattern reports whether pattern is a valid ServeMux pattern.
func ValidatePattern(pattern string) error {
	return register(http.NewServeMux(), pattern)
}

// register adds pattern to mux, turning ServeMux's panics on invalid or
// conflicting patterns into errors.
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

// route is what a request matched.
type route struct {
	pattern string
	class   *class
}

// match finds the route of a request: its ServeMux pattern and class, or
// CatchAll and the default class.
func (p *Policy) match(r *http.Request) route {
	_, pat := p.mux.Handler(r)
	if c, ok := p.routes[pat]; ok {
		return route{pattern: pat, class: c}
	}
	return route{pattern: CatchAll, class: p.routes[CatchAll]}
}

// tier returns t when it is a configured tier, else the default tier.
func (p *Policy) tier(t string) string {
	if t != "" && p.tiers[t] {
		return t
	}
	return p.defaultTier
}

func (c *class) limiterFor(tier string) *limiter.Limiter {
	if l, ok := c.byTier[tier]; ok {
		return l
	}
	return c.dflt
}

// pick returns the limiter enforced for client on tier, and the live change
// to run in shadow beside it (nil when there is none for this client).
func (c *class) pick(tier, client string) (enforced, shadow *limiter.Limiter) {
	a := decision.Ask{Limiter: c.limiterFor(tier)}
	c.live[tier].Apply(&a, client)
	return a.Limiter, a.LiveShadow
}

// EndpointLimit is one limit in force: what the Policy applies to an
// endpoint for a plan tier. It is a plain value.
type EndpointLimit struct {
	// Endpoint is the route pattern (CatchAll for unmatched requests).
	Endpoint string
	// Class is the route's class.
	Class string
	// PlanTier is the tier.
	PlanTier string
	// Limit is the limit applied.
	Limit limiter.Limit
	// Shadow is true when the class never rejects.
	Shadow bool
	// Configured is the limit the PolicyConfig's Limits give, before any
	// live change.
	Configured limiter.Limit
	// Source is "file" when Limit is the configured limit, else the Source
	// of the live change in force.
	Source string
	// RolloutPercent is the share of clients a live change covers (100
	// without one).
	RolloutPercent int
	// LiveShadow is true when a live change runs in shadow beside the
	// configured limit, which stays in Limit.
	LiveShadow bool
}

// SourceFile is EndpointLimit.Source for a limit that comes from the configuration.
const SourceFile = "file"

// Limits lists every endpoint × tier with the limit in force, sorted by
// endpoint then tier. The collector uses it to create its series at start-up
// and to show the limit in force; call it again after every Swap. Limit is
// a live change's limit as soon as it is enforced for some clients (not in
// shadow, rollout above 0), else the configured one.
func (p *Policy) Limits() []EndpointLimit {
	var out []EndpointLimit
	for pat, c := range p.routes {
		for _, t := range p.tierNames {
			base := c.limiterFor(t).Limit()
			el := EndpointLimit{Endpoint: pat, Class: c.name, PlanTier: t, Limit: base, Shadow: c.shadow,
				Configured: base, Source: SourceFile, RolloutPercent: 100}
			if lv := c.live[t]; lv != nil {
				el.Source, el.RolloutPercent, el.LiveShadow = lv.Source, lv.RolloutPercent, lv.Shadow
				// The gauge shows a change the moment it is enforced for anyone.
				if lv.Enforced() {
					el.Limit = lv.Limit
				}
			}
			out = append(out, el)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Endpoint != out[j].Endpoint {
			return out[i].Endpoint < out[j].Endpoint
		}
		return out[i].PlanTier < out[j].PlanTier
	})
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

// key is the limiter key of a client on a route for a tier. The class and
// tier are part of it so that classes and tiers never share state; the
// endpoint too unless the class is shared. Braces are replaced so that the
// pattern's wildcards never act as a Redis Cluster hash tag.
func (rt route) key(tier, client string) string {
	ep, ok := rt.class.keyEndpoints[rt.pattern]
	if !ok {
		ep = keyEndpoint(rt.class, rt.pattern)
	}
	return rt.class.name + "|" + tier + "|" + ep + "|" + client
}

// keyEndpoint is the endpoint part of c's limiter keys for pattern,
// worked out once per route when the policy is built.
func keyEndpoint(c *class, pattern string) string {
	if c.shared {
		return "*"
	}
	return braces.Replace(pattern)
}
