package config

// This file is a tier's list of limits: `classes.<c>.limits.<tier>` written
// as a list of named limits instead of one limit, each of which must admit
// a request (httplimit.TierLimit). It decodes, checks and converts them;
// the single form is unchanged.

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/knadh/koanf/v2"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/overload"
	"github.com/rl-exporter/rl-exporter/region"
)

// NamedLimit is one limit of a tier's list: a limit's keys (algorithm,
// rate, period ... or concurrency's limit and lease_ttl), its name, what
// it counts, whose budget it counts, and the class's shadow and penalty
// overridden for it alone. A plain value.
type NamedLimit struct {
	// Name tells the limit apart within its tier's list; required, letters,
	// digits, '_' and '-', unique within the list (regardless of case).
	Name  string `koanf:"name"`
	Limit `koanf:",squash"`
	// Unit is requests or cost; default cost when the class reads its cost
	// (cost_from) or sets a cost other than 1, else requests. Algorithm
	// concurrency counts requests in flight: requests.
	Unit string `koanf:"unit"`
	// Scope is whose budget the limit counts; default the client's.
	Scope Scope `koanf:"scope"`
	// Shadow, when set, overrides the class's shadow for this limit.
	Shadow *bool `koanf:"shadow"`
	// Penalty, when set, overrides the class's penalty box for this limit;
	// within defaults to the limit's period.
	Penalty *limiter.Penalty `koanf:"penalty"`
}

// Scope is whose budget a NamedLimit counts: client (the default) or
// global, written as a word, or {header: X-Org-ID} or {claim: org_id}.
// A plain value.
type Scope struct {
	// Kind is the word: client, global or "" (client).
	Kind string `koanf:"kind" derived:"a word"`
	// Header counts per value of this request header, believed only from
	// identity.trusted_header_peers.
	Header string `koanf:"header"`
	// Claim counts per value of this claim of the verified JWT.
	Claim string `koanf:"claim"`
}

// String is the scope as check prints it: client, global, header X-Org-ID
// or claim org_id.
func (s Scope) String() string {
	switch {
	case s.Header != "":
		return "header " + s.Header
	case s.Claim != "":
		return "claim " + s.Claim
	case s.Kind == "":
		return string(httplimit.ScopeClient)
	}
	return s.Kind
}

// HTTPLimit is s as httplimit takes it, the kind always set.
func (s Scope) HTTPLimit() httplimit.Scope {
	switch {
	case s.Header != "":
		return httplimit.Scope{Kind: httplimit.ScopeHeader, Header: s.Header}
	case s.Claim != "":
		return httplimit.Scope{Kind: httplimit.ScopeClaim, Claim: s.Claim}
	case s.Kind == string(httplimit.ScopeGlobal):
		return httplimit.Scope{Kind: httplimit.ScopeGlobal}
	}
	return httplimit.Scope{Kind: httplimit.ScopeClient}
}

var (
	namedLimitType = reflect.TypeOf(NamedLimit{})
	scopeType      = reflect.TypeOf(Scope{})
)

// tierLists is the decode hook of a tier's value: a list becomes the
// list of a Limit, {list: [...]}, so that the single form decodes as it
// always has and a list's entries are decoded (and their mistakes
// reported) by the decoder, each under its index.
func tierLists(_, to reflect.Type, data any) (any, error) {
	if l, ok := data.([]any); ok && to == limitType {
		if l == nil {
			l = []any{}
		}
		return map[string]any{"list": l}, nil
	}
	return data, nil
}

// scopeWords lets a scope be written as a word (client, global).
func scopeWords(from, to reflect.Type, data any) (any, error) {
	if to == scopeType && from.Kind() == reflect.String {
		return map[string]any{"kind": data}, nil
	}
	return data, nil
}

// listEntryKey matches the decoder's name of a list's entry,
// classes.c.limits.t.list.N, to be written classes.c.limits.t[N].
var listEntryKey = regexp.MustCompile(`^(classes\.[^.]+\.limits\.[^.]+)\.list(?:\.(\d+))?`)

// fileKey turns the decoder's dotted key of a list's entry into the key
// as the file spells it.
func fileKey(key string) string {
	return listEntryKey.ReplaceAllStringFunc(key, func(m string) string {
		s := listEntryKey.FindStringSubmatch(m)
		if s[2] == "" {
			return s[1]
		}
		return s[1] + "[" + s[2] + "]"
	})
}

// dropListValue takes the value at key, within an entry of a list
// (classes.c.limits.t[N].rate), out of k, which the decoder could not
// convert: the entry stays, so that the entries after it keep their
// index. An entry that is no map is left empty. It reports false when
// key is within no list of k.
func dropListValue(k *koanf.Koanf, key string) bool {
	path, rest, ok := strings.Cut(key, "[")
	if !ok {
		return false
	}
	idx, rest, _ := strings.Cut(rest, "]")
	i, err := strconv.Atoi(idx)
	list, isList := k.Get(path).([]any)
	if err != nil || !isList || i < 0 || i >= len(list) {
		return false
	}
	m, isMap := list[i].(map[string]any)
	if !isMap || rest == "" {
		list[i] = map[string]any{}
	} else {
		parts := strings.Split(strings.TrimPrefix(rest, "."), ".")
		for _, p := range parts[:len(parts)-1] {
			if m, isMap = m[p].(map[string]any); !isMap {
				return false
			}
		}
		if _, set := m[parts[len(parts)-1]]; !set {
			return false
		}
		delete(m, parts[len(parts)-1])
	}
	k.Delete(path)
	return k.Set(path, list) == nil
}

// NamedLimits returns the limits of class's tier, their unit and scope
// set to what they default to: the tier's list, or its one limit named
// after the class, as httplimit names a single limit. A tier without
// limits of its own has the default tier's; own reports which.
func (c *Config) NamedLimits(class, tier string) (limits []NamedLimit, own bool) {
	cl := c.Classes[class]
	l, own := cl.Limits[tier]
	if !own {
		l = cl.Limits[c.Tiers.Default]
	}
	if l.List == nil {
		return []NamedLimit{cl.resolve(NamedLimit{Name: class, Limit: l})}, own
	}
	for _, nl := range l.List {
		limits = append(limits, cl.resolve(nl))
	}
	return limits, own
}

// resolve sets nl's unit and scope to their defaults in cl.
func (cl Class) resolve(nl NamedLimit) NamedLimit {
	if nl.Unit == "" {
		nl.Unit = string(cl.defaultUnit(nl.Limit))
	}
	if nl.Scope == (Scope{}) {
		nl.Scope.Kind = string(httplimit.ScopeClient)
	}
	return nl
}

// defaultUnit is what l counts when it does not say: the request's cost
// when the class reads or sets one, but requests in flight for algorithm
// concurrency.
func (cl Class) defaultUnit(l Limit) httplimit.Unit {
	if !l.IsConcurrency() && (cl.CostFrom != nil || cl.Cost != 1) {
		return httplimit.UnitCost
	}
	return httplimit.UnitRequests
}

// penalty is nl's own penalty box, within defaulted to its period; nil
// when it has none.
func (nl NamedLimit) penalty() *limiter.Penalty {
	if nl.Penalty == nil {
		return nil
	}
	p := *nl.Penalty
	if p.After > 0 && p.Within == 0 && !nl.IsConcurrency() {
		p.Within = nl.Period
	}
	return &p
}

// httplimit is nl (resolved) as httplimit compiles it.
func (nl NamedLimit) httplimit() httplimit.TierLimit {
	out := httplimit.TierLimit{Name: nl.Name, Unit: httplimit.Unit(nl.Unit), Scope: nl.Scope.HTTPLimit(), Penalty: nl.penalty()}
	if nl.Shadow != nil {
		shadow := *nl.Shadow
		out.Shadow = &shadow
	}
	if nl.IsConcurrency() {
		lease := nl.Lease()
		out.Lease = &lease
	} else {
		out.Limit = nl.limit()
	}
	return out
}

// windowLimit is the limit whose period is the class's penalty's within
// by default: the limit itself, or a list's first rate limit (its first
// limit when every one is concurrency).
func (l Limit) windowLimit() Limit {
	if l.List == nil {
		return l
	}
	for _, nl := range l.List {
		if !nl.IsConcurrency() {
			return nl.Limit
		}
	}
	if len(l.List) > 0 {
		return l.List[0].Limit
	}
	return Limit{}
}

// regionMode is the tier's own region_mode: the limit's, or the first a
// list's limits set ("" when none does; they must agree).
func (l Limit) regionMode() string {
	for _, nl := range l.List {
		if nl.RegionMode != "" {
			return nl.RegionMode
		}
	}
	return l.RegionMode
}

// priority is the tier's own priority: the limit's, or the first a list's
// limits set ("" when none does; they must agree).
func (l Limit) priority() string {
	for _, nl := range l.List {
		if nl.Priority != "" {
			return nl.Priority
		}
	}
	return l.Priority
}

// validateTierList checks the list of limits l of class's tier, each
// mistake under the key of its entry (classes.c.limits.t[N].field).
func (c *Config) validateTierList(e *errs, class, tier string, l Limit) {
	cl := c.Classes[class]
	lk := "classes." + class + ".limits." + tier
	if len(l.List) == 0 {
		e.add(lk, "an empty list limits nothing: give the tier at least one limit, or leave it out to use the default tier's")
		return
	}
	names := map[string]int{}
	priority, priorityAt := "", -1
	for i, nl := range l.List {
		ek := fmt.Sprintf("%s[%d]", lk, i)
		switch folded := strings.ToLower(nl.Name); {
		case nl.Name == "":
			e.add(ek+".name", "required in a list: it tells the limit apart in answers, metrics and usage")
		case !httplimit.ValidName(nl.Name):
			e.add(ek+".name", "%q: letters, digits, '_' and '-' only", nl.Name)
		default:
			if j, dup := names[folded]; dup {
				e.add(ek+".name", "%q names %s[%d] already (names are told apart regardless of case)", nl.Name, tier, j)
			} else {
				names[folded] = i
			}
		}
		cost := int64(1)
		switch httplimit.Unit(cl.resolve(nl).Unit) {
		case httplimit.UnitRequests:
		case httplimit.UnitCost:
			if nl.IsConcurrency() {
				e.add(ek+".unit", "algorithm concurrency counts requests in flight, not cost: leave unit out, or write requests")
			}
			cost = cl.Cost
			if cl.CostFrom != nil {
				cost = cl.estimate().Default
			}
		default:
			e.addHint(ek+".unit", suggest(nl.Unit, []string{"requests", "cost"}), "%q: want requests or cost", nl.Unit)
		}
		c.validateScope(e, ek+".scope", nl.Scope)
		if nl.Priority != "" {
			if _, err := overload.ParsePriority(nl.Priority); err != nil {
				e.add(ek+".priority", "%v", err)
			} else if priorityAt < 0 {
				priority, priorityAt = nl.Priority, i
			} else if nl.Priority != priority {
				e.add(ek+".priority", "%s, but %s[%d] says %s: one request has one priority, set it once", nl.Priority, tier, priorityAt, priority)
			}
		}
		if p := nl.penalty(); p != nil {
			if p.After < 1 {
				e.add(ek+".penalty.after", "must be >= 1 to turn the penalty box on, got %d", p.After)
			} else if err := p.Validate(); err != nil {
				e.addField(ek+".penalty", err)
			}
		}
		reserves := cl.CostFrom != nil && nl.Unit != string(httplimit.UnitRequests)
		c.validateLimit(e, ek, class, tier, nl.Limit, cost, reserves)
	}
}

// validateScope checks a limit's scope at key.
func (c *Config) validateScope(e *errs, key string, s Scope) {
	if s.Header != "" && s.Claim != "" {
		e.add(key, "set one of header or claim, not both")
		return
	}
	switch s.Kind {
	case "", string(httplimit.ScopeClient), string(httplimit.ScopeGlobal):
	default:
		e.addHint(key, suggest(s.Kind, []string{"client", "global"}), "%q: want client, global, {header: NAME} or {claim: NAME}", s.Kind)
	}
	if s.Header != "" {
		switch {
		case !httplimit.ValidHeaderName(s.Header):
			e.add(key+".header", "%q is not a header name", s.Header)
		case len(c.Identity.TrustedHeaderPeers) == 0:
			// As identity.user_header: such a header could never be
			// believed, and every organisation would share one budget.
			e.add(key+".header", "%s is believed only from identity.trusted_header_peers, which is empty: list the gateways that set it", s.Header)
		}
	}
	if s.Claim != "" && c.Identity.JWT.Algorithm == "" {
		e.add(key+".claim", "%s is read from a verified JWT, and identity.jwt.algorithm is not set: configure identity.jwt", s.Claim)
	}
}

// validateListRegion checks the region modes of the list of limits l at
// lk, of a class in classMode.
//
// A list is decided as one: every limit admits the request, or none takes
// from it (limiter.SetStore), on one store. Only region_mode local can do
// that. strict and hybrid decide each key on its home region, and a list's
// limits count on different keys (the client's, an organisation's, the
// class's), whose homes differ: no one store holds them all. async decides
// each key on a copy of its own and ships the count afterwards, one key at
// a time, so a request refused by one limit would already have taken from
// the others. Such a tier is refused, naming the key that sets its mode.
func validateListRegion(e *errs, lk string, l Limit, classMode region.Mode) {
	set := false
	for i, nl := range l.List {
		if nl.RegionMode == "" {
			continue
		}
		set = true
		ek := fmt.Sprintf("%s[%d].region_mode", lk, i)
		m, err := region.ParseMode(nl.RegionMode)
		switch {
		case err != nil:
			e.add(ek, "%v", err)
		case m != region.ModeLocal:
			e.add(ek, "%s cannot decide a list of limits as one: %s; use local", m, regionWhy(m))
		}
	}
	if !set && classMode != region.ModeLocal {
		e.add(lk, "region_mode %s (the class's) cannot decide a list of limits as one: %s; set region_mode: local on the tier's limits, or give the tier one limit", classMode, regionWhy(classMode))
	}
}

// regionWhy says why mode m cannot decide a list as one.
func regionWhy(m region.Mode) string {
	if m == region.ModeAsync {
		return "it decides each key on a local copy, one key at a time, and ships the counts afterwards"
	}
	return "it decides each key on its home region, and the limits' keys (the client's, an organisation's, the class's) have different homes"
}

// listFindings are what a valid list leaves open: a scope header
// believed from identity.trusted_header_peers, and, with several regions,
// a budget beyond one client that region_mode local counts in each region
// apart.
func (c *Config) listFindings() []Finding {
	var out []Finding
	regions := len(c.Regions())
	for _, class := range c.ClassNames() {
		cl := c.Classes[class]
		for _, tier := range slices.Sorted(maps.Keys(cl.Limits)) {
			for i, nl := range cl.Limits[tier].List {
				ek := fmt.Sprintf("classes.%s.limits.%s[%d].scope", class, tier, i)
				if h := nl.Scope.Header; h != "" {
					out = append(out, Finding{Key: ek + ".header", Message: fmt.Sprintf(
						"%s is believed from identity.trusted_header_peers (%s): a gateway there that passes on a client's own %s lets the client choose whose budget it spends; make every such peer clear or set it",
						h, strings.Join(c.Identity.TrustedHeaderPeers, ", "), h)})
				}
				if s := nl.Scope.HTTPLimit(); regions > 1 && s.Kind != httplimit.ScopeClient && c.RegionMode(class, tier) == region.ModeLocal {
					out = append(out, Finding{Key: ek, Message: fmt.Sprintf(
						"%s, a budget beyond one client: region_mode local counts it in each region apart, so the %d regions together admit up to %d times the limit; a budget for the whole fleet needs one limit on one store",
						nl.Scope, regions, regions)})
				}
			}
		}
	}
	return out
}

// overrideListEntry applies o, an override of a key within a listed tier
// (classes.c.limits.t.NAME.rate), to the entry of k's list named NAME. It
// reports false, doing nothing, when o's key is within no list of k; an
// error names o.From.
func overrideListEntry(k *koanf.Koanf, o Override) (bool, error) {
	parts := strings.Split(o.Key, ".")
	if len(parts) < 5 || parts[0] != "classes" || parts[2] != "limits" {
		return false, nil
	}
	path := strings.Join(parts[:4], ".")
	list, ok := k.Get(path).([]any)
	if !ok {
		return false, nil
	}
	var names []string
	at := -1
	for i, v := range list {
		m, _ := v.(map[string]any)
		n, _ := m["name"].(string)
		names = append(names, n)
		if at < 0 && strings.EqualFold(n, parts[4]) {
			at = i
		}
	}
	if _, isKey := fieldByTag(namedLimitType, parts[4]); at < 0 && isKey {
		return true, fmt.Errorf("%s: %s is a list: address one of its limits by name (%s), as %s%s__<NAME>__%s",
			o.From, path, strings.Join(names, ", "), EnvPrefix, strings.ToUpper(strings.Join(parts[:4], "__")), strings.ToUpper(strings.Join(parts[4:], "__")))
	}
	if at < 0 {
		return true, fmt.Errorf("%s: %s has no limit named %q (%s)", o.From, path, parts[4], strings.Join(names, ", "))
	}
	if len(parts) == 5 {
		return true, fmt.Errorf("%s: %s is one of %s's limits: set its keys", o.From, strings.Join(parts, "."), path)
	}
	m, ok := list[at].(map[string]any)
	if !ok {
		return true, fmt.Errorf("%s: %s[%d] is not a map", o.From, path, at)
	}
	for _, p := range parts[5 : len(parts)-1] {
		inner, ok := m[p].(map[string]any)
		if !ok {
			inner = map[string]any{}
			m[p] = inner
		}
		m = inner
	}
	m[parts[len(parts)-1]] = o.Value
	k.Delete(path)
	return true, k.Set(path, list)
}

// limitTypeAt is the type an override's key component p, under a tier's
// limit, leads to: a key of a limit, or the name of one of a list's
// limits (then a NamedLimit), when keys follow it.
func limitTypeAt(p string, more bool) (reflect.Type, bool) {
	f, ok := fieldByTag(namedLimitType, p)
	if ok && (!more || f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Struct) {
		return f.Type, true
	}
	if more {
		return namedLimitType, true
	}
	return nil, false
}
