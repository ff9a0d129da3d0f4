package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// AuthPath is where serve mounts the forward-auth endpoint. Envoy's ext_authz (HTTP) with
// path_prefix AuthPath asks about the original path under it: AuthPath + "/orders/42".
const AuthPath = "/v1/auth"

// DenyStatusHeader, sent by a gateway with the value 401 or 403, makes /v1/auth answer a
// refusal with that status instead of 429: nginx's auth_request passes on only 401 and 403
// and turns any other status into a 500 with an error line.
const DenyStatusHeader = "X-Deny-Status"

// ReservationHeader carries the token of the reservation /v1/auth opened for a class with
// CostFrom (on a tier of several limits, of each limit of UnitCost); the gateway sends it back,
// with CostHeader, in a POST CommitPath without a body.
const ReservationHeader = "X-RateLimit-Reservation"

// CostHeader is the real cost of a reservation settled by headers; missing or not a number ≥ 0,
// the reservation settles at its estimate and counts as a cost unknown.
const CostHeader = "X-RateLimit-Cost"

// LeaseHeader carries the token of the lease /v1/auth took for a tier under a concurrency
// limit; the gateway sends it back in a POST ReleasePath without a body once the response is over.
const LeaseHeader = "X-RateLimit-Lease"

// The headers a gateway names the original request in: nginx's auth_request (X-Original-*,
// by its documented configuration) and Caddy's forward_auth and Traefik's ForwardAuth
// (X-Forwarded-*).
const (
	headerOriginalURI     = "X-Original-Uri"
	headerOriginalMethod  = "X-Original-Method"
	headerForwardedURI    = "X-Forwarded-Uri"
	headerForwardedMethod = "X-Forwarded-Method"
	headerForwardedHost   = "X-Forwarded-Host"
)

// AuthHandler returns the forward-auth endpoint for gateways that ask an outside service
// whether a request may pass. It reads no body and takes any method. The original request is
// the path under AuthPath (Envoy's ext_authz, with the request's own method and Host), else
// X-Original-URI and X-Original-Method with the Host (nginx), else X-Forwarded-Uri,
// X-Forwarded-Method and X-Forwarded-Host (Caddy, Traefik). The client is identified from the
// request as the middleware identifies it, the gateway being its peer (a trusted proxy). The
// answer is the middleware's: 200 with the rate-limit headers and no body (and LeaseHeader on a
// concurrency limit), 429 (or DenyStatusHeader's 401 or 403) with Retry-After and the JSON
// body, 503 when fail-closed, after a leaky_bucket delay when there is one. A request it
// cannot place (both header families at once, for one of them is a client's; a URI that is no
// path, a bad escape, a method that is no token) is refused through DenyAuth, never answered
// 400: a gateway takes any status outside its contract as the limiter's failure. Safe for
// concurrent use; it believes forwarded headers, so serve answers it only for the decision
// API's peers.
func (m *Middleware) AuthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deny, err := denyStatus(r.Header)
		if err == nil {
			err = m.authorize(w, r, deny)
		}
		if err != nil {
			m.DenyAuth(w, r, DenyBadRequest, err.Error())
		}
	})
}

// DenyReason says why /v1/auth refused a request without deciding it: the value of the
// reason label of rate_limit_auth_denied_total and of the body's "error".
type DenyReason uint8

// The reasons of DenyAuth.
const (
	// DenyRequestTooLarge: a head past the bounds of the listener serving AuthPath, or a
	// reservation whose token, of the client's key and scope values, would be past
	// MaxReservationToken.
	DenyRequestTooLarge DenyReason = iota
	// DenyBadPath: an original path refused as the upstream would read it otherwise.
	DenyBadPath
	// DenyBadRequest: an original request that cannot be placed (no URI, a bad escape, a
	// method that is no token, a forged second header family, a bad DenyStatusHeader).
	DenyBadRequest
	// DenyInternal: the handling panicked.
	DenyInternal
	denyReasons // the number of reasons
)

var denyReasonNames = [denyReasons]string{"request_too_large", "bad_path", "bad_request", "internal"}

// String is the reason's label value, such as "request_too_large".
func (d DenyReason) String() string {
	if d < denyReasons {
		return denyReasonNames[d]
	}
	return "unknown"
}

// DenyReasons returns every DenyReason, in order.
func DenyReasons() []DenyReason {
	out := make([]DenyReason, denyReasons)
	for i := range out {
		out[i] = DenyReason(i)
	}
	return out
}

// DenyAuth refuses the forward-auth request r without a decision: the status the gateway
// passes on as a refusal (DenyStatusHeader's 401 or 403, else 429), Cache-Control: no-store
// and the JSON body {"error": reason, "message": detail}. It counts the refusal (AuthDenied)
// and logs it, summarised (the first at once, then a line per Config.LogInterval). Every
// refusal of AuthPath that is not a decision goes through it, so that nothing a client can
// shape reaches a gateway as a 4xx or 5xx outside its contract. Safe for concurrent use.
func (m *Middleware) DenyAuth(w http.ResponseWriter, r *http.Request, reason DenyReason, detail string) {
	if reason >= denyReasons {
		reason = DenyBadRequest
	}
	m.authDenied[reason].Add(1)
	m.denyLog.Log(r.Context(), "forward-auth refused a request it could not decide", []slog.Attr{
		slog.String("reason", reason.String()), slog.String("detail", detail)})
	code, err := denyStatus(r.Header)
	if err != nil {
		code = http.StatusTooManyRequests
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, "application/json", code, RejectedBody{Error: reason.String(), Message: detail})
}

// AuthDenied returns how many forward-auth requests DenyAuth refused for reason.
// Safe for concurrent use.
func (m *Middleware) AuthDenied(reason DenyReason) uint64 {
	if reason >= denyReasons {
		return 0
	}
	return m.authDenied[reason].Load()
}

// authorize decides the request r names and answers it; an error is the caller's DenyBadRequest.
func (m *Middleware) authorize(w http.ResponseWriter, r *http.Request, deny int) error {
	p := m.policy.Load()
	pr := probes.Get().(*probe)
	defer func() {
		pr.req, pr.url = http.Request{}, url.URL{}
		probes.Put(pr)
	}()
	if err := originalRequest(r, pr); err != nil {
		return err
	}
	if err := p.paths.normalize(&pr.url); err != nil {
		m.DenyAuth(w, r, DenyBadPath, err.Error())
		return nil
	}
	rt := p.match(&pr.req)
	c, ok := m.identify(w, r, p)
	if !ok {
		return nil
	}
	var a decision.Ask
	m.askOf(&a, r, p, rt, c)
	switch {
	case a.Mode == limiter.ModeLease:
		m.authorizeLease(w, r, p, rt, a, deny)
		return nil
	case !rt.class.costFrom.IsZero():
		// No body reaches forward-auth: a JSON estimate is its default.
		est := rt.class.estimate
		est.JSON = ""
		a.Mode, a.Cost = limiter.ModeReserve, m.estimate(r, est, a)
		if err := tokenFits(&a, c.key); err != nil {
			// Refused before anything is held: a token the gateway could not send back would
			// leave the estimate held until its hold ends.
			m.DenyAuth(w, r, DenyRequestTooLarge, err.Error())
			return nil
		}
	case m.cost != nil:
		orig := r.Clone(r.Context())
		orig.Method, orig.Host, orig.URL = pr.req.Method, pr.req.Host, &pr.url
		a.Cost = m.cost(orig)
	}
	var o outcome
	m.decide(r.Context(), rt, c.key, &a, &o)
	m.answerAuth(w, r, p, &o, c.key, deny)
	return nil
}

// answerAuth answers a forward-auth request decided as o for client: the tokens of what an
// admitted request holds, a refusal with the deny status, or an admission after any leaky-bucket
// delay forward-auth can hold.
func (m *Middleware) answerAuth(w http.ResponseWriter, r *http.Request, p *Policy, o *outcome, client string, deny int) {
	code, body := p.respond(w.Header(), o)
	if code == http.StatusOK && o.Reservation.ID != "" {
		w.Header().Set(ReservationHeader, o.reservationToken(client))
	}
	if code == http.StatusOK && o.Lease.ID != "" {
		w.Header().Set(LeaseHeader, tierLeaseToken(o.Lease, o.Tier))
	}
	switch code {
	case 0:
	case http.StatusTooManyRequests:
		writeRejectedStatus(p.headers, w, deny, o.n, body)
	case http.StatusServiceUnavailable:
		writeJSON(w, "application/json", code, body)
	default:
		if o.Decision.Delay > AuthMaxDelay && o.Verdict.Limited() {
			// The queued slot stays taken: a client that queues deep spends its own budget.
			m.cancel(r.Context(), o)
			m.release(r.Context(), &o.Outcome)
			w.Header().Del(LeaseHeader)
			retry := decision.CeilSeconds(o.Decision.Delay)
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
			writeJSON(w, "application/json", deny, RejectedBody{Error: "rate_limit_exceeded", RetryAfter: retry,
				Message: fmt.Sprintf("queued %s behind the requests before it, past the %s forward-auth holds an answer", o.Decision.Delay.Round(time.Millisecond), AuthMaxDelay)})
			return
		}
		if o.Decision.Delay > 0 && o.Verdict.Limited() {
			t := time.NewTimer(o.Decision.Delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				m.cancel(r.Context(), o)
				m.release(r.Context(), &o.Outcome)
				return
			}
		}
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(code)
	}
}

// AuthMaxDelay is the longest forward-auth holds an answer for a leaky bucket's delay. A
// gateway that waits longer for its auth request gives up and takes its failure path (nginx's
// 504), which may let the request through: a request queued further back is refused instead,
// with the deny status and Retry-After at its turn. Below the shortest gateway timeout the
// examples set (nginx's 5s).
const AuthMaxDelay = time.Second

// denyStatus is the status a refusal gets: DenyStatusHeader's 401 or 403, else 429.
func denyStatus(h http.Header) (int, error) {
	switch v := h.Get(DenyStatusHeader); v {
	case "", "429":
		return http.StatusTooManyRequests, nil
	case "401", "403":
		n, _ := strconv.Atoi(v)
		return n, nil
	default:
		return 0, fmt.Errorf("%s %q: want 401, 403 or 429", DenyStatusHeader, v)
	}
}

// originalRequest sets pr to the method, host and path of the request r asks about.
func originalRequest(r *http.Request, pr *probe) error {
	pr.req.Method, pr.req.Host = r.Method, r.Host
	if rest, ok := strings.CutPrefix(r.URL.Path, AuthPath); ok && strings.HasPrefix(rest, "/") {
		pr.url = url.URL{Path: rest}
		if raw, ok := strings.CutPrefix(r.URL.RawPath, AuthPath); ok {
			pr.url.RawPath = raw
		}
		pr.req.URL = &pr.url
		return nil
	}
	uriHeader, methodHeader := headerOriginalURI, headerOriginalMethod
	uri, err := oneValue(r.Header, headerOriginalURI)
	if err != nil {
		return err
	}
	fwd, err := oneValue(r.Header, headerForwardedURI)
	switch {
	case err != nil:
		return err
	case uri != "" && fwd != "":
		return fmt.Errorf("both X-Original-URI and %s given: a gateway sends one, so the other is a client's; drop it at the gateway", headerForwardedURI)
	case uri == "" && fwd == "":
		return fmt.Errorf("no original request: send X-Original-URI (nginx), %s (Caddy, Traefik) or the path under %s/ (Envoy ext_authz path_prefix)", headerForwardedURI, AuthPath)
	case fwd != "":
		uri, uriHeader, methodHeader = fwd, headerForwardedURI, headerForwardedMethod
		host, err := oneValue(r.Header, headerForwardedHost)
		if err != nil {
			return err
		}
		if host != "" {
			pr.req.Host = host
		}
	}
	method, err := oneValue(r.Header, methodHeader)
	if err != nil {
		return err
	}
	if method != "" {
		if !isToken(method) {
			return fmt.Errorf("%s %q: not an HTTP method", methodHeader, method)
		}
		pr.req.Method = strings.ToUpper(method)
	}
	pr.req.URL = &pr.url
	if path, _, _ := strings.Cut(uri, "?"); plainPath(path) {
		pr.url = url.URL{Path: path} // most paths: no parse, no allocation
		return nil
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil || !strings.HasPrefix(u.Path, "/") {
		return fmt.Errorf("%s %q: want the request's path, such as /orders/42?page=2", uriHeader, uri)
	}
	pr.url = url.URL{Path: u.Path, RawPath: u.RawPath}
	return nil
}

// errRepeated is a header a gateway sends once given several times.
var errRepeated = errors.New("given more than once")

// oneValue is the value of header h, "" when absent, an error when repeated.
func oneValue(hdr http.Header, h string) (string, error) {
	switch v := hdr[h]; len(v) {
	case 0:
		return "", nil
	case 1:
		return strings.TrimSpace(v[0]), nil
	default:
		return "", fmt.Errorf("%s: %w", h, errRepeated)
	}
}
