package httplimit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// TierLimit is one of the several limits a tier puts on each request
// (Class.TierLimits): requests per minute beside tokens per minute beside a
// monthly quota per organisation beside a concurrency cap. The request is
// admitted only when every limit of its tier admits it, and a refused
// request takes from none. A plain value.
type TierLimit struct {
	// Name tells the limit apart within its tier's list: in RateLimit-Policy,
	// refused_by, usage, metrics' limit label and live limits'
	// <class>:<tier>:<name>. ValidName; unique within the list.
	Name string
	// Limit is a rate limit; zero when Lease is set.
	Limit limiter.Limit
	// Lease, when set, makes the entry a concurrency limit: the request holds
	// a lease on it while it runs and takes from the others.
	Lease *limiter.LeaseLimit
	// Unit says what the limit counts; zero: UnitCost when the class reads
	// its cost (CostFrom) or sets a Cost other than 1, else UnitRequests.
	Unit Unit
	// Scope says whose budget the limit counts; zero: ScopeClient.
	Scope Scope
	// Shadow and Penalty, when set, override the class's for this limit.
	Shadow  *bool
	Penalty *limiter.Penalty
}

// Unit is what a TierLimit takes from its budget per request.
type Unit string

const (
	// UnitRequests takes 1 per request, whatever its cost.
	UnitRequests Unit = "requests"
	// UnitCost takes the request's cost: reserved at admission and settled
	// at the response's when the class reads it (CostFrom).
	UnitCost Unit = "cost"
)

// ScopeKind is whose budget a TierLimit counts.
type ScopeKind string

const (
	// ScopeClient counts per client: the request's key, as a single limit does.
	ScopeClient ScopeKind = "client"
	// ScopeGlobal counts one budget for the whole class.
	ScopeGlobal ScopeKind = "global"
	// ScopeHeader counts per value of a request header (Scope.Header), read only
	// from the identity's trusted header peers.
	ScopeHeader ScopeKind = "header"
	// ScopeClaim counts per value of a verified JWT claim (Scope.Claim).
	ScopeClaim ScopeKind = "claim"
)

// Scope is whose budget a TierLimit counts. The zero value is ScopeClient.
// A plain value.
type Scope struct {
	Kind   ScopeKind
	Header string // ScopeHeader's header, canonical or not
	Claim  string // ScopeClaim's claim name
}

// tierSet is a tier's several limits, compiled: the enforced ones decided as one (set), and
// beside them the shadow ones (shadowSet), unless every limit is shadow: then they are all in
// set, judged as a shadow class is. Immutable.
type tierSet struct {
	set, shadowSet *limiter.Set
	parts          []tierPart // set's, then shadowSet's, each in list order
	enforced       int        // how many of parts are set's
	shadow         bool       // every limit is shadow
	reads          bool       // the class reads its cost (CostFrom): its limits of cost hold it
	policy         string     // RateLimit-Policy of set's limits and lease's
	// items are policy's items, kept when some of them count on a budget other than the
	// client's: partitioned lists their indices, in order (policyOf).
	items       []string
	partitioned []int
	lease       *tierLease // the list's concurrency limit, nil when it has none
	boxed       bool       // some enforced part has a penalty box of its own
	// byBucket, when some of the limits have a live change, is the variant of the set that
	// decides the clients of each rollout bucket (forClient); live is each part's change, nil
	// for a part without one.
	byBucket *[100]*tierSet
	live     []*liveEntry
}

// tierLease is the concurrency limit of a tierSet: a request holds a lease on it while it runs
// (decision.SetAsk.Lease). Enforced or shadow as its class is.
type tierLease struct {
	name   string
	leases *limiter.Leases
	scope  Scope // Header canonical
}

// tierPart is one limit of a tierSet.
type tierPart struct {
	name     string
	lim      *limiter.Limiter
	unit     Unit
	scope    Scope // Header canonical
	rendered decision.RenderedLimit
	box      *partBox // the limit's own penalty box, nil when it has none
	live     string   // the source of the live change whose limit lim is, "" for the file's
	suffix   string   // ends the part's keys: a shadow live change's own state
}

// QuotaUnitRequests is the RateLimit-Policy quota unit ("qu") of a TierLimit counting requests
// (UnitRequests). A limit of UnitCost names none: the draft registers no unit for a cost.
const QuotaUnitRequests = "requests"

// compileTierLimits makes c's sets of several limits, one per tier listed in TierLimits, and
// for a tier on a store of its own without a list, the default tier's on that store.
func (p *Policy) compileTierLimits(cl *class, cfg PolicyConfig, c Class) error {
	if len(c.TierLimits) == 0 {
		return nil
	}
	cl.sets = map[string]*tierSet{}
	for tier, list := range c.TierLimits {
		if !p.tiers[tier] {
			return fmt.Errorf("policy: class %q: limits for unknown tier %q", c.Name, tier)
		}
		_, lim := c.Limits[tier]
		_, lease := c.Leases[tier]
		if lim || lease {
			return fmt.Errorf("policy: class %q tier %q: both Limits and TierLimits (or Leases): a tier has one of them", c.Name, tier)
		}
		ts, err := compileTierSet(cfg, c, tier, list)
		if err != nil {
			return fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		cl.sets[tier] = ts
	}
	dflt, ok := c.TierLimits[cfg.DefaultTier]
	if !ok {
		return nil
	}
	cl.dfltSet = cl.sets[cfg.DefaultTier]
	for _, tier := range p.tierNames {
		_, own := c.Limits[tier]
		_, lease := c.Leases[tier]
		_, set := c.TierLimits[tier]
		if own || lease || set || c.storeFor(tier, cfg.Store) == c.storeFor(cfg.DefaultTier, cfg.Store) {
			continue
		}
		ts, err := compileTierSet(cfg, c, tier, dflt)
		if err != nil {
			return fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		cl.sets[tier] = ts
	}
	return nil
}

// compileTierSet checks list and builds its limiters and sets on tier's store.
func compileTierSet(cfg PolicyConfig, c Class, tier string, list []TierLimit) (*tierSet, error) {
	if len(list) == 0 {
		return nil, errors.New("TierLimits lists no limit")
	}
	var enforced, shadowed []tierPart
	seen := map[string]bool{}
	ts := &tierSet{reads: !c.CostFrom.IsZero()}
	for _, e := range list {
		if seen[e.Name] {
			return nil, fmt.Errorf("limit %q listed twice", e.Name)
		}
		seen[e.Name] = true
		if e.Lease != nil {
			if ts.lease != nil {
				return nil, fmt.Errorf("limit %q: a second concurrency limit (%s is one): a tier's list holds one", e.Name, ts.lease.name)
			}
			tl, err := compileTierLease(cfg, c, tier, e)
			if err != nil {
				return nil, fmt.Errorf("limit %q: %w", e.Name, err)
			}
			ts.lease = tl
			continue
		}
		part, shadow, err := compileTierLimit(cfg, c, tier, e)
		if err != nil {
			return nil, fmt.Errorf("limit %q: %w", e.Name, err)
		}
		if shadow {
			shadowed = append(shadowed, part)
		} else {
			enforced = append(enforced, part)
		}
	}
	switch {
	case ts.lease != nil && len(enforced)+len(shadowed) == 0:
		return nil, fmt.Errorf("limit %q is the list's only limit: a tier under a concurrency limit alone takes Leases", ts.lease.name)
	case ts.lease != nil && len(enforced) == 0 && !c.Shadow:
		return nil, fmt.Errorf("every rate limit beside the concurrency limit %q is shadow: a list with a concurrency limit needs an enforced rate limit, or a shadow class", ts.lease.name)
	case len(enforced) == 0:
		enforced, shadowed, ts.shadow = shadowed, nil, true
	}
	if err := ts.assemble(enforced, shadowed, ts.shadow); err != nil {
		return nil, err
	}
	return ts, nil
}

// assemble makes ts's sets and RateLimit-Policy of its enforced and shadowed parts (every one in
// enforced when allShadow); ts.lease is set already.
func (ts *tierSet) assemble(enforced, shadowed []tierPart, allShadow bool) error {
	ts.parts, ts.enforced, ts.shadow = append(enforced, shadowed...), len(enforced), allShadow
	for _, p := range enforced {
		ts.boxed = ts.boxed || (p.box != nil && !allShadow)
	}
	var err error
	if ts.set, err = limiter.NewSet(limitersOf(enforced)...); err != nil {
		return err
	}
	if len(shadowed) > 0 {
		if ts.shadowSet, err = limiter.NewSet(limitersOf(shadowed)...); err != nil {
			return err
		}
	}
	if ts.reads && (!ts.set.Reserves() || (ts.shadowSet != nil && !ts.shadowSet.Reserves())) {
		return errors.New("cost_from: this store cannot hold reservations in a set of several limits")
	}
	items := make([]string, len(enforced))
	for i, part := range enforced {
		lim := part.lim.Limit()
		items[i] = `"` + part.name + `";q=` + strconv.FormatInt(lim.Quota(), 10) +
			";w=" + strconv.FormatInt(max(1, decision.CeilSeconds(lim.Window())), 10)
		if part.unit == UnitRequests {
			items[i] += `;qu="` + QuotaUnitRequests + `"`
		}
	}
	if ts.lease != nil {
		items = append(items, `"`+ts.lease.name+`";q=`+strconv.FormatInt(ts.lease.leases.Limit().Limit, 10)+`;qu="`+QuotaUnitConcurrent+`"`)
	}
	ts.policy = strings.Join(items, ", ")
	for i, part := range enforced {
		if part.scope.Kind != ScopeClient {
			ts.items, ts.partitioned = items, append(ts.partitioned, i)
		}
	}
	if ts.lease != nil && ts.lease.scope.Kind != ScopeClient {
		ts.items, ts.partitioned = items, append(ts.partitioned, len(enforced))
	}
	return nil
}

// policyOf is the RateLimit-Policy of ts for the request asked by a: its policy, each limit not
// counted per client with the partition key ("pk") of the budget it counts on, so that clients
// that share one (the members of an organisation) can tell so. The key is a hash: the budget's
// key names an organisation or a header's value, which is not the client's to read.
func (ts *tierSet) policyOf(a *decision.SetAsk) string {
	if len(ts.partitioned) == 0 || a == nil {
		return ts.policy
	}
	var b strings.Builder
	next := 0
	for i, item := range ts.items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(item)
		if next < len(ts.partitioned) && ts.partitioned[next] == i {
			next++
			key := ""
			if i < len(a.Parts) {
				key = a.Parts[i].Key
			} else if a.Lease != nil {
				key = a.Lease.Key
			}
			sum := sha256.Sum256([]byte(key))
			b.WriteString(";pk=:")
			b.WriteString(base64.StdEncoding.EncodeToString(sum[:9]))
			b.WriteString(":")
		}
	}
	return b.String()
}

// compileTierLease checks e, a concurrency limit of several, and builds its Leases on tier's
// store.
func compileTierLease(cfg PolicyConfig, c Class, tier string, e TierLimit) (*tierLease, error) {
	tl := &tierLease{name: e.Name, scope: e.Scope}
	switch {
	case !ValidName(e.Name):
		return nil, errors.New("name must be letters, digits, '_' or '-'")
	case e.Penalty != nil:
		return nil, errors.New("a penalty of one limit of several is not supported: the class's Penalty boxes a client the set refuses")
	case e.Shadow != nil && *e.Shadow != c.Shadow:
		return nil, errors.New("a concurrency limit of several is enforced or shadow as its class is: its lease is what the rate limits' takes wait on")
	case e.Unit != "" && e.Unit != UnitRequests:
		return nil, fmt.Errorf("unit %q: a concurrency limit counts requests in flight", e.Unit)
	}
	var err error
	if tl.scope, err = checkScope(cfg, e.Scope); err != nil {
		return nil, err
	}
	tl.leases, err = limiter.NewLeases(limiter.LeasesConfig{Limit: *e.Lease, Store: c.storeFor(tier, cfg.Store),
		FailPolicy: cfg.FailPolicy, Timeout: cfg.Timeout, Observer: cfg.Observer, Guard: cfg.Guard})
	if err != nil {
		return nil, err
	}
	return tl, nil
}

// compileTierLimit checks e and builds its limiter; shadow says whether it refuses nothing.
func compileTierLimit(cfg PolicyConfig, c Class, tier string, e TierLimit) (tierPart, bool, error) {
	part := tierPart{name: e.Name, unit: e.Unit, scope: e.Scope}
	if !ValidName(e.Name) {
		return part, false, errors.New("name must be letters, digits, '_' or '-'")
	}
	if err := part.compilePenalty(cfg, c, tier, e.Penalty); err != nil {
		return part, false, err
	}
	switch part.unit {
	case "":
		part.unit = UnitRequests
		if !c.CostFrom.IsZero() || (c.Cost != 0 && c.Cost != 1) {
			part.unit = UnitCost
		}
	case UnitRequests, UnitCost:
	default:
		return part, false, fmt.Errorf("unit %q: want %s or %s", e.Unit, UnitRequests, UnitCost)
	}
	var err error
	if part.scope, err = checkScope(cfg, e.Scope); err != nil {
		return part, false, err
	}
	l, err := c.newLimiter(cfg, tier, e.Limit)
	if err != nil {
		return part, false, err
	}
	part.lim = l
	part.rendered = decision.RenderLimit(e.Name, e.Limit)
	shadow := c.Shadow
	if e.Shadow != nil {
		shadow = *e.Shadow
	}
	return part, shadow, nil
}

// checkScope checks sc and answers it defaulted (ScopeClient), its header canonical.
func checkScope(cfg PolicyConfig, sc Scope) (Scope, error) {
	switch sc.Kind {
	case "":
		sc.Kind = ScopeClient
	case ScopeClient, ScopeGlobal:
	case ScopeHeader:
		switch h := sc.Header; {
		case h == "":
			return sc, errors.New("scope header names no header")
		case !ValidHeaderName(h):
			return sc, fmt.Errorf("scope header %q is not a header name", h)
		case len(cfg.Identity.TrustedHeaderPeers) == 0:
			return sc, fmt.Errorf("scope header %s is believed only from TrustedHeaderPeers, which is empty: list the networks of the gateways that set it", h)
		}
		sc.Header = textproto.CanonicalMIMEHeaderKey(sc.Header)
	case ScopeClaim:
		switch {
		case sc.Claim == "":
			return sc, errors.New("scope claim names no claim")
		case cfg.Identity.JWT == nil:
			return sc, fmt.Errorf("scope claim %s: claims are read from verified JWTs, and no JWT is configured", sc.Claim)
		}
	default:
		return sc, fmt.Errorf("scope %q: want client, global, header or claim", sc.Kind)
	}
	return sc, nil
}

func limitersOf(parts []tierPart) []*limiter.Limiter {
	ls := make([]*limiter.Limiter, len(parts))
	for i, p := range parts {
		ls[i] = p.lim
	}
	return ls
}

// setFor returns tier's several limits; nil for a tier under one limit or a concurrency limit.
func (c *class) setFor(tier string) *tierSet {
	if c.sets == nil { // a class without TierLimits: one comparison per request
		return nil
	}
	if ts, ok := c.sets[tier]; ok {
		return ts
	}
	if _, ok := c.byTier[tier]; ok {
		return nil
	}
	if _, ok := c.leases[tier]; ok {
		return nil
	}
	return c.dfltSet
}

// renderedOf is the header values of the limit named name; the first enforced one's for "".
func (ts *tierSet) renderedOf(name string) decision.RenderedLimit {
	for _, p := range ts.parts {
		if p.name == name {
			return p.rendered
		}
	}
	return ts.parts[0].rendered
}

// scopeSource is where a request's header and claim scopes are read: headers only when trusted
// (the request comes from a trusted header peer, or through the decision API, whose caller is
// believed), claims only from a verified JWT.
type scopeSource struct {
	header  http.Header
	trusted bool
	claims  map[string]any
}

// value is the scope's value for the request, "" when it has none.
func (src *scopeSource) value(sc Scope) string {
	if src == nil {
		return ""
	}
	switch sc.Kind {
	case ScopeHeader:
		if src.trusted {
			return src.header.Get(sc.Header)
		}
	case ScopeClaim:
		return claimString(src.claims[sc.Claim])
	}
	return ""
}

// claimString is a claim's value as a key part: a string or a number, else "".
func claimString(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case float64:
		return strconv.FormatFloat(c, 'f', -1, 64)
	case json.Number:
		return c.String()
	case bool:
		return strconv.FormatBool(c)
	}
	return ""
}

// scopeKeyValue is a scope value as kept in a key: verbatim up to MaxUserKey, else hashed.
func scopeKeyValue(v string) string {
	if len(v) <= MaxUserKey {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// askSet is the decision.SetAsk of client on rt and tier, its keys by scope (src nil: header
// and claim scopes fall back to the client's), and how many scopes fell back for want of a
// value. Costs are set by setCosts, once the request's is known.
//
// Keys: a client-scoped limit counts on the client's key (route.key) and its name; a global
// one on the class's, whatever the endpoint, tier or client; a header- or claim-scoped one on
// the class's and the value's. The name ends every key, so that the limits of one request
// never share a state, and "*" (no tier) keeps the class-wide keys apart from any client's.
func (ts *tierSet) askSet(rt route, tier, client string, src *scopeSource) (*decision.SetAsk, int) {
	sa := &decision.SetAsk{Set: ts.set, ShadowSet: ts.shadowSet}
	all := make([]decision.SetPart, len(ts.parts))
	fell := 0
	var clientKey string
	keyOf := func(sc Scope, name string) string {
		v := ""
		if sc.Kind == ScopeHeader || sc.Kind == ScopeClaim {
			if v = src.value(sc); v == "" {
				fell++
			}
		}
		if k := sharedKey(rt.class.name, sc, v, name); k != "" {
			return k
		}
		if clientKey == "" {
			clientKey = rt.key(tier, client)
		}
		return clientKey + "|" + name
	}
	for i, p := range ts.parts {
		all[i] = decision.SetPart{Name: p.name, Key: keyOf(p.scope, p.name) + p.suffix, Cost: 1, Held: ts.reads && p.unit == UnitCost}
	}
	sa.Parts, sa.ShadowParts = all[:ts.enforced:ts.enforced], all[ts.enforced:]
	if len(sa.ShadowParts) == 0 {
		sa.ShadowParts = nil
	}
	if ts.lease != nil {
		sa.Lease = &decision.SetLease{Name: ts.lease.name, Key: keyOf(ts.lease.scope, ts.lease.name), Leases: ts.lease.leases}
	}
	return sa, fell
}

// sharedKey is the key of the limit named name of class counted beyond its client (askSet): the
// class's for a global limit, the class's and the value v's for one scoped by a header or a
// claim; "" for a limit of the client's, or a scope without a value, which counts on the
// client's key.
func sharedKey(class string, sc Scope, v, name string) string {
	switch {
	case sc.Kind == ScopeGlobal:
		return class + "|*|global|" + name
	case v == "":
		return ""
	case sc.Kind == ScopeHeader:
		return class + "|*|h:" + sc.Header + "=" + scopeKeyValue(v) + "|" + name
	case sc.Kind == ScopeClaim:
		return class + "|*|c:" + sc.Claim + "=" + scopeKeyValue(v) + "|" + name
	}
	return ""
}

// countsOn reports whether key is one that askSet gives part i of ts for client on rt and tier:
// the client's own, or, for a limit counted beyond its client, its class's for some value of
// its scope. A commit takes a token's key only so, so that an altered token never settles a
// reservation on a key its limit does not count on, nor one limit's reservation under another's
// name.
func (ts *tierSet) countsOn(rt route, tier, client string, i int, key string) bool {
	p := ts.parts[i]
	key, ok := strings.CutSuffix(key, p.suffix)
	if !ok {
		return false
	}
	if p.scope.Kind != ScopeGlobal && key == rt.key(tier, client)+"|"+p.name {
		return true
	}
	if p.scope.Kind == ScopeClient {
		return false
	}
	if p.scope.Kind == ScopeGlobal {
		return key == sharedKey(rt.class.name, p.scope, "", p.name)
	}
	// The value sits where sharedKey puts it: between the layout's start and "|" + name.
	start := strings.TrimSuffix(sharedKey(rt.class.name, p.scope, "v", p.name), "v|"+p.name)
	v, ok := strings.CutPrefix(key, start)
	if !ok {
		return false
	}
	if v, ok = strings.CutSuffix(v, "|"+p.name); !ok || v == "" {
		return false
	}
	return sharedKey(rt.class.name, p.scope, v, p.name) == key // v as a key holds it: hashed past MaxUserKey
}

// setCosts gives each part of a its cost: 1 for a limit of requests, a.Cost for one of cost.
func (ts *tierSet) setCosts(a *decision.Ask) {
	for i := range a.Set.Parts {
		a.Set.Parts[i].Cost = ts.costOf(i, a.Cost)
	}
	for i := range a.Set.ShadowParts {
		a.Set.ShadowParts[i].Cost = ts.costOf(ts.enforced+i, a.Cost)
	}
}

func (ts *tierSet) costOf(i int, cost int64) int64 {
	if ts.parts[i].unit == UnitCost {
		return cost
	}
	return 1
}

// writeHeaders writes o's rate-limit headers: those of the limit o speaks for and, for a tier
// of several limits, RateLimit-Policy listing every enforced one.
func (p *Policy) writeHeaders(h http.Header, o *outcome) {
	if o.leaseRefused() {
		p.writeLeaseHeaders(h, o.Speaker, o.Leased)
	} else {
		p.headers.Write(h, o.n)
	}
	if o.set != nil && !p.headers.OmitRateLimit {
		h[decision.HeaderPolicy] = []string{o.set.policyOf(o.Set)}
	}
}

// leaseRefused reports whether o is of a tier of several limits whose concurrency limit refused
// it (its rate limits then undecided): it is answered as a concurrency refusal is.
func (o *outcome) leaseRefused() bool {
	return o.set != nil && o.set.lease != nil && o.Speaker == o.set.lease.name && o.Verdict == decision.VerdictRejected
}

// serveHoldingLease serves a request admitted with a lease of its tier's list (o holds it),
// keeping the lease renewed every third of its TTL while the response runs and releasing it when
// the response ends. o is a copy: a pointer kept by the deferred release would put every
// request's outcome on the heap.
func (m *Middleware) serveHoldingLease(w http.ResponseWriter, r *http.Request, next http.Handler, rt route, o outcome) {
	stop := o.Set.Lease.Leases.Keep(o.Lease)
	ctx := r.Context()
	defer func() {
		stop()
		m.release(ctx, &o.Outcome)
	}()
	m.pass(w, r, next, rt, &o)
}

// shadowRefusers names the shadow limits of parts that would have refused.
func shadowRefusers(parts []decision.PartOutcome) []string {
	var out []string
	for _, p := range parts {
		if p.Shadow && !p.Decision.Allowed {
			out = append(out, p.Name)
		}
	}
	return out
}

// askOf is the Ask of client c's request r on rt under p, the scopes of a tier of several
// limits read from r: headers from a trusted header peer only, claims from its verified JWT.
// The scopes that had no value are counted (ScopeFallbacks) and logged once per interval.
// It writes the Ask in *a, whole (askInto).
func (m *Middleware) askOf(a *decision.Ask, r *http.Request, p *Policy, rt route, c client) {
	tier := p.tier(c.tier)
	if rt.class.sets == nil {
		rt.askInto(a, tier, c.key, nil)
		return
	}
	src := &scopeSource{header: r.Header, claims: c.claims,
		trusted: inNetworks(PeerAddr(r.RemoteAddr), p.identity.cfg.TrustedHeaderPeers)}
	fell := rt.askInto(a, tier, c.key, src)
	m.scopeFell(r.Context(), rt, tier, fell)
}

// scopeFell counts n limits whose header or claim scope had no value.
func (m *Middleware) scopeFell(ctx context.Context, rt route, tier string, n int) {
	if n == 0 {
		return
	}
	m.scopeFallbacks.Add(uint64(n))
	m.scopeLog.Log(ctx, "request has no value for a limit's header or claim scope: counted on its client's budget", []slog.Attr{
		slog.String("class", rt.class.name), slog.String("plan_tier", tier)})
}

// ScopeFallbacks is how many times a limit of several (TierLimit) scoped by a header or a claim
// found no value for it in a request (absent, or a header from a peer not trusted to set it)
// and counted on the client's own budget instead, since the Middleware started. Safe for
// concurrent use.
func (m *Middleware) ScopeFallbacks() uint64 { return m.scopeFallbacks.Load() }

// scopes is where the decision API reads a tier's header and claim scopes: what the caller
// says, believed as its key is.
func (req *CheckRequest) scopes() *scopeSource {
	src := &scopeSource{trusted: true}
	if len(req.Headers) > 0 {
		src.header = make(http.Header, len(req.Headers))
		for k, v := range req.Headers {
			src.header.Set(k, v)
		}
	}
	if len(req.Claims) > 0 {
		src.claims = make(map[string]any, len(req.Claims))
		for k, v := range req.Claims {
			src.claims[k] = v
		}
	}
	return src
}

// setAsk finishes the decision API's Ask a of a tier of several limits: its cost and mode. A
// lease is asked for with "lease": true of a tier with a concurrency limit, and of no other; a
// reserve holds the estimate on each limit of cost (setReserve).
func (req *CheckRequest) setAsk(a *decision.Ask, rt route, tier string) error {
	switch leased := a.Set.Lease != nil; {
	case req.Lease && !leased:
		return fmt.Errorf("lease: class %s tier %s has several limits and no concurrency limit", rt.class.name, tier)
	case leased && req.DryRun:
		return fmt.Errorf("dry_run: class %s tier %s has a concurrency limit (%s), which takes a lease or refuses; it cannot be peeked", rt.class.name, tier, a.Set.Lease.Name)
	case leased && !req.Lease:
		return fmt.Errorf(`lease: class %s tier %s has a concurrency limit (%s): ask with "lease": true and give the lease back with POST %s`, rt.class.name, tier, a.Set.Lease.Name, ReleasePath)
	case req.Reserve && req.DryRun:
		return errors.New("reserve: a dry run reserves nothing")
	}
	if req.Reserve && !rt.class.costFrom.IsZero() {
		a.Cost = rt.class.estimate.Default
	}
	if req.Cost != nil {
		a.Cost = *req.Cost
	}
	if req.Estimate != nil && req.Reserve {
		a.Cost = *req.Estimate
	}
	if a.Cost < 1 {
		return fmt.Errorf("cost: must be >= 1, got %d", a.Cost)
	}
	switch {
	case req.Reserve:
		return req.setReserve(a, rt, tier)
	case req.DryRun:
		a.Mode = limiter.ModePeek
	}
	return nil
}

// setReserve makes a, of a tier of several limits, hold its cost in a reservation on each limit
// of cost, enforced or shadow (the caller reports the cost, so a class without cost_from holds
// them too), the limits of requests taking their 1. A tier with no limit of cost has nothing to
// settle, and one whose store or algorithms cannot hold reservations cannot: the caller's 400.
func (req *CheckRequest) setReserve(a *decision.Ask, rt route, tier string) error {
	ts := rt.class.setFor(tier).forClient(req.Key)
	held := false
	hold := func(parts []decision.SetPart, from int) error {
		for i := range parts {
			p := ts.parts[from+i]
			if parts[i].Held = p.unit == UnitCost; !parts[i].Held {
				continue
			}
			if !p.lim.Reserves() {
				return errors.New(cannotReserve(rt.class.name, tier, p.lim.Limit()))
			}
			held = true
		}
		return nil
	}
	if err := hold(a.Set.Parts, 0); err != nil {
		return err
	}
	if err := hold(a.Set.ShadowParts, ts.enforced); err != nil {
		return err
	}
	switch {
	case !held:
		return fmt.Errorf("reserve: class %s tier %s has no limit of unit cost: each of its limits takes 1 per request, and nothing is left to settle; check without reserve",
			rt.class.name, tier)
	case !a.Set.Set.Reserves() || (a.Set.ShadowSet != nil && !a.Set.ShadowSet.Reserves()):
		return errors.New(cannotReserve(rt.class.name, tier, ts.parts[0].lim.Limit()))
	}
	a.Mode = limiter.ModeReserve
	return tokenFits(a, req.Key)
}

// setUsage peeks at every limit of the set a names, of class c and client: each in Limits (its
// concurrency limit last, with its leases in flight), and the enforced one closest to its end
// (least Remaining ÷ Quota) on the budget itself.
func (c *class) setUsage(ctx context.Context, a decision.Ask, client string, now time.Time) (UsageLimit, error) {
	ts := c.setFor(a.Tier).forClient(client)
	parts := append(append([]decision.SetPart(nil), a.Set.Parts...), a.Set.ShadowParts...)
	all := make([]UsageLimit, len(parts))
	at := 0
	for i, sp := range parts {
		u, err := c.usage(ctx, decision.Ask{Tier: a.Tier, Key: sp.Key, Limiter: ts.parts[i].lim}, client, now)
		if err != nil {
			return UsageLimit{}, fmt.Errorf("limit %s: %w", sp.Name, err)
		}
		u.Name, u.Shadow, u.Live = sp.Name, ts.shadow || i >= ts.enforced, ts.parts[i].live
		all[i] = u
		if i < ts.enforced && share(u) < share(all[at]) {
			at = i
		}
	}
	if sl := a.Set.Lease; sl != nil {
		u, err := c.leaseUsage(ctx, decision.Ask{Tier: a.Tier, Key: sl.Key, Leases: sl.Leases}, now)
		if err != nil {
			return UsageLimit{}, fmt.Errorf("limit %s: %w", sl.Name, err)
		}
		u.Name, u.Shadow = sl.Name, ts.shadow
		if share(u) < share(all[at]) {
			at = len(all)
		}
		all = append(all, u)
	}
	top := all[at]
	top.Limits = all
	return top, nil
}

// share is a budget's Remaining ÷ Quota.
func share(u UsageLimit) float64 {
	if u.Quota <= 0 {
		return 1
	}
	return float64(u.Remaining) / float64(u.Quota)
}
