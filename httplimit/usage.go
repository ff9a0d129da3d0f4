package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// UsagePath is where serve mounts the usage API, beside CheckPath and behind the same peers.
const UsagePath = "/v1/usage"

// UsageReport is what a client has used of every budget kept for it. A plain value.
type UsageReport struct {
	Key      string       `json:"key"`       // the client key, grouped as the limiter keys it
	PlanTier string       `json:"plan_tier"` // the tier whose limits apply
	At       time.Time    `json:"at"`        // when the store was read
	Limits   []UsageLimit `json:"limits"`    // sorted by class, then endpoint
}

// UsageLimit is one budget of a client: a class's limit on one endpoint (Endpoint "*" when the
// class is shared). Used and Remaining are in cost units.
type UsageLimit struct {
	Class     string            `json:"class"`
	Endpoint  string            `json:"endpoint"`
	Algorithm limiter.Algorithm `json:"algorithm"`
	Live      string            `json:"live,omitempty"`   // the live change in force, if any
	Shadow    bool              `json:"shadow,omitempty"` // the class never refuses
	Quota     int64             `json:"quota"`            // per window, or the bucket size
	Used      int64             `json:"used"`             // Quota − Remaining
	Remaining int64             `json:"remaining"`
	// Reset is when the full quota is back, rounded up to the second as X-RateLimit-Reset is
	// (decision.ResetAt; At's second when nothing is used); ResetSeconds the same, in seconds
	// from At, rounded up as Retry-After is.
	Reset        time.Time `json:"reset"`
	ResetSeconds int64     `json:"reset_seconds"`
	// OpenReservations counts the reservations on the budget neither settled nor past their
	// hold, for a class with cost_from; 0 for another class and on a store that keeps no count.
	OpenReservations int64 `json:"open_reservations"`
	// ExhaustedAt is when Remaining reaches 0 at the rate the current fixed window was used at,
	// if that is before Reset; nil otherwise and for algorithms without a current window.
	ExhaustedAt *time.Time `json:"exhausted_at"`
	// PenalizedUntil is when the client leaves its class's penalty box, while it is in it.
	PenalizedUntil *time.Time `json:"penalized_until,omitempty"`
	// InFlight, for a concurrency limit (Algorithm "concurrency") alone, is the requests the
	// client has in flight: Used, with Quota the limit on them. Reset is then when the last
	// lease held expires unreleased, at the latest.
	InFlight *int64 `json:"in_flight,omitempty"`
	// Leases are the leases held, earliest expiry first, at most limiter.MaxPeekedLeases;
	// LeaseTTLSeconds the lifetime of a lease never released. Concurrency limits only.
	Leases          []UsageLease `json:"leases,omitempty"`
	LeaseTTLSeconds int64        `json:"lease_ttl_seconds,omitempty"`
	// Name is the limit's, for one of several (TierLimit.Name): in Limits, and on the budget
	// itself the name of the limit its figures are of, the least Remaining ÷ Quota.
	Name string `json:"name,omitempty"`
	// Limits, for a tier of several limits, is each one's usage in its list's order, each
	// with its Name; the budget's own figures are those of the one closest to its end.
	Limits []UsageLimit `json:"limits,omitempty"`
}

// UsageLease is a lease a client holds: when the store drops it if it is never released. A
// plain value.
type UsageLease struct {
	Expires time.Time `json:"expires"`
}

// ErrUnknownTier is returned, wrapped, by Usage for a plan tier the policy does not have.
var ErrUnknownTier = errors.New("unknown tier")

// ErrUnknownAPIKey is returned, wrapped, by UsageOfAPIKey for a key that identifies no client:
// one not in TierByAPIKey, without AllowUnknownAPIKeys.
var ErrUnknownAPIKey = errors.New("unknown API key")

// Usage peeks at every budget the policy keeps for client (a key as CheckRequest.Key takes
// it) on planTier (empty: the key's own tier, by TierByKey for a user id and TierByAPIKey for
// a stored API key, else the default tier). It changes nothing, not even by creating a key. A
// store that cannot be read fails it: a fail-policy answer is no reading. Safe for concurrent
// use.
func (m *Middleware) Usage(ctx context.Context, client, planTier string) (UsageReport, error) {
	p := m.policy.Load()
	client = p.identity.clientKey(client)
	tier, ok := p.identity.storedKeyTier[client]
	if !ok {
		tier = p.identity.tierOf("", strings.TrimPrefix(client, "user:"), "")
	}
	return m.usage(ctx, p, client, tier, planTier, nil)
}

// UsageScoped is Usage with the values of header- and claim-scoped limits (TierLimit.Scope)
// given: headers as a request from a trusted header peer carries them, claims as a verified
// JWT does. A limit without its value is reported on the client's own budget, where a request
// without it counts. Safe for concurrent use.
func (m *Middleware) UsageScoped(ctx context.Context, client, planTier string, headers http.Header, claims map[string]string) (UsageReport, error) {
	p := m.policy.Load()
	client = p.identity.clientKey(client)
	tier, ok := p.identity.storedKeyTier[client]
	if !ok {
		tier = p.identity.tierOf("", strings.TrimPrefix(client, "user:"), "")
	}
	req := CheckRequest{Claims: claims}
	src := req.scopes()
	src.header = headers
	return m.usage(ctx, p, client, tier, planTier, src)
}

// UsageOfAPIKey is Usage of the client the API key rawKey identifies, resolved as a request
// carrying it is (the stored key, and the key's own tier unless planTier is given); a key
// that identifies nobody is ErrUnknownAPIKey, wrapped. rawKey is a secret: it appears in no
// answer and no error. Safe for concurrent use.
func (m *Middleware) UsageOfAPIKey(ctx context.Context, rawKey, planTier string) (UsageReport, error) {
	p := m.policy.Load()
	c := p.identity.apiKeyClient(apiKey{raw: rawKey})
	if c.fallback != "" {
		return UsageReport{}, fmt.Errorf("api_key: %w: not listed under the API keys of any tier", ErrUnknownAPIKey)
	}
	return m.usage(ctx, p, c.key, c.tier, planTier, nil)
}

// usage is Usage of client, whose own tier is ownTier, on planTier (empty: ownTier), the
// scopes of several limits read from src (nil: none).
func (m *Middleware) usage(ctx context.Context, p *Policy, client, ownTier, planTier string, src *scopeSource) (UsageReport, error) {
	tier := planTier
	switch {
	case tier == "":
		tier = p.tier(ownTier)
	case !p.tiers[tier]:
		return UsageReport{}, fmt.Errorf("plan_tier: %w %q (the tiers are %s)", ErrUnknownTier, tier, strings.Join(p.tierNames, ", "))
	}
	now := m.now()
	r := UsageReport{Key: client, PlanTier: tier, At: now, Limits: []UsageLimit{}}
	seen := map[string]bool{}
	for _, c := range p.classes {
		for _, pat := range c.routes {
			a, _ := route{pattern: pat, class: c}.askScoped(tier, client, src)
			if seen[a.Key] {
				continue
			}
			seen[a.Key] = true
			var u UsageLimit
			var err error
			if a.Set != nil {
				u, err = c.setUsage(ctx, a, client, now)
			} else if a.Mode == limiter.ModeLease {
				u, err = c.leaseUsage(ctx, a, now)
			} else {
				u, err = c.usage(ctx, a, client, now)
			}
			if err != nil {
				return r, fmt.Errorf("class %s, endpoint %s: %w", c.name, pat, err)
			}
			u.Endpoint = pat
			if c.shared {
				u.Endpoint = "*"
			}
			r.Limits = append(r.Limits, u)
		}
	}
	sort.Slice(r.Limits, func(i, j int) bool {
		a, b := r.Limits[i], r.Limits[j]
		return a.Class < b.Class || a.Class == b.Class && a.Endpoint < b.Endpoint
	})
	return r, nil
}

// errUnreadable is returned, wrapped, when the fail policy answered a peek.
var errUnreadable = errors.New("store unavailable")

// usage peeks at the budget a names, of class c and client.
func (c *class) usage(ctx context.Context, a decision.Ask, client string, now time.Time) (UsageLimit, error) {
	l, key := a.Limiter, a.Key
	d, err := l.Peek(ctx, key)
	if err != nil {
		return UsageLimit{}, err
	}
	if d.Failure != limiter.FailureNone {
		return UsageLimit{}, fmt.Errorf("%w: decided by the fail policy (%s)", errUnreadable, d.Failure)
	}
	lim := l.Limit()
	u := UsageLimit{Class: c.name, Algorithm: lim.Algorithm, Shadow: c.shadow,
		Quota: lim.Quota(), Remaining: d.Remaining, Used: max(lim.Quota()-d.Remaining, 0),
		Reset: decision.ResetAt(now, d.ResetAfter), ResetSeconds: decision.CeilSeconds(d.ResetAfter)}
	if lv := c.live[a.Tier]; lv != nil && l != c.limiterFor(a.Tier) {
		u.Live = lv.Source
	}
	u.ExhaustedAt = forecast(lim, u.Used, u.Remaining, d.ResetAfter, now)
	if !c.costFrom.IsZero() {
		n, err := l.OpenReservations(ctx, key)
		switch {
		case errors.Is(err, limiter.ErrOpenReservationsNotSupported): // a Reserver that keeps no count: 0
		case err != nil:
			return UsageLimit{}, fmt.Errorf("%w: open reservations: %v", errUnreadable, err)
		default:
			u.OpenReservations = n
		}
	}
	if c.penalties != nil {
		left, err := c.penalties.Penalized(ctx, c.penaltyKey(client), c.timeout)
		if err != nil {
			return UsageLimit{}, fmt.Errorf("%w: penalty box: %v", errUnreadable, err)
		}
		if left > 0 {
			until := now.Add(left)
			u.PenalizedUntil = &until
		}
	}
	return u, nil
}

// leaseUsage peeks at the leases a names, of class c under a concurrency limit.
func (c *class) leaseUsage(ctx context.Context, a decision.Ask, now time.Time) (UsageLimit, error) {
	lim := a.Leases.Limit()
	held, err := a.Leases.Peek(ctx, a.Key)
	if err != nil {
		return UsageLimit{}, err
	}
	u := UsageLimit{Class: c.name, Algorithm: limiter.Concurrency, Shadow: c.shadow,
		Quota: lim.Limit, Used: held.InFlight, Remaining: max(lim.Limit-held.InFlight, 0),
		InFlight: &held.InFlight, LeaseTTLSeconds: decision.CeilSeconds(lim.TTL)}
	var last time.Duration
	for _, left := range held.ExpiresIn {
		u.Leases = append(u.Leases, UsageLease{Expires: now.Add(left)})
		last = max(last, left)
	}
	if held.InFlight > int64(len(held.ExpiresIn)) {
		last = lim.TTL // the latest expiry is among those not listed: at most a TTL away
	}
	u.Reset, u.ResetSeconds = decision.ResetAt(now, last), decision.CeilSeconds(last)
	return u, nil
}

// forecast extrapolates a fixed window's use so far to when nothing remains; nil when that is
// not before the window ends. Other algorithms have no current window to extrapolate from.
func forecast(lim limiter.Limit, used, remaining int64, resetAfter time.Duration, now time.Time) *time.Time {
	if lim.Algorithm != limiter.FixedWindow || used == 0 {
		return nil
	}
	if remaining == 0 {
		return &now
	}
	window := lim.Window()
	if lim.Calendar != nil { // a calendar window's length is that of the one holding now
		start, end := lim.Calendar.Window(now)
		window = end.Sub(start)
	}
	elapsed := window - resetAfter
	if elapsed <= 0 {
		return nil
	}
	left := time.Duration(float64(elapsed) * float64(remaining) / float64(used))
	if left >= resetAfter {
		return nil
	}
	at := now.Add(left)
	return &at
}

// UsageRequest is the body of POST UsagePath: the API key a client holds, as it sends it
// (without an Authorization scheme). The key is a secret, hence a body and never a URL. A plain
// value.
type UsageRequest struct {
	APIKey   string `json:"api_key"`
	PlanTier string `json:"plan_tier,omitempty"` // empty: the key's own tier
}

// MaxUsageRequestBytes bounds the body of POST UsagePath.
const MaxUsageRequestBytes = 8 << 10

// UsageHandler returns the usage API: GET UsagePath?key=K[&plan_tier=T] answers Usage as JSON
// for a stored key K; POST UsagePath with a UsageRequest answers UsageOfAPIKey, 404 for a key
// that identifies nobody. 400 for a bad query or body, 405 for another method, 501 on a store
// that cannot peek, 503 when the store cannot be read. Like CheckHandler it believes the key it
// is given: mount it where CheckHandler is.
func (m *Middleware) UsageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep UsageReport
		var err error
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			key, tier, scopes, qerr := usageQuery(r)
			if qerr != nil {
				writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_request", Message: qerr.Error()})
				return
			}
			if scopes == nil {
				rep, err = m.Usage(r.Context(), key, tier)
			} else {
				rep, err = m.UsageScoped(r.Context(), key, tier, scopes.scopes().header, scopes.Claims)
			}
		case http.MethodPost:
			req, berr := usageBody(w, r)
			if berr != nil {
				writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_request", Message: berr.Error()})
				return
			}
			rep, err = m.UsageOfAPIKey(r.Context(), req.APIKey, req.PlanTier)
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			writeJSON(w, "application/json", http.StatusMethodNotAllowed, RejectedBody{Error: "method_not_allowed", Message: "use GET with ?key=, or POST with {\"api_key\": …}"})
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		switch {
		case errors.Is(err, ErrUnknownAPIKey):
			writeJSON(w, "application/json", http.StatusNotFound, RejectedBody{Error: "unknown_api_key", Message: err.Error()})
		case errors.Is(err, ErrUnknownTier):
			writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_request", Message: err.Error()})
		case errors.Is(err, limiter.ErrNotSupported):
			writeJSON(w, "application/json", http.StatusNotImplemented, RejectedBody{Error: "not_implemented", Message: "usage: " + err.Error()})
		case err != nil:
			writeJSON(w, "application/json", http.StatusServiceUnavailable, RejectedBody{Error: "store_unavailable", Message: "usage: " + err.Error()})
		default:
			writeJSON(w, "application/json", http.StatusOK, rep)
		}
	})
}

// usageQuery reads key and plan_tier, and header.<Name> and claim.<name>, the values of
// header- and claim-scoped limits (nil scopes when none is given), refusing anything else.
func usageQuery(r *http.Request) (key, tier string, scopes *CheckRequest, err error) {
	q := r.URL.Query()
	for name := range q {
		h, isHeader := strings.CutPrefix(name, "header.")
		c, isClaim := strings.CutPrefix(name, "claim.")
		switch {
		case name == "key" || name == "plan_tier":
		case isHeader && ValidHeaderName(h):
			if scopes == nil {
				scopes = &CheckRequest{}
			}
			if scopes.Headers == nil {
				scopes.Headers = map[string]string{}
			}
			scopes.Headers[h] = q.Get(name)
		case isClaim && c != "":
			if scopes == nil {
				scopes = &CheckRequest{}
			}
			if scopes.Claims == nil {
				scopes.Claims = map[string]string{}
			}
			scopes.Claims[c] = q.Get(name)
		default:
			return "", "", nil, fmt.Errorf("unknown query parameter %q (only key, plan_tier, header.<Name> and claim.<name> are accepted)", name)
		}
	}
	key, tier = q.Get("key"), q.Get("plan_tier")
	switch {
	case key == "":
		return "", "", nil, errors.New("key: required, as ?key=user:42")
	case len(key) > MaxCheckKey:
		return "", "", nil, fmt.Errorf("key: longer than %d bytes", MaxCheckKey)
	}
	return key, tier, scopes, nil
}

// usageBody reads a UsageRequest strictly; its errors never quote the key.
func usageBody(w http.ResponseWriter, r *http.Request) (UsageRequest, error) {
	var req UsageRequest
	if r.URL.RawQuery != "" {
		return req, errors.New("a query: the API key goes in the body, never in the URL, where logs keep it")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxUsageRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var syntax *json.SyntaxError
		var unknown string
		switch {
		case errors.As(err, &syntax):
			return req, fmt.Errorf("body: not JSON at offset %d", syntax.Offset)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			unknown = strings.TrimPrefix(err.Error(), "json: unknown field ")
			return req, fmt.Errorf("body: unknown field %s (only api_key and plan_tier are accepted)", unknown)
		}
		return req, fmt.Errorf("body: want {\"api_key\": \"…\"} of at most %d bytes", MaxUsageRequestBytes)
	}
	switch {
	case req.APIKey == "":
		return req, errors.New("api_key: required, the key as the client sends it")
	case len(req.APIKey) > MaxCheckKey:
		return req, fmt.Errorf("api_key: longer than %d bytes", MaxCheckKey)
	}
	return req, nil
}
