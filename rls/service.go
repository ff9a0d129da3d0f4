package rls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/internal/summarylog"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// Config configures a Service with the engine settings of serve's HTTP path, so that both ways
// in decide alike.
type Config struct {
	// Engine is what every limiter is built with but its Limit, which each rule brings: Store
	// (required), FailPolicy, Timeout, Breaker, Guard and Observer. serve passes its HTTP
	// policy's, so that a shared Guard gives both ways in one breaker and one local fallback.
	Engine          limiter.Config
	Recorder        limiter.Recorder // when set, told of every decision
	ResponseHeaders bool             // adds Headers' families to response_headers_to_add
	Headers         decision.HeaderConfig
	// Tiers are the known plan tiers, DefaultTier (default "default") that of a decision
	// without one, named by the TierDescriptorKey entry.
	Tiers             []string
	DefaultTier       string
	TierDescriptorKey string
	// MaxDetailedEndpoints caps the endpoint labels detailed_metric rules create from request
	// values; beyond it, and with 0, decisions are labelled with the rule's path.
	MaxDetailedEndpoints int
	// OnDetailedEndpoint, when set, is told of each new detailed_metric label before its first
	// decision is recorded. It must be quick.
	OnDetailedEndpoint func(endpoint string)
	Trace              decision.TraceFunc // a span per decision and per stream-done charge; nil: none
	Logger             *slog.Logger       // default discard
	Now                func() time.Time   // the headers' and log summaries' clock; default time.Now
	MaxDescriptors     int                // per request; more: InvalidArgument
	MaxEntries         int                // per descriptor; more: InvalidArgument
	// MaxOverrides is the most limit overrides kept compiled (LRU); a dropped one keeps its
	// counts in the store.
	MaxOverrides int
	LogInterval  time.Duration // spaces the lines of costs no limit admits
	// Costs, when set, is told of the charges of charge_on_stream_done rules.
	Costs decision.CostRecorder
	// AllOrNothing decides a call's descriptors as one (limiter.Set): the call is OK only when
	// every descriptor's limit admits it, and a refused call takes from none. Off, each
	// descriptor is decided and counted on its own, as envoyproxy/ratelimit does. The store must
	// be a limiter.SetStore (memory and Redis are). See decideAll for each rule's place in it.
	AllOrNothing bool
}

// Defaults of the Config's request bounds.
const (
	DefaultMaxDescriptors = 32
	DefaultMaxEntries     = 16
	DefaultMaxOverrides   = 1000
)

// Reasons a request is counted as invalid (Service.InvalidRequests): over MaxDescriptors or
// MaxEntries, a domain or key over decision.MaxKey, no domain or descriptors or a bad limit
// override, a hits_addend no window admits (answered OVER_LIMIT).
const (
	InvalidTooManyDescriptors = "too_many_descriptors"
	InvalidTooManyEntries     = "too_many_entries"
	InvalidTooLong            = "too_long"
	InvalidRequest            = "invalid"
	InvalidCostExceedsLimit   = "cost_exceeds_limit"
)

// InvalidReasons lists the reasons of Service.InvalidRequests.
var InvalidReasons = []string{InvalidTooManyDescriptors, InvalidTooManyEntries, InvalidTooLong, InvalidRequest, InvalidCostExceedsLimit}

// Service implements envoy.service.ratelimit.v3.RateLimitService on the limiter. It is safe for
// concurrent use; Swap replaces its rules and SetLive its live changes atomically: each request
// sees the old rules and changes or the new ones.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	cfg     Config
	tiers   atomic.Pointer[tierSet]
	headers atomic.Pointer[decision.HeaderConfig]
	current atomic.Pointer[compiled]

	swapMu sync.Mutex                               // serialises Swap and SetLive
	live   map[string]map[string]decision.LiveLimit // under swapMu: the live changes given to SetLive

	detailedMu sync.Mutex
	detailed   map[string]bool // endpoint labels created by detailed_metric rules

	invalid [5]atomic.Uint64 // requests counted as invalid, by InvalidReasons index
	costLog *summarylog.Line // descriptor costs that cannot be admitted
	rep     decision.Reporter
}

// compiled are Rules with their limiters and live changes.
type compiled struct {
	rules     *Rules
	limiters  map[*rule]*limiter.Limiter
	live      map[*rule]map[string]*liveLimiter
	overrides *lru.Cache[overrideKey, *overridden] // the limits requests carried (see override)
	sets      setCache                             // all_or_nothing's Sets of these limiters
}

type overrideKey struct {
	path    string
	perUnit uint32
	unit    string
	period  time.Duration
}

type overridden struct {
	rule *rule
	lim  *limiter.Limiter
}

// New returns a Service deciding with cfg and enforcing rules (nil: none
// yet; every descriptor is then unlimited).
func New(cfg Config, rules *Rules) (*Service, error) {
	if cfg.Engine.Store == nil {
		return nil, errors.New("rls: Engine.Store is required")
	}
	if cfg.DefaultTier == "" {
		cfg.DefaultTier = "default"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxDescriptors <= 0 {
		cfg.MaxDescriptors = DefaultMaxDescriptors
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxOverrides <= 0 {
		cfg.MaxOverrides = DefaultMaxOverrides
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = limiter.DefaultLogInterval
	}
	if cfg.AllOrNothing {
		if err := checkSetStore(cfg.Engine); err != nil {
			return nil, err
		}
	}
	s := &Service{cfg: cfg, rep: decision.Reporter{Trace: cfg.Trace, Recorder: cfg.Recorder, Costs: cfg.Costs}}
	s.costLog = summarylog.New(cfg.Logger, cfg.LogInterval, cfg.Now)
	s.SetTiers(cfg.Tiers, cfg.DefaultTier)
	s.SetHeaders(cfg.Headers)
	if rules == nil {
		rules = &Rules{domains: map[string]*node{}}
	}
	if err := s.Swap(rules); err != nil {
		return nil, err
	}
	return s, nil
}

// Swap puts rules in force with the live changes last given to SetLive; on error the old stay.
func (s *Service) Swap(rules *Rules) error {
	s.swapMu.Lock()
	defer s.swapMu.Unlock()
	overrides, err := s.newOverrides()
	if err != nil {
		return err
	}
	c := &compiled{rules: rules, limiters: map[*rule]*limiter.Limiter{}, overrides: overrides}
	for _, root := range rules.domains {
		walk(root, func(r *rule) {
			if err != nil || r.unlimited || r.blocked {
				return
			}
			var l *limiter.Limiter
			l, err = s.newLimiter(r.limit)
			if err != nil {
				err = fmt.Errorf("rls: %s: %w", r.path, err)
				return
			}
			c.limiters[r] = l
		})
	}
	if err != nil {
		return err
	}
	if c.live, err = s.compileLive(rules, s.live); err != nil {
		return err
	}
	s.current.Store(c)
	return nil
}

func (s *Service) newOverrides() (*lru.Cache[overrideKey, *overridden], error) {
	c, err := lru.New[overrideKey, *overridden](s.cfg.MaxOverrides)
	if err != nil {
		return nil, fmt.Errorf("rls: limit override cache: %w", err)
	}
	return c, nil
}

// SetHeaders replaces the answers' header families, as a reload of serve's headers section
// does for HTTP. Safe for concurrent use with decisions.
func (s *Service) SetHeaders(hc decision.HeaderConfig) { s.headers.Store(&hc) }

func (s *Service) newLimiter(lim limiter.Limit) (*limiter.Limiter, error) {
	engine := s.cfg.Engine
	engine.Limit = lim
	return limiter.New(engine)
}

// Rules returns the rules in force.
func (s *Service) Rules() *Rules { return s.current.Load().rules }

func walk(n *node, f func(*rule)) {
	if n.rule != nil {
		f(n.rule)
	}
	for _, c := range n.children {
		walk(c, f)
	}
}

// ShouldRateLimit decides every descriptor of req a rule matches, at its own hits_addend, else
// the request's (0 means 1), and answers OVER_LIMIT when any of them without quota_mode is over
// its limit, or when every quota_mode one is (envoyproxy/ratelimit's rule). With AllOrNothing
// the descriptors are decided as one (decideAll); else each on its own.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if reason, err := s.check(req); err != nil {
		s.countInvalid(reason)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	c := s.current.Load()
	descs := req.GetDescriptors()
	// Read before the store's own clock, as the HTTP path does, so that the reset the headers
	// name is not pushed past the store's by the call's latency (decision.ResetAt).
	now := s.cfg.Now()
	// Most requests carry a few descriptors: their matches stay on the stack.
	var rulesBuf [4]*rule
	var limsBuf [4]*limiter.Limiter
	var unlimitedBuf [4]bool
	rules, lims, unlimited := rulesBuf[:0], limsBuf[:0], unlimitedBuf[:0]
	if len(descs) <= len(rulesBuf) {
		rules, lims, unlimited = rulesBuf[:len(descs)], limsBuf[:len(descs)], unlimitedBuf[:len(descs)]
	} else {
		rules, lims, unlimited = make([]*rule, len(descs)), make([]*limiter.Limiter, len(descs)), make([]bool, len(descs))
	}
	var replaced map[string]bool
	for i, d := range descs {
		var r *rule
		if d.GetLimit() != nil && c.rules.domains[req.Domain] != nil {
			// As envoyproxy/ratelimit: the request's own limit wins over the files.
			ov, err := s.override(c, req.Domain, d)
			if err != nil {
				s.countInvalid(InvalidRequest)
				return nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %v", i, err)
			}
			r, lims[i] = ov.rule, ov.lim
		} else {
			r = c.rules.matchDescriptor(req.Domain, d)
			lims[i] = c.limiters[r]
		}
		if r == nil {
			continue
		}
		if r.unlimited {
			unlimited[i] = true
			continue
		}
		rules[i] = r
		for _, name := range r.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
	}
	for i, r := range rules {
		if r != nil && r.name != "" && replaced[r.name] {
			rules[i] = nil
		}
	}
	var outsBuf [4]outcome
	outs := outsBuf[:0]
	if len(descs) <= len(outsBuf) {
		outs = outsBuf[:len(descs)]
	} else {
		outs = make([]outcome, len(descs))
	}
	if s.cfg.AllOrNothing {
		s.decideAll(ctx, c, req, rules, lims, outs)
	} else {
		for i, d := range descs {
			if rules[i] != nil {
				outs[i] = s.decide(ctx, c, lims[i], rules[i], req, d, false)
			}
		}
	}
	return s.respond(rules, unlimited, outs, now), nil
}

// respond is the answer of the call's outcomes: outs[i] is descriptor i's when rules[i] is set.
// The call is OVER_LIMIT when a descriptor of no quota_mode refuses, or when every quota_mode one
// does.
func (s *Service) respond(rules []*rule, unlimited []bool, outs []outcome, now time.Time) *rlsv3.RateLimitResponse {
	ans := newAnswer(len(rules))
	resp := &ans.resp
	var headerFrom outcome
	haveHeader, costRejected := false, false
	quotas, quotasOver := 0, 0
	for i, r := range rules {
		st := resp.Statuses[i]
		if r == nil {
			st.Code = rlsv3.RateLimitResponse_OK
			if unlimited[i] {
				// As envoyproxy/ratelimit answers an unlimited descriptor.
				st.LimitRemaining = math.MaxUint32
			}
			continue
		}
		o := &outs[i]
		costRejected = costRejected || (o.Err != nil && o.Verdict == decision.VerdictRejected)
		o.fillStatus(ans.block(i))
		switch {
		case r.quota:
			// A quota over its limit keeps its OVER_LIMIT status but refuses the call only with
			// every other quota of it (envoyproxy/ratelimit's src/service/ratelimit.go).
			quotas++
			if o.Verdict.Refuses() {
				quotasOver++
			}
		case o.Verdict.Refuses():
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if !haveHeader || o.tighter(&headerFrom) {
			headerFrom, haveHeader = *o, true
		}
	}
	if quotas > 0 && quotasOver == quotas {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if costRejected {
		s.countInvalid(InvalidCostExceedsLimit)
	}
	if s.cfg.ResponseHeaders && haveHeader {
		ans.setHeaders(*s.headers.Load(), &headerFrom, now)
	}
	return resp
}

// check returns why req cannot be decided and the reason it is counted under, or nil; the
// bounds keep one request's cost (store calls, key bytes, compiled overrides) within Config's.
func (s *Service) check(req *rlsv3.RateLimitRequest) (string, error) {
	descs := req.GetDescriptors()
	switch {
	case req.GetDomain() == "":
		return InvalidRequest, errors.New("domain: required")
	case len(req.GetDomain()) > decision.MaxKey:
		return InvalidTooLong, fmt.Errorf("domain: longer than %d bytes", decision.MaxKey)
	case len(descs) == 0:
		return InvalidRequest, errors.New("descriptors: at least one is required")
	case len(descs) > s.cfg.MaxDescriptors:
		return InvalidTooManyDescriptors, fmt.Errorf("descriptors: %d, more than the %d allowed (rls.max_descriptors)", len(descs), s.cfg.MaxDescriptors)
	}
	for i, d := range descs {
		es := d.GetEntries()
		if len(es) > s.cfg.MaxEntries {
			return InvalidTooManyEntries, fmt.Errorf("descriptors[%d].entries: %d, more than the %d allowed (rls.max_entries)", i, len(es), s.cfg.MaxEntries)
		}
		for j, e := range es {
			if len(e.GetKey()) > decision.MaxKey {
				return InvalidTooLong, fmt.Errorf("descriptors[%d].entries[%d].key: longer than %d bytes", i, j, decision.MaxKey)
			}
		}
	}
	return "", nil
}

func (s *Service) countInvalid(reason string) {
	if i := slices.Index(InvalidReasons, reason); i >= 0 {
		s.invalid[i].Add(1)
	}
}

// InvalidRequests returns how many requests were counted as invalid, by
// reason (every one of InvalidReasons). Safe for concurrent use.
func (s *Service) InvalidRequests() map[string]uint64 {
	out := make(map[string]uint64, len(InvalidReasons))
	for i, r := range InvalidReasons {
		out[r] = s.invalid[i].Load()
	}
	return out
}

// override returns the rule and limiter of d's limit override, compiled on first use.
func (s *Service) override(c *compiled, domain string, d *ratelimitv3.RateLimitDescriptor) (*overridden, error) {
	ov := d.GetLimit()
	unit := strings.ToLower(ov.GetUnit().String())
	u, ok := units[unit]
	if !ok {
		return nil, fmt.Errorf("unit: %s is not one of second, minute, hour, day, month, year", ov.GetUnit())
	}
	period := u.period
	if m := ov.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		period *= time.Duration(m.GetValue())
	}
	var path strings.Builder
	path.WriteString(domain)
	for _, e := range d.GetEntries() {
		path.WriteByte('.')
		path.WriteString(e.GetKey())
	}
	k := overrideKey{path: path.String(), perUnit: ov.GetRequestsPerUnit(), unit: unit, period: period}
	if v, ok := c.overrides.Get(k); ok {
		return v, nil
	}
	r := &rule{path: k.path, unit: unit, perUnit: k.perUnit, keySuffix: fmt.Sprintf("|limit=%d/%s", k.perUnit, period),
		limit: limiter.Limit{Algorithm: limiter.FixedWindow, Rate: int64(k.perUnit), Period: period, AlignWindows: true}}
	r.rendered = decision.RenderLimit(r.policyName(), r.limit)
	o := &overridden{rule: r}
	if k.perUnit == 0 {
		r.blocked = true
	} else {
		l, err := s.newLimiter(r.limit)
		if err != nil {
			return nil, err
		}
		o.lim = l
	}
	if len(k.path) <= decision.MaxRememberedName {
		// A longer path is compiled on every use, so that long keys cannot fill the cache.
		c.overrides.Add(k, o)
	}
	return o, nil
}

// outcome is one descriptor's decision, with the header values and Envoy unit of the limit
// enforced (the rule's or a live change's).
type outcome struct {
	decision.Outcome
	rule     *rule
	rendered decision.RenderedLimit
	unit     string
	perUnit  uint32
}

// code is OVER_LIMIT when the HTTP path would refuse, else OK.
func (o outcome) code() rlsv3.RateLimitResponse_Code {
	if o.Verdict.Refuses() {
		return rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return rlsv3.RateLimitResponse_OK
}

// tighter reports whether o sets the headers rather than other: over-limit, then fewer remaining.
func (o outcome) tighter(other *outcome) bool {
	if o.Verdict.Refuses() != other.Verdict.Refuses() {
		return o.Verdict.Refuses()
	}
	return o.Decision.Remaining < other.Decision.Remaining
}

// fillStatus sets o's answer on b's status, pointing at b's limit and reset.
func (o outcome) fillStatus(b *statusBlock) {
	b.limit.Name, b.limit.RequestsPerUnit, b.limit.Unit = o.rule.name, o.perUnit, unitCode(o.unit)
	reset := max(o.Decision.ResetAfter, 0)
	b.reset.Seconds, b.reset.Nanos = int64(reset/time.Second), int32(reset%time.Second)
	b.status.Code = o.code()
	b.status.CurrentLimit = &b.limit
	b.status.LimitRemaining = uint32(min(max(o.Decision.Remaining, 0), math.MaxUint32))
	b.status.DurationUntilReset = &b.reset
}

// descriptorCost is the descriptor's hits_addend, else the request's; 0 is 1.
func descriptorCost(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	cost := int64(req.GetHitsAddend())
	if h := d.GetHitsAddend(); h != nil {
		cost = int64(min(h.GetValue(), math.MaxInt64))
	}
	if cost == 0 {
		cost = 1
	}
	return cost
}

// ask is one descriptor's decision to make, at its cost in consume mode, with the live change
// of the rule's tier applied, and its outcome's header values.
func (s *Service) ask(c *compiled, l *limiter.Limiter, r *rule, req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) (decision.Ask, outcome) {
	key := storeKey(req.Domain, d.GetEntries(), r.keySuffix)
	a := decision.Ask{Endpoint: s.endpoint(r, req.Domain, d.GetEntries()), Tier: s.tier(req, d), Key: key, Cost: descriptorCost(req, d),
		Shadow: r.shadow, Limiter: l}
	o := outcome{rule: r, rendered: r.rendered, unit: r.unit, perUnit: r.perUnit}
	// A descriptor is covered by its store key, as an HTTP client by its key.
	if lv := c.live[r][a.Tier]; lv != nil && lv.Apply(&a, key) {
		o.rendered, o.unit, o.perUnit = lv.rendered, lv.unit, lv.perUnit
	}
	return a, o
}

// peeks reports an explicit hits_addend of 0: whether one more would pass, taking nothing
// (envoyproxy/ratelimit's reading).
func peeks(d *ratelimitv3.RateLimitDescriptor) bool {
	return d.GetHitsAddend() != nil && d.GetHitsAddend().GetValue() == 0
}

// decide makes and records one descriptor's decision as the HTTP path does, live changes of the
// rule's tier included. A bystander's is a peek at its cost, neither recorded nor charged: the
// descriptor of a call another refused (AllOrNothing), answered with its standing.
func (s *Service) decide(ctx context.Context, c *compiled, l *limiter.Limiter, r *rule, req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor, bystander bool) outcome {
	cost := descriptorCost(req, d)
	a, o := s.ask(c, l, r, req, d)
	// A charging rule's calls but peeks report a cost to take.
	peek := peeks(d)
	charge := r.charge && !peek && !bystander && l.Reserves()
	switch {
	case peek:
		a.Mode, a.Cost = limiter.ModePeek, 1
	case bystander:
		a.Mode = limiter.ModePeek
	case charge:
		a.Mode, a.Cost = limiter.ModeReserve, 1
	}
	if s.cfg.Trace != nil {
		lim := r.limit // a blocked rule's, which has no limiter
		if a.Limiter != nil {
			lim = a.Limiter.Limit()
		}
		var end func(limiter.Status, limiter.Decision, error)
		ctx, end = s.cfg.Trace.Start(ctx, a, lim)
		defer func() { o.EndTrace(end) }()
	}
	if r.blocked {
		// requests_per_unit 0: refused without asking the store.
		o.Outcome = decision.Judge(limiter.Decision{ResetAfter: r.limit.Period, RetryAfter: r.limit.Period}, nil, r.limit, r.shadow)
		o.Ask = a
	} else {
		decision.DecideInto(ctx, &a, &o.Outcome)
	}
	if charge {
		s.charge(ctx, &o, cost)
	}
	if !charge && !bystander {
		// A stream-done charge is no admission: its Charge is recorded, in rate_limit_cost_total.
		s.rep.Record(ctx, &o.Outcome)
	}
	if o.Err != nil {
		s.logFailure(ctx, o, cost)
	}
	return o
}

// logFailure logs a decision that ended in an error: at debug level, as the store's Guard
// summarises failures, and a cost no window admits (hits_addend at odds with the rules, which
// every request may repeat) as summaries.
func (s *Service) logFailure(ctx context.Context, o outcome, cost int64) {
	attrs := []slog.Attr{slog.String("endpoint", o.rule.path),
		slog.String("status", string(o.Status())), slog.Int64("cost", cost), slog.String("error", o.Err.Error())}
	switch o.Verdict {
	case decision.VerdictRejected:
		s.costLog.Log(ctx, "descriptor cost cannot be admitted", attrs)
	case decision.VerdictCanceled:
		s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "caller cancelled the decision", attrs...)
	default:
		s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "rate limit store failed", attrs...)
	}
}

// tier is the plan tier named by the TierDescriptorKey entry of d, else of
// the request's other descriptors, when it is a known tier; else the default.
func (s *Service) tier(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) string {
	ts := s.tiers.Load()
	if s.cfg.TierDescriptorKey == "" {
		return ts.dflt
	}
	find := func(d *ratelimitv3.RateLimitDescriptor) (string, bool) {
		for _, e := range d.GetEntries() {
			if e.GetKey() == s.cfg.TierDescriptorKey {
				return e.GetValue(), true
			}
		}
		return "", false
	}
	v, ok := find(d)
	for _, other := range req.GetDescriptors() {
		if ok {
			break
		}
		v, ok = find(other)
	}
	if ok && ts.known[v] {
		return v
	}
	return ts.dflt
}

type tierSet struct {
	known map[string]bool
	dflt  string
}

// SetTiers replaces the known plan tiers and the default tier (empty: keep the current one), as
// a reload of serve's config does. Safe for concurrent use with decisions.
func (s *Service) SetTiers(tiers []string, defaultTier string) {
	if defaultTier == "" {
		defaultTier = s.cfg.DefaultTier
		if old := s.tiers.Load(); old != nil {
			defaultTier = old.dflt
		}
	}
	ts := &tierSet{known: map[string]bool{defaultTier: true}, dflt: defaultTier}
	for _, t := range tiers {
		ts.known[t] = true
	}
	s.tiers.Store(ts)
}

// endpoint is a decision's metric label: the rule's path (the domain, the keys and only the
// values the config names) or, with detailed_metric, the domain and the request's keys and
// values while fewer than MaxDetailedEndpoints such labels exist.
func (s *Service) endpoint(r *rule, domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	if !r.detailed || s.cfg.MaxDetailedEndpoints <= 0 {
		return r.path
	}
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.GetKey())
		b.WriteByte('_')
		b.WriteString(e.GetValue())
	}
	ep := b.String()
	if len(ep) > decision.MaxRememberedName {
		// A label is no place for a client's long value.
		return r.path
	}
	s.detailedMu.Lock()
	known, room := s.detailed[ep], len(s.detailed) < s.cfg.MaxDetailedEndpoints
	if !known && room {
		if s.detailed == nil {
			s.detailed = map[string]bool{}
		}
		s.detailed[ep] = true
	}
	s.detailedMu.Unlock()
	switch {
	case known:
		return ep
	case !room:
		return r.path
	}
	if s.cfg.OnDetailedEndpoint != nil {
		s.cfg.OnDetailedEndpoint(ep)
	}
	return ep
}

// DetailedEndpoints returns the endpoint labels detailed_metric rules have
// created, sorted. Safe for concurrent use.
func (s *Service) DetailedEndpoints() []string {
	s.detailedMu.Lock()
	out := make([]string, 0, len(s.detailed))
	for ep := range s.detailed {
		out = append(out, ep)
	}
	s.detailedMu.Unlock()
	sort.Strings(out)
	return out
}

// matchDescriptor is match for a request's descriptor.
func (r *Rules) matchDescriptor(domain string, d *ratelimitv3.RateLimitDescriptor) *rule {
	es := d.GetEntries()
	var buf [8]entry
	entries := buf[:0]
	for _, e := range es {
		entries = append(entries, entry{key: e.GetKey(), value: e.GetValue()})
	}
	return r.match(domain, entries)
}

// charge takes the cost a charging rule's call reports (decision.Charge, traced and recorded):
// it settles the one-unit reservation the call opened at that cost, taking the excess past the
// limit, or, on a budget too spent to open one, charges it all the same, since the request was
// served; the next peeks see it.
func (s *Service) charge(ctx context.Context, o *outcome, cost int64) {
	spent := o.Verdict == decision.VerdictRejected || o.Verdict == decision.VerdictShadowClassOver
	if o.Reservation.ID == "" && !spent {
		return // the fail policy's pass: no store to charge
	}
	a := o.Ask
	a.Cost = cost
	if o.Reservation.ID != "" {
		a.Reservation = o.Reservation
	}
	c := s.rep.Charge(context.WithoutCancel(ctx), a)
	switch {
	case c.Settled():
	case a.Reservation.ID != "":
		s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "stream-done charge not settled: it expires by its policy",
			slog.String("endpoint", o.Endpoint), slog.String("error", c.Err.Error()))
	default:
		s.costLog.Log(ctx, "stream-done charge not taken on a spent budget", []slog.Attr{
			slog.String("endpoint", o.Endpoint), slog.Int64("cost", cost), slog.String("error", c.Err.Error())})
	}
}
