package httplimit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// ReleasePath is where serve mounts the release of a lease the decision API gave.
const ReleasePath = "/v1/release"

// QuotaUnitConcurrent is the RateLimit-Policy quota unit ("qu") of a concurrency limit: the
// draft's unit for requests in flight, with no window ("w") and no reset ("t").
const QuotaUnitConcurrent = "concurrent-requests"

// compileLeases makes c's concurrency limits, one limiter.Leases per tier.
func (p *Policy) compileLeases(cl *class, cfg PolicyConfig, c Class) error {
	for tier, lim := range c.Leases {
		if !p.tiers[tier] {
			return fmt.Errorf("policy: class %q: concurrency limit for unknown tier %q", c.Name, tier)
		}
		if _, both := c.Limits[tier]; both {
			return fmt.Errorf("policy: class %q tier %q: both a rate limit and a concurrency limit", c.Name, tier)
		}
		l, err := limiter.NewLeases(limiter.LeasesConfig{Limit: lim, Store: c.storeFor(tier, cfg.Store),
			FailPolicy: cfg.FailPolicy, Timeout: cfg.Timeout, Observer: cfg.Observer, Guard: cfg.Guard})
		if err != nil {
			return fmt.Errorf("policy: class %q tier %q: %w", c.Name, tier, err)
		}
		if cl.leases == nil {
			cl.leases = map[string]*limiter.Leases{}
		}
		cl.leases[tier] = l
	}
	cl.dfltLeases = cl.leases[cfg.DefaultTier]
	return nil
}

// leasesFor returns tier's concurrency limit, or nil when the tier is rate limited.
func (c *class) leasesFor(tier string) *limiter.Leases {
	if c.leases == nil { // a class of rate limits alone: one comparison per request
		return nil
	}
	if l, ok := c.leases[tier]; ok {
		return l
	}
	if _, ok := c.byTier[tier]; ok {
		return nil
	}
	if _, ok := c.sets[tier]; ok {
		return nil
	}
	return c.dfltLeases
}

// EndpointLease is a concurrency limit in force on an endpoint for a tier.
type EndpointLease struct {
	Endpoint, Class, PlanTier string
	Limit                     limiter.LeaseLimit
	Shadow                    bool
}

// LeaseLimits lists every endpoint × tier under a concurrency limit, as Limits lists the rate
// limits, sorted.
func (p *Policy) LeaseLimits() []EndpointLease {
	var out []EndpointLease
	for _, pat := range p.Endpoints() {
		c := p.routes[pat]
		for _, t := range p.tierNames {
			if l := c.leasesFor(t); l != nil {
				out = append(out, EndpointLease{Endpoint: pat, Class: c.name, PlanTier: t, Limit: l.Limit(), Shadow: c.shadow})
			}
		}
	}
	return out
}

// passes reports whether a request o decided goes on.
func passes(o *decision.Outcome) bool { return !o.Verdict.Refuses() && !o.Verdict.Drops() }

// acquire takes the lease a asks for, and traces and records the decision once.
func (m *Middleware) acquire(ctx context.Context, rt route, a decision.Ask) decision.Outcome {
	ctx, end := m.rep.Trace.Start(ctx, a, limiter.Limit{Algorithm: limiter.Concurrency, Rate: a.Leases.Limit().Limit})
	o := decision.Decide(ctx, a)
	o.EndTrace(end)
	m.rep.Record(ctx, &o)
	if o.Verdict == decision.VerdictRejected || o.Verdict == decision.VerdictShadowClassOver {
		if m.logger.Enabled(ctx, slog.LevelDebug) {
			m.logger.LogAttrs(ctx, slog.LevelDebug, "concurrency limited",
				slog.String("endpoint", o.Endpoint), slog.String("class", rt.class.name), slog.String("plan_tier", o.Tier),
				slog.String("key", o.Key), slog.Bool("shadow", o.Shadow), slog.Int64("in_flight", o.Leased.InFlight))
		}
	}
	return o
}

// release gives o's lease back on a context that outlives the request: a client gone away must
// still free its slot. Whatever the store answers, this instance no longer holds the lease (the
// Reporter counts it out); one the store failed to drop is counted expired by a later call on
// its key.
func (m *Middleware) release(ctx context.Context, o *decision.Outcome) {
	if o.Lease.ID == "" {
		return
	}
	a := o.Ask
	a.Lease = o.Lease
	if a.Leases == nil && a.Set != nil && a.Set.Lease != nil {
		a.Leases, a.Mode = a.Set.Lease.Leases, limiter.ModeLease
	}
	if r := m.rep.Release(context.WithoutCancel(ctx), a); r.Err != nil {
		m.logger.LogAttrs(ctx, slog.LevelDebug, "lease not released",
			slog.String("endpoint", o.Endpoint), slog.String("plan_tier", o.Tier), slog.String("error", r.Err.Error()))
	}
}

// writeLeaseHeaders sets what the enabled header families can honestly say of a concurrency
// limit: the limit and the slots free now. RateLimit-Policy names the quota unit and has no
// window, RateLimit has no reset, and the X- and legacy families leave their Reset out.
func (p *Policy) writeLeaseHeaders(h http.Header, class string, d limiter.LeaseDecision) {
	limit, remaining := strconv.FormatInt(d.Limit, 10), strconv.FormatInt(d.Remaining(), 10)
	if !p.headers.OmitXRateLimit {
		h[decision.HeaderXLimit] = []string{limit}
		h[decision.HeaderXRemaining] = []string{remaining}
	}
	if !p.headers.OmitRateLimit {
		h[decision.HeaderPolicy] = []string{`"` + class + `";q=` + limit + `;qu="` + QuotaUnitConcurrent + `"`}
		h[decision.HeaderRateLimit] = []string{`"` + class + `";r=` + remaining}
	}
	if p.headers.Legacy {
		h[decision.HeaderLegacyLimit] = []string{limit}
		h[decision.HeaderLegacyRemaining] = []string{remaining}
	}
	if !d.Allowed {
		h[decision.HeaderRetryAfter] = []string{strconv.FormatInt(leaseRetrySeconds(d), 10)}
	}
}

func leaseRetrySeconds(d limiter.LeaseDecision) int64 {
	return decision.RetryAfterSeconds(limiter.Decision{RetryAfter: d.RetryAfter})
}

// respondLease sets the headers answering o and returns the status and a refusal's body, as
// respond does for a rate limit.
func (p *Policy) respondLease(h http.Header, rt route, o *decision.Outcome) (int, RejectedBody) {
	switch o.Verdict {
	case decision.VerdictCanceled:
		return 0, RejectedBody{}
	case decision.VerdictFailOpen:
		return http.StatusOK, RejectedBody{}
	case decision.VerdictFailClosed:
		h.Set(decision.HeaderRetryAfter, "1")
		h.Set("Cache-Control", "no-store")
		return http.StatusServiceUnavailable, RejectedBody{
			Error: "rate_limit_unavailable", Message: "the rate limiter cannot decide right now; retry later", RetryAfter: 1,
		}
	case decision.VerdictRejected:
		p.writeLeaseHeaders(h, rt.class.name, o.Leased)
		h.Set("Cache-Control", "no-store")
		retry := leaseRetrySeconds(o.Leased)
		return http.StatusTooManyRequests, RejectedBody{
			Error:      "concurrency_limit_exceeded",
			Message:    fmt.Sprintf("%d requests already in flight on %s; retry in %d s", o.Leased.InFlight, o.Endpoint, retry),
			RetryAfter: retry,
		}
	case decision.VerdictAllowed:
		p.writeLeaseHeaders(h, rt.class.name, o.Leased)
	}
	return http.StatusOK, RejectedBody{}
}

// serveLeased admits r under a concurrency limit: a lease for as long as next serves it, renewed
// every third of its TTL meanwhile and given back when next returns, which for the proxy is when
// the response body is done or the client went away (its context cancels the upstream request).
// Only a holder that is gone (killed, cut off from the store) lets its lease run out.
func (m *Middleware) serveLeased(w http.ResponseWriter, r *http.Request, p *Policy, rt route, a decision.Ask, next http.Handler) {
	o := m.acquire(r.Context(), rt, a)
	switch code, body := p.respondLease(w.Header(), rt, &o); code {
	case 0:
		return
	case http.StatusTooManyRequests:
		p.writeLeaseRejected(w, rt, code, body)
		return
	case http.StatusServiceUnavailable:
		writeJSON(w, "application/json", code, body)
		return
	}
	defer m.release(r.Context(), &o)
	defer o.Leases.Keep(o.Lease)() // stopped before the release above
	next.ServeHTTP(w, r)
}

// leaseToken is what the decision API hands out for a lease: its id and its key, so that any
// instance can release it. The id is what makes it unguessable; the key is the caller's own.
func leaseToken(l limiter.Lease) string {
	return l.ID + "." + base64.RawURLEncoding.EncodeToString([]byte(l.Key))
}

// tierLeaseToken is leaseToken of a lease on tier's concurrency limit of several: a key scoped
// beyond the client (global, header, claim) names no tier ("*"), so the token adds it.
func tierLeaseToken(l limiter.Lease, tier string) string {
	tok := leaseToken(l)
	if parts := strings.SplitN(l.Key, "|", 3); len(parts) == 3 && parts[1] != tier {
		tok += "." + base64.RawURLEncoding.EncodeToString([]byte(tier))
	}
	return tok
}

// parseLeaseToken is leaseToken's (and tierLeaseToken's) inverse: the lease and the class and
// tier its key (or its tier part) names.
func parseLeaseToken(tok string) (lease limiter.Lease, class, tier string, err error) {
	id, rest, ok := strings.Cut(tok, ".")
	enc, encTier, hasTier := strings.Cut(rest, ".")
	key, derr := base64.RawURLEncoding.DecodeString(enc)
	if !ok || len(id) != 32 || derr != nil || strings.Trim(id, "0123456789abcdef") != "" {
		return lease, "", "", errors.New("lease: not a lease from this API")
	}
	parts := strings.SplitN(string(key), "|", 3)
	if len(parts) != 3 {
		return lease, "", "", errors.New("lease: not a lease from this API")
	}
	tier = parts[1]
	if hasTier {
		t, terr := base64.RawURLEncoding.DecodeString(encTier)
		if terr != nil || len(t) == 0 || parts[1] != "*" {
			return lease, "", "", errors.New("lease: not a lease from this API")
		}
		tier = string(t)
	}
	return limiter.Lease{ID: id, Key: string(key)}, parts[0], tier, nil
}

// writeLeaseRejected writes a concurrency refusal's body with status code (429, or forward-auth's
// DenyStatusHeader) in the configured form.
func (p *Policy) writeLeaseRejected(w http.ResponseWriter, rt route, code int, body RejectedBody) {
	if !p.headers.ProblemJSON {
		writeJSON(w, "application/json", code, body)
		return
	}
	writeJSON(w, "application/problem+json", code, ProblemBody{
		Type: QuotaExceededType, Title: "Request cannot be satisfied as assigned quota has been exceeded",
		Status: code, Detail: body.Message, ViolatedPolicies: []string{rt.class.name}, RetryAfter: body.RetryAfter,
	})
}

// authorizeLease answers forward-auth on a concurrency limit: a lease, its token in LeaseHeader
// for the gateway to give back, or the refusal with deny's status.
func (m *Middleware) authorizeLease(w http.ResponseWriter, r *http.Request, p *Policy, rt route, a decision.Ask, deny int) {
	o := m.acquire(r.Context(), rt, a)
	switch code, body := p.respondLease(w.Header(), rt, &o); code {
	case 0:
	case http.StatusTooManyRequests:
		p.writeLeaseRejected(w, rt, deny, body)
	case http.StatusServiceUnavailable:
		writeJSON(w, "application/json", code, body)
	default:
		if o.Lease.ID != "" {
			w.Header().Set(LeaseHeader, leaseToken(o.Lease))
		}
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(code)
	}
}

// checkLease answers a decision API request on a concurrency limit (a.Leases; nil when the tier
// is rate limited, which a "lease": true request is told).
func (m *Middleware) checkLease(w http.ResponseWriter, r *http.Request, p *Policy, rt route, a decision.Ask, req CheckRequest) {
	bad := func(status int, code, msg string) {
		writeJSON(w, "application/json", status, RejectedBody{Error: code, Message: msg})
	}
	switch {
	case a.Leases == nil:
		bad(http.StatusBadRequest, "bad_request", fmt.Sprintf("lease: class %s tier %s has a rate limit, not a concurrency limit", rt.class.name, a.Tier))
		return
	case req.DryRun:
		bad(http.StatusNotImplemented, "not_implemented", "dry_run: a concurrency limit takes a lease or refuses; it cannot be peeked")
		return
	case !req.Lease:
		bad(http.StatusBadRequest, "bad_request", fmt.Sprintf(`lease: class %s tier %s is a concurrency limit: ask with "lease": true and give the lease back with POST %s`, rt.class.name, a.Tier, ReleasePath))
		return
	}
	o := m.acquire(r.Context(), rt, a)
	code, body := p.respondLease(w.Header(), rt, &o)
	if code == 0 {
		return
	}
	resp := &CheckResponse{
		Allowed: passes(&o), Status: o.Status(), Endpoint: o.Endpoint, Class: rt.class.name, PlanTier: o.Tier,
		Limit: o.Leased.Limit, Remaining: o.Leased.Remaining(), RetryAfter: body.RetryAfter,
		Degraded: o.Leased.Failure == limiter.FailureLocal, Error: body.Error, Message: body.Message,
	}
	if o.Lease.ID != "" {
		resp.Lease = leaseToken(o.Lease)
	}
	writeCheckResponse(w, code, resp)
}

// ReleaseRequest is the body of POST ReleasePath; a gateway that cannot write JSON sends no body
// and the lease in LeaseHeader instead.
type ReleaseRequest struct {
	Lease string `json:"lease"` // CheckResponse.Lease
}

// ReleaseResponse is the answer to a release: 200 when the lease was held, 404 (Error
// "lease_unknown") when it was released already or expired, 503 when the store failed (the lease
// then expires at its TTL).
type ReleaseResponse struct {
	Released bool   `json:"released"`
	Error    string `json:"error,omitempty"`
	Message  string `json:"message,omitempty"`
}

func (m *Middleware) serveRelease(w http.ResponseWriter, r *http.Request) {
	req, err := readReleaseRequest(w, r)
	if err != nil {
		writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_request", Message: err.Error()})
		return
	}
	status, resp := m.releaseLease(r.Context(), req.Lease)
	if status == http.StatusServiceUnavailable {
		w.Header().Set(decision.HeaderRetryAfter, "1")
	}
	writeJSON(w, "application/json", status, resp)
}

// releaseLease releases the lease token names and answers what ReleaseHandler answers for it:
// 200, 400 for a token that is none, 404 for a lease unknown to the policy or the store, 503
// when the store failed (the lease then expires at its lease_ttl).
func (m *Middleware) releaseLease(ctx context.Context, token string) (int, ReleaseResponse) {
	lease, className, tier, err := parseLeaseToken(token)
	if err != nil {
		return http.StatusBadRequest, ReleaseResponse{Error: "bad_request", Message: err.Error()}
	}
	ls, endpoint := m.policy.Load().leasesOf(lease, className, tier)
	if ls == nil {
		return http.StatusNotFound, ReleaseResponse{Error: "lease_unknown",
			Message: fmt.Sprintf("class %s tier %s has no concurrency limit in force", className, tier)}
	}
	// The token is the caller's word (FromToken): a lease the store does not hold (released
	// already, expired, or made up) takes nothing off this instance's in-flight count.
	o := m.rep.Release(context.WithoutCancel(ctx), decision.Ask{Endpoint: endpoint, Tier: tier, Key: lease.Key,
		Mode: limiter.ModeLease, Leases: ls, Lease: lease, FromToken: true})
	switch {
	case o.Verdict == decision.VerdictRejected:
		return http.StatusNotFound, ReleaseResponse{Error: "lease_unknown", Message: limiter.ErrLeaseUnknown.Error()}
	case o.Err != nil:
		return http.StatusServiceUnavailable, ReleaseResponse{Error: "rate_limit_unavailable",
			Message: "the store cannot release the lease right now; it expires at its lease_ttl"}
	}
	return http.StatusOK, ReleaseResponse{Released: true}
}

// leasesOf finds the concurrency limit a lease token's class and tier name, and the endpoint its
// metrics are labelled with; nil when the policy in force has none.
func (p *Policy) leasesOf(lease limiter.Lease, className, tier string) (*limiter.Leases, string) {
	var ls *limiter.Leases
	var endpoint string
	for _, c := range p.classes {
		if c.name == className && p.tiers[tier] {
			ls = c.leasesFor(tier)
			if ts := c.setFor(tier); ts != nil && ts.lease != nil && strings.HasSuffix(lease.Key, "|"+ts.lease.name) {
				ls = ts.lease.leases
			}
			if len(c.routes) > 0 {
				endpoint = c.routes[0]
			}
		}
	}
	if ep := leaseEndpoint(lease.Key, p, className); ep != "" {
		endpoint = ep
	}
	return ls, endpoint
}

// readReleaseRequest reads the JSON body, or the LeaseHeader of a body-less release (nginx's
// post_action cannot write JSON).
func readReleaseRequest(w http.ResponseWriter, r *http.Request) (ReleaseRequest, error) {
	var req ReleaseRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxTokenBody))
	if err != nil {
		return req, fmt.Errorf("read body: %w", err)
	}
	if r.Header.Values(LeaseHeader) != nil {
		if len(bytes.TrimSpace(body)) > 0 {
			return req, fmt.Errorf("a JSON body or the %s header, not both", LeaseHeader)
		}
		req.Lease, err = oneValue(r.Header, http.CanonicalHeaderKey(LeaseHeader))
		if err == nil && req.Lease == "" {
			err = fmt.Errorf("%s: empty", LeaseHeader)
		}
		return req, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("body is not a JSON release request (or send the %s header without a body): %w", LeaseHeader, err)
	}
	return req, nil
}

// leaseEndpoint is the route a lease's key names (the metric label of its release), "" when
// the class is shared or the route is gone.
func leaseEndpoint(key string, p *Policy, className string) string {
	parts := strings.SplitN(key, "|", 4)
	if len(parts) != 4 {
		return ""
	}
	for pat, c := range p.routes {
		if c.name == className && c.keyEndpoints[pat] == parts[2] {
			return pat
		}
	}
	return ""
}
