package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// CheckPath is where serve mounts the decision API.
const CheckPath = "/v1/check"

// DecisionAPIPrefix is the prefix of every path of DecisionAPI; serve may move them under
// another (server.check_api.prefix), handing each handler its request at the path here.
const DecisionAPIPrefix = "/v1/"

// DecisionAPI is every path of the decision API and its handler: the one table a new path of
// the API is added to, so that serve guards and moves it with the others. Each handler reads
// the path it is listed at; forward-auth (AuthPath) answers its subtree too (Envoy's
// path_prefix). Every handler believes what it is told: mount them where CheckHandler is.
// Safe for concurrent use; each call builds the handlers anew.
func (m *Middleware) DecisionAPI() map[string]http.Handler {
	return map[string]http.Handler{
		CheckPath:   m.CheckHandler(),
		ReleasePath: m.ReleaseHandler(),
		CommitPath:  m.CommitHandler(),
		RenewPath:   m.RenewHandler(),
		UsagePath:   m.UsageHandler(),
		AuthPath:    m.AuthHandler(),
	}
}

// MaxCheckBody is the largest body of CheckPath; larger ones get 413. The requests that send a
// token back read MaxTokenBody.
const MaxCheckBody = 4 << 10

// MaxCheckKey is the longest key the decision API takes (longer: 400).
const MaxCheckKey = decision.MaxKey

// CheckRequest is the body of POST /v1/check.
type CheckRequest struct {
	// Key identifies the client, as is: the proxy's own keys are "user:<id>", "apikey:<hash>" and
	// "ip:<address>", so a caller passing the same string shares that client's budget. An
	// "ip:<address>" is grouped by IPv4Prefix and IPv6Prefix as the proxy groups it
	// ("ip:2001:db8:1:2::7" is decided as "ip:2001:db8:1:2::/64").
	Key string `json:"key"`
	// Endpoint is "METHOD /path" (a bare "/path" is a GET), matched against the routes like a
	// request; unmatched ones fall to the default class.
	Endpoint string `json:"endpoint"`
	// PlanTier is the client's plan tier. Empty: TierByKey's for Key (with or without "user:"),
	// else the default tier; unknown: the default tier.
	PlanTier string `json:"plan_tier"`
	Cost     *int64 `json:"cost"` // the units to take; default the class's Cost
	// DryRun answers as the check would without taking anything or counting in metrics: Allowed
	// says whether Cost would pass now and Remaining is what is left now.
	DryRun bool `json:"dry_run"`
	// Reserve takes Estimate (default: Cost, else the class's estimate or cost) in a reservation
	// that POST /v1/commit settles at the real cost: the answer carries its token. On a tier of
	// several limits each limit of UnitCost holds it, and the one token names them all.
	Reserve  bool   `json:"reserve"`
	Estimate *int64 `json:"estimate"`
	// Lease asks a concurrency limit for a lease, answered in CheckResponse.Lease: give it back
	// with POST ReleasePath {"lease": "<lease>"} when the request ends (unreleased, it holds its
	// slot for the limit's lease_ttl). Required for a concurrency limit, refused for others.
	Lease bool `json:"lease"`
	// Headers and Claims give the values of a tier's header- and claim-scoped limits
	// (TierLimit.Scope): {"X-Org-ID": "acme"}, {"org": "acme"}. Believed as Key is; a limit
	// without its value counts on Key's budget.
	Headers map[string]string `json:"headers,omitempty"`
	Claims  map[string]string `json:"claims,omitempty"`
}

// CheckResponse is the decision API's answer.
type CheckResponse struct {
	Allowed    bool           `json:"allowed"`     // may pass (true in shadow mode and on fail-open)
	Status     limiter.Status `json:"status"`      // allowed, rejected, shadow_rejected, fail_open, fail_closed
	Endpoint   string         `json:"endpoint"`    // the matched route pattern
	Class      string         `json:"class"`       // the route's class, also the RateLimit-Policy name
	PlanTier   string         `json:"plan_tier"`   // the tier applied
	Limit      int64          `json:"limit"`       // the quota
	Remaining  int64          `json:"remaining"`   // what could still be admitted now
	Reset      int64          `json:"reset"`       // seconds until the full quota is available again
	RetryAfter int64          `json:"retry_after"` // a refusal's Retry-After in seconds, else 0
	DelayMS    int64          `json:"delay_ms"`    // how long to hold a leaky_bucket admission

	Degraded bool   `json:"degraded,omitempty"` // the store failed: decided on this instance's share
	DryRun   bool   `json:"dry_run,omitempty"`  // nothing was taken
	Error    string `json:"error,omitempty"`    // on a 429 and a 503, as in their body
	Message  string `json:"message,omitempty"`  // on a 429 and a 503, as in their body
	// RefusedBy names the limits that refused, for a tier of several limits (TierLimit.Name).
	RefusedBy []string `json:"refused_by,omitempty"`

	Reservation string `json:"reservation,omitempty"` // a reserve's token for POST /v1/commit
	Lease       string `json:"lease,omitempty"`       // the lease taken for a "lease": true request
}

// methodNotAllowed answers a decision API request that is not a POST.
func methodNotAllowed(w http.ResponseWriter) {
	w.Header().Set("Allow", http.MethodPost)
	writeJSON(w, "application/json", http.StatusMethodNotAllowed, RejectedBody{Error: "method_not_allowed", Message: "use POST"})
}

// CheckHandler returns the decision API's check, served at CheckPath (ReleaseHandler releases
// leases): POST a CheckRequest as JSON (whatever the Content-Type) and get a CheckResponse with the headers the middleware would send: 200 when
// allowed, 429 when rejected, 503 when fail-closed, 400 for a bad body or for a reserve the
// class's limit cannot hold, 413 for one over MaxCheckBody, 501 for a dry run the store cannot
// peek. It believes the key and plan tier in the body, so mount it only where the clients it
// decides for cannot reach it (serve answers only the peers in server.check_api.allowed_peers).
func (m *Middleware) CheckHandler() http.Handler {
	var routes endpointRoutes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			methodNotAllowed(w)
			return
		}
		if r.URL.Path == ReleasePath {
			// Deprecated: embedders that mounted CheckHandler at ReleasePath too; mount
			// ReleaseHandler there. Kept for one release.
			m.serveRelease(w, r)
			return
		}
		req, status, err := readCheckRequest(w, r)
		if err != nil {
			writeJSON(w, "application/json", status, RejectedBody{Error: "bad_request", Message: err.Error()})
			return
		}
		p := m.policy.Load()
		req.Key = p.identity.clientKey(req.Key)
		rt, err := routes.match(p, req.Endpoint)
		if err != nil {
			writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_request", Message: err.Error()})
			return
		}
		a, err := p.checkAsk(rt, &req)
		if err != nil {
			writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_request", Message: err.Error()})
			return
		}
		if a.Set == nil && (a.Mode == limiter.ModeLease || req.Lease) {
			m.checkLease(w, r, p, rt, a, req)
			return
		}
		var o outcome
		m.decide(r.Context(), rt, req.Key, &a, &o)
		if req.DryRun && errors.Is(o.Err, limiter.ErrNotSupported) {
			writeJSON(w, "application/json", http.StatusNotImplemented, RejectedBody{Error: "not_implemented", Message: "dry_run: " + o.Err.Error()})
			return
		}
		var token, lease string
		if o.Reservation.ID != "" {
			token = o.reservationToken(req.Key)
		}
		if o.Lease.ID != "" {
			lease = tierLeaseToken(o.Lease, o.Tier)
		}
		code, body := p.respond(w.Header(), &o)
		if code == 0 {
			return // the caller is gone
		}
		writeCheckResponse(w, code, &CheckResponse{
			DryRun:   req.DryRun,
			Allowed:  !o.Verdict.Refuses(),
			Status:   o.Status(),
			Endpoint: o.Endpoint, Class: rt.class.name, PlanTier: o.Tier,
			Limit: o.n.Quota, Remaining: o.n.Remaining, Reset: o.n.Reset,
			RetryAfter: body.RetryAfter,
			DelayMS:    o.Decision.Delay.Milliseconds(),
			Degraded:   o.Decision.Failure == limiter.FailureLocal,
			Error:      body.Error, Message: body.Message,
			RefusedBy:   o.RefusedBy,
			Reservation: token,
			Lease:       lease,
		})
	})
}

// checkAsk is the Ask req makes of rt: on the tier it names (else its key's), at the cost and in
// the mode it asks for. An error is the caller's 400; checkLease answers a lease.
func (p *Policy) checkAsk(rt route, req *CheckRequest) (decision.Ask, error) {
	tier := p.tier(req.PlanTier)
	if req.PlanTier == "" {
		tier = p.tier(p.identity.tierOf("", strings.TrimPrefix(req.Key, "user:"), ""))
	}
	a := rt.ask(tier, req.Key)
	if rt.class.sets != nil {
		a, _ = rt.askScoped(tier, req.Key, req.scopes())
	}
	if a.Set != nil {
		return a, req.setAsk(&a, rt, tier)
	}
	switch {
	case a.Mode == limiter.ModeLease && req.Reserve:
		return a, errors.New(leaseNotReservation(rt.class.name, tier))
	case a.Mode == limiter.ModeLease || req.Lease:
		return a, nil
	case req.Reserve && !rt.class.costFrom.IsZero():
		a.Cost = rt.class.estimate.Default
	}
	if req.Cost != nil {
		a.Cost = *req.Cost
	}
	if req.Estimate != nil && req.Reserve {
		a.Cost = *req.Estimate
	}
	if err := a.Limiter.Limit().CheckCost(a.Cost); err != nil { // the limit the client is on, live change included
		return a, fmt.Errorf("cost: %w", err)
	}
	switch {
	case req.Reserve && req.DryRun:
		return a, errors.New("reserve: a dry run reserves nothing")
	case req.Reserve && !a.Limiter.Reserves():
		return a, errors.New(cannotReserve(rt.class.name, tier, a.Limiter.Limit()))
	case req.Reserve:
		a.Mode = limiter.ModeReserve
		return a, tokenFits(&a, req.Key)
	case req.DryRun:
		a.Mode = limiter.ModePeek
	}
	return a, nil
}

func readCheckRequest(w http.ResponseWriter, r *http.Request) (CheckRequest, int, error) {
	var req CheckRequest
	buf := checkBodies.Get().(*[]byte)
	body, err := readBody((*buf)[:0], http.MaxBytesReader(w, r.Body, MaxCheckBody))
	*buf = body[:0]
	defer checkBodies.Put(buf)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", MaxCheckBody)
		}
		return req, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if !decodePlainCheckRequest(body, &req) {
		// encoding/json keeps what it decodes into on the heap: a copy of its own, so that req
		// stays on the stack for the usual bodies, which decodePlainCheckRequest reads.
		dst := new(CheckRequest)
		*dst = req
		status, err := decodeCheckRequest(body, dst)
		req = *dst
		if err != nil {
			return req, status, err
		}
	}
	switch {
	case req.Key == "":
		return req, http.StatusBadRequest, errors.New("key: required")
	case len(req.Key) > MaxCheckKey:
		return req, http.StatusBadRequest, fmt.Errorf("key: longer than %d bytes", MaxCheckKey)
	case req.Endpoint == "":
		return req, http.StatusBadRequest, errors.New(`endpoint: required, as "METHOD /path"`)
	}
	return req, 0, nil
}

// decodeCheckRequest decodes a JSON check request in body into req, no unknown field and nothing
// after the object; an error is the caller's, with its status.
func decodeCheckRequest(body []byte, req *CheckRequest) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return http.StatusBadRequest, fmt.Errorf("body is not a JSON check request: %w", err)
	}
	// More() would miss a stray '}' or ']': only whitespace may follow.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return http.StatusBadRequest, errors.New("body has data after the JSON object")
	}
	return 0, nil
}

// endpointRoutes remembers the routes of the endpoints a decision API is asked about, under the
// policy in force, because callers ask about the same endpoints over and over and a lookup is
// far cheaper than a ServeMux match (BenchmarkMatchEndpoint). A reload makes a new policy, which
// starts a new set. At most maxRememberedEndpoints of up to decision.MaxRememberedName bytes are
// kept per policy, so that callers naming endpoints at random grow nothing; the others are
// matched every time. Safe for concurrent use; the zero value is ready.
type endpointRoutes struct {
	cur atomic.Pointer[policyRoutes]
}

// policyRoutes are the endpoints remembered under one policy.
type policyRoutes struct {
	p      *Policy
	routes sync.Map // endpoint → route
	n      atomic.Int32
}

const maxRememberedEndpoints = 4096

// match is p.matchEndpoint(ep), remembered.
func (e *endpointRoutes) match(p *Policy, ep string) (route, error) {
	cur := e.cur.Load()
	if cur == nil || cur.p != p {
		fresh := &policyRoutes{p: p}
		if !e.cur.CompareAndSwap(cur, fresh) {
			return p.matchEndpoint(ep) // another request is switching: rare
		}
		cur = fresh
	}
	if rt, ok := cur.routes.Load(ep); ok {
		return rt.(route), nil
	}
	rt, err := p.matchEndpoint(ep)
	if err == nil && len(ep) <= decision.MaxRememberedName && cur.n.Load() < maxRememberedEndpoints {
		if _, loaded := cur.routes.LoadOrStore(ep, rt); !loaded {
			cur.n.Add(1)
		}
	}
	return rt, err
}

// probe is a request built only to be matched against the routes.
type probe struct {
	req http.Request
	url url.URL
}

var probes = sync.Pool{New: func() any { return new(probe) }}

// matchEndpoint finds the route of "METHOD /path": a path that needs no unescaping with a
// pooled request, without parsing it as a URL; any other through endpointRequest.
func (p *Policy) matchEndpoint(ep string) (route, error) {
	method, path, ok := strings.Cut(strings.TrimSpace(ep), " ")
	if !ok {
		method, path = http.MethodGet, method
	}
	path = strings.TrimSpace(path)
	if !isToken(method) || !plainPath(path) {
		r, err := p.endpointRequest(ep)
		if err != nil {
			return route{}, err
		}
		return p.match(r), nil
	}
	pr := probes.Get().(*probe)
	pr.url = url.URL{Path: path}
	_ = p.paths.normalize(&pr.url) // a plain path has no escape to refuse
	pr.req = http.Request{Method: strings.ToUpper(method), URL: &pr.url}
	rt := p.match(&pr.req)
	pr.req, pr.url = http.Request{}, url.URL{}
	probes.Put(pr)
	return rt, nil
}

// plainPath reports whether path starts with '/' and is its own parsed form: only bytes that
// stand for themselves in a URL path (no escapes, query or fragment).
func plainPath(path string) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// endpointRequest turns "METHOD /path" into a request to match, its path normal (Paths).
func (p *Policy) endpointRequest(ep string) (*http.Request, error) {
	method, path, ok := strings.Cut(strings.TrimSpace(ep), " ")
	if !ok {
		method, path = http.MethodGet, method
	}
	path = strings.TrimSpace(path)
	if !isToken(method) {
		return nil, fmt.Errorf("endpoint %q: want \"METHOD /path\" with an HTTP method such as GET", ep)
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("endpoint %q: path must start with /", ep)
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: path is not a valid URL path: %v", ep, errors.Unwrap(err))
	}
	r := &http.Request{Method: strings.ToUpper(method), URL: &url.URL{Path: u.Path, RawPath: u.RawPath}, Header: http.Header{}}
	if err := p.paths.normalize(r.URL); err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", ep, err)
	}
	return r, nil
}

// isToken reports whether s is an HTTP token (RFC 9110, 5.6.2), as a request method must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
