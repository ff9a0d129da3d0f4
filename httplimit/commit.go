package httplimit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// CommitPath is where serve mounts the settlement of the decision API's reservations.
const CommitPath = "/v1/commit"

// CommitRequest is the body of POST /v1/commit.
type CommitRequest struct {
	Reservation string `json:"reservation"` // the token a reserving check answered
	Cost        *int64 `json:"cost"`        // the real cost, ≥ 0; required unless Cancel
	Cancel      bool   `json:"cancel"`      // give the whole estimate back
}

// CommitResponse is the answer of POST /v1/commit: what settling did.
type CommitResponse struct {
	Endpoint string `json:"endpoint"`
	PlanTier string `json:"plan_tier"`
	Estimate int64  `json:"estimate"` // what was reserved
	Actual   int64  `json:"actual"`   // what it cost (0 for a cancel)
	Refunded int64  `json:"refunded"` // given back
	Charged  int64  `json:"charged"`  // taken beyond the estimate, even past the quota
	// Late: the reservation had expired before this commit (its policy charged or refunded the
	// estimate); Charged is what the cost took beyond that, at most one quota, now.
	Late bool `json:"late,omitempty"`
	// Limits, for a tier of several limits, is what the commit did on each limit that held the
	// estimate, in the tier's order; Refunded, Charged and Late above are then the first settled
	// one's. Absent for a tier of one limit.
	Limits []CommitLimit `json:"limits,omitempty"`
}

// CommitLimit is what a commit did on one limit of several (CommitResponse.Limits).
type CommitLimit struct {
	Name string `json:"name"` // the limit's (TierLimit.Name)
	// Settled is false when the store held no such reservation on the limit (settled, cancelled
	// or expired over a hold ago): the figures are then 0.
	Settled  bool  `json:"settled"`
	Estimate int64 `json:"estimate"`
	Actual   int64 `json:"actual"`
	Refunded int64 `json:"refunded"`
	Charged  int64 `json:"charged"`
	Late     bool  `json:"late,omitempty"`
}

// tokenPrefix starts every reservation token, naming its format.
const tokenPrefix = "r1."

// reservationToken is the token of a reservation opened through the decision API: the endpoint,
// tier and client that find its limiter and key (each byte for byte, tokenString), its 128-bit
// random id, estimate and expiry. It is a handle, not a secret to sign: the store holds the id
// under that key alone, so a token altered to name another key or class names no open
// reservation.
func reservationToken(endpoint, tier, client string, r limiter.Reservation) string {
	b, _ := json.Marshal([]any{tokenString(endpoint), tokenString(tier), tokenString(client), r.ID, r.Estimate, r.Expires.Unix()})
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// tokenBytes is a string of a token that is not valid UTF-8, its bytes as they are (JSON's
// base64 of a []byte).
type tokenBytes struct {
	B []byte `json:"b"`
}

// tokenString is how a token writes s, a key or a name: a JSON string when s is valid UTF-8,
// else {"b": its bytes in base64}. A header value may carry bytes from 0x80 up (obs-text), so a
// key /v1/auth makes need not be UTF-8, and json.Marshal would write such bytes as U+FFFD: the
// token would name a key holding nothing. UTF-8 strings keep the old form, so that versions
// before settle these tokens in a rolling upgrade; keys are not hashed to UTF-8 where they are
// made, which would move the budgets already kept for them to new keys.
func tokenString(s string) any {
	if utf8.ValidString(s) {
		return s
	}
	return tokenBytes{B: []byte(s)}
}

// readTokenString reads a string tokenString wrote into s, reporting whether raw is one.
func readTokenString(raw json.RawMessage, s *string) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return json.Unmarshal(raw, s) == nil
	}
	var b tokenBytes
	if json.Unmarshal(raw, &b) != nil || b.B == nil {
		return false
	}
	*s = string(b.B)
	return true
}

// reservationToken is the token of what o, asked for client, holds: of its one limit, or of each
// of its several limits that holds the estimate.
func (o *outcome) reservationToken(client string) string {
	if o.set != nil {
		return setReservationToken(o.Endpoint, o.Tier, client, o.Parts)
	}
	return reservationToken(o.Endpoint, o.Tier, client, o.Reservation)
}

// setTokenPrefix starts the token of the reservations of a tier of several limits.
const setTokenPrefix = "r2."

// setReservationToken is the token of the reservations an ask of several limits opened, one id
// and one estimate on the key of each limit of cost (decision.PartOutcome.Reservation):
// reservationToken's fields and, for each limit holding the estimate, its name and key, so that
// a commit settles each on its own limiter. A handle as reservationToken's is: the store holds
// the id under each key alone, and a commit takes a key only where the tier's limit of that name
// counts for the client the token names (tierSet.countsOn), so that a part altered names no open
// reservation, nor another limit's. Each part is a handle of its own: a token moved to another
// client still names the reservation of a limit counted beyond the client (an organisation's
// month) whose key it kept.
func setReservationToken(endpoint, tier, client string, parts []decision.PartOutcome) string {
	var r limiter.Reservation
	held := make([][2]string, 0, len(parts))
	utf := true
	for _, p := range parts {
		if p.Reservation.ID == "" {
			continue
		}
		if r.ID == "" || p.Reservation.Expires.Before(r.Expires) {
			r = p.Reservation
		}
		held = append(held, [2]string{p.Name, p.Key})
		utf = utf && utf8.ValidString(p.Name) && utf8.ValidString(p.Key)
	}
	var named any = held
	if !utf { // rare: only then does each string cost an interface
		bytewise := make([][2]any, len(held))
		for i, h := range held {
			bytewise[i] = [2]any{tokenString(h[0]), tokenString(h[1])}
		}
		named = bytewise
	}
	b, _ := json.Marshal([]any{tokenString(endpoint), tokenString(tier), tokenString(client), r.ID, r.Estimate, r.Expires.Unix(), named})
	return setTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// MaxReservationToken is the longest reservation token the decision API hands out. A token
// names each limit holding the estimate with its key, so several limits on long keys make one of
// kilobytes; CommitPath, RenewPath and ReleasePath read MaxTokenBody, room for it, and a reserve
// whose token would be longer is refused before anything is taken (tokenFits). Fixed, not derived
// from the policy, which a reload could shorten under tokens handed out: some twenty limits on
// the longest keys. Behind nginx, /v1/auth's answer must fit its proxy_buffer_size.
const MaxReservationToken = 16 << 10

// MaxTokenBody is the largest body of CommitPath, RenewPath and ReleasePath: a token of
// MaxReservationToken and a check body's worth of JSON around it (past it: 413 or 400).
const MaxTokenBody = MaxReservationToken + MaxCheckBody

// tokenFits returns the error of a reserving ask a for client whose token would be longer than
// MaxReservationToken, for its caller to refuse before deciding; most pass a bound, unmade.
func tokenFits(a *decision.Ask, client string) error {
	n, held := len(a.Endpoint)+len(a.Tier)+len(client), 0
	for p := range heldSetParts(a) {
		n, held = n+len(p.Name)+len(p.Key), held+1
	}
	// JSON escapes a byte into at most six (\u00XX), and a string that is not UTF-8 is its base64
	// in {"b":""} (tokenString): 8 around each of the 3+2×held strings; 128 holds the brackets,
	// quotes and commas, the id and two numbers, 8 each limit's.
	if len(setTokenPrefix)+base64.RawURLEncoding.EncodedLen(6*n+8*(3+2*held)+128+8*held) <= MaxReservationToken {
		return nil
	}
	l := len(askToken(a, client))
	if l <= MaxReservationToken {
		return nil
	}
	return fmt.Errorf("reserve: the reservation token of endpoint %q, tier %q for this client would be %d bytes, past the %d a commit takes back "+
		"(it names each limit holding the estimate, %d here, with its key): shorten the key and scope values, or hold the cost on fewer limits",
		a.Endpoint, a.Tier, l, MaxReservationToken, max(held, 1))
}

// askToken is the token a reserving ask a for client would answer at its longest: its id of
// 32 digits, its expiry of more digits than any real one, every limit of its set that holds the
// estimate holding it.
func askToken(a *decision.Ask, client string) string {
	r := limiter.Reservation{ID: strings.Repeat("0", 32), Estimate: a.Cost, Expires: time.Unix(1<<40, 0)}
	if a.Set == nil {
		return reservationToken(a.Endpoint, a.Tier, client, r)
	}
	var parts []decision.PartOutcome
	for p := range heldSetParts(a) {
		parts = append(parts, decision.PartOutcome{Name: p.Name, Key: p.Key, Reservation: r})
	}
	return setReservationToken(a.Endpoint, a.Tier, client, parts)
}

// heldSetParts yields the parts of a's set, enforced then shadow, that hold the estimate.
func heldSetParts(a *decision.Ask) iter.Seq[decision.SetPart] {
	return func(yield func(decision.SetPart) bool) {
		if a.Set == nil {
			return
		}
		for _, parts := range [2][]decision.SetPart{a.Set.Parts, a.Set.ShadowParts} {
			for _, p := range parts {
				if p.Held && !yield(p) {
					return
				}
			}
		}
	}
}

type parsedToken struct {
	endpoint, tier, client, id string
	estimate                   int64
	expires                    time.Time
	parts                      []tokenPart // of a token of several limits; nil for one limit's
}

// tokenPart is one limit of several a token names, with the key its reservation is held on.
type tokenPart struct{ name, key string }

var errNotAToken = errors.New("reservation: not a reservation token")

// parseToken reads a token of one limit (reservationToken) or of several (setReservationToken).
func parseToken(s string) (parsedToken, error) {
	var t parsedToken
	fields := 6
	raw, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		if raw, ok = strings.CutPrefix(s, setTokenPrefix); !ok {
			return t, errNotAToken
		}
		fields = 7
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return t, errNotAToken
	}
	var f []json.RawMessage
	var exp int64
	if json.Unmarshal(b, &f) != nil || len(f) != fields ||
		!readTokenString(f[0], &t.endpoint) || !readTokenString(f[1], &t.tier) ||
		!readTokenString(f[2], &t.client) || json.Unmarshal(f[3], &t.id) != nil ||
		json.Unmarshal(f[4], &t.estimate) != nil || json.Unmarshal(f[5], &exp) != nil || t.id == "" {
		return t, errNotAToken
	}
	t.expires = time.Unix(exp, 0)
	if fields == 7 {
		var parts [][]json.RawMessage
		if json.Unmarshal(f[6], &parts) != nil || len(parts) == 0 {
			return t, errNotAToken
		}
		t.parts = make([]tokenPart, len(parts))
		for i, p := range parts {
			tp := &t.parts[i]
			if len(p) != 2 || !readTokenString(p[0], &tp.name) || !readTokenString(p[1], &tp.key) || tp.name == "" || tp.key == "" {
				return t, errNotAToken
			}
		}
	}
	return t, nil
}

// heldParts finds the limits of several that tok names on rt, each with the reservation it holds,
// in the token's order, under the policy in force: the status and error of a token that names a
// tier without several limits or a limit the tier lacks (404), or a key its limit does not count
// on for the token's client, or one limit twice (400).
func (tok parsedToken) heldParts(rt route) ([]decision.PartOutcome, int, error) {
	ts := rt.class.setFor(tok.tier)
	if ts == nil {
		return nil, http.StatusNotFound, fmt.Errorf("reservation: endpoint %q, tier %q has no list of limits in the policy in force", tok.endpoint, tok.tier)
	}
	ts = ts.forClient(tok.client)
	taken := make([]bool, len(ts.parts))
	parts := make([]decision.PartOutcome, 0, len(tok.parts))
	for _, tp := range tok.parts {
		named, at := false, -1
		for i, p := range ts.parts {
			if p.name != tp.name {
				continue
			}
			named = true
			if ts.countsOn(rt, tok.tier, tok.client, i, tp.key) {
				at = i
				break
			}
		}
		switch {
		case !named:
			return nil, http.StatusNotFound, fmt.Errorf("reservation: endpoint %q, tier %q has no limit %q in the policy in force", tok.endpoint, tok.tier, tp.name)
		case at < 0:
			return nil, http.StatusBadRequest, fmt.Errorf("%w: limit %q does not count on the key it names for %q", errNotAToken, tp.name, tok.client)
		case taken[at]:
			return nil, http.StatusBadRequest, fmt.Errorf("%w: limit %q named twice", errNotAToken, tp.name)
		}
		taken[at] = true
		l := ts.parts[at].lim
		parts = append(parts, decision.PartOutcome{Name: tp.name, Key: tp.key, Limit: l.Limit(), Limiter: l, Shadow: ts.shadow || at >= ts.enforced,
			Reservation: limiter.Reservation{ID: tok.id, Key: tp.key, Estimate: tok.estimate, Expires: tok.expires}})
	}
	return parts, 0, nil
}

// CommitHandler returns the settlement of the decision API's reservations: POST a
// CommitRequest and get a CommitResponse (200); 400 for a bad body or token, 404 for a token
// whose endpoint or tier the policy in force does not have, 409 for a reservation the store no
// longer holds (settled or cancelled, or expired over a hold ago). The token of a tier of
// several limits is settled on each limit it names, at the one cost (commitSet). A commit after the hold ended
// but within one more hold is settled late (200, "late": true). A gateway that cannot write JSON
// (nginx's post_action) sends no body and ReservationHeader with CostHeader instead; a cost it
// lacks or cannot read settles at the estimate, counted as a cost unknown, as the proxy does.
// Such a commit may carry the request's LeaseHeader too (a tier holding both): the lease is
// released first, as ReleaseHandler would, and LeaseReleasedHeader says whether it was.
// Mount it beside CheckHandler, behind the same peer rules.
func (m *Middleware) CommitHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, "application/json", http.StatusMethodNotAllowed, RejectedBody{Error: "method_not_allowed", Message: "use POST"})
			return
		}
		req, tok, unknown, status, err := readCommitRequest(w, r)
		if err != nil {
			writeJSON(w, "application/json", status, RejectedBody{Error: "bad_request", Message: err.Error()})
			return
		}
		m.releaseWithCommit(w, r)
		p := m.policy.Load()
		cl, ok := p.routes[tok.endpoint]
		if !ok || !p.tiers[tok.tier] {
			writeJSON(w, "application/json", http.StatusNotFound, RejectedBody{Error: "not_found",
				Message: fmt.Sprintf("reservation: endpoint %q, tier %q is not in the policy in force", tok.endpoint, tok.tier)})
			return
		}
		rt := route{pattern: tok.endpoint, class: cl}
		if tok.parts != nil {
			m.commitSet(w, r, rt, tok, req, unknown)
			return
		}
		a := rt.ask(tok.tier, tok.client)
		if a.Limiter == nil {
			writeJSON(w, "application/json", http.StatusNotFound, RejectedBody{Error: "not_found", Message: errHoldsNoReservation(rt, tok).Error()})
			return
		}
		// The token is the caller's word (FromToken): its estimate, held to the quota, is what a
		// cost unknown commits at, and what is counted is what the store answered.
		a.Reservation = limiter.Reservation{ID: tok.id, Key: a.Key, Estimate: tok.estimate, Expires: tok.expires}
		a.Unknown, a.FromToken = unknown, true
		if req.Cost != nil {
			a.Cost = *req.Cost
		}
		o := m.rep.Settle(r.Context(), a, req.Cancel)
		switch o.Verdict {
		case decision.VerdictAllowed:
			// Settled, or found expired by the store, which charged what the expiry did not take.
		case decision.VerdictRejected:
			writeNotOpen(w)
			return
		case decision.VerdictCanceled:
			return // nobody is left to answer
		default:
			m.unsettled(w, rt.pattern, o.Err)
			return
		}
		s := o.Settlement
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, "application/json", http.StatusOK, CommitResponse{Endpoint: rt.pattern, PlanTier: tok.tier,
			Estimate: s.Estimate, Actual: s.Actual, Refunded: s.Refunded, Charged: s.Charged, Late: s.Late})
	})
}

// LeaseReleasedHeader answers a bodiless commit that also carried LeaseHeader: "true" when the
// lease was given back, else "false" (its reason logged; the lease expires at its lease_ttl).
const LeaseReleasedHeader = "X-RateLimit-Lease-Released"

// releaseWithCommit gives back the lease of a bodiless commit's LeaseHeader, before the commit
// is answered: a gateway's one call after the response (nginx's post_action) ends a request of
// a tier that holds both a lease and a reservation.
func (m *Middleware) releaseWithCommit(w http.ResponseWriter, r *http.Request) {
	token := r.Header.Get(LeaseHeader)
	if token == "" || r.Header.Get(ReservationHeader) == "" {
		return
	}
	status, resp := m.releaseLease(r.Context(), token)
	if status != http.StatusOK {
		m.logger.Warn("lease not released with its commit", "status", status, "error", resp.Message)
	}
	w.Header().Set(LeaseReleasedHeader, strconv.FormatBool(status == http.StatusOK))
}

// errHoldsNoReservation says why tok, a token of one limit, names no reservation on rt's tier:
// a concurrency limit holds leases; a tier of several limits (since a reload) is named by
// tokens of several limits only.
func errHoldsNoReservation(rt route, tok parsedToken) error {
	if rt.class.setFor(tok.tier) != nil {
		return fmt.Errorf("reservation: endpoint %q, tier %q has several limits in the policy in force, which a token of one limit (made before a reload) does not name", tok.endpoint, tok.tier)
	}
	return fmt.Errorf("reservation: endpoint %q, tier %q has a concurrency limit, which holds leases", tok.endpoint, tok.tier)
}

// writeNotOpen answers a commit whose reservation the store no longer holds.
func writeNotOpen(w http.ResponseWriter) {
	writeJSON(w, "application/json", http.StatusConflict, RejectedBody{Error: "reservation_not_open",
		Message: "reservation: not open: already settled, cancelled or expired"})
}

// unsettled answers a commit the store failed to settle: retry; a reservation it never settles
// expires by its policy.
func (m *Middleware) unsettled(w http.ResponseWriter, endpoint string, err error) {
	m.logger.Warn("reservation not settled", "endpoint", endpoint, "error", err.Error())
	w.Header().Set("Retry-After", "1")
	writeJSON(w, "application/json", http.StatusServiceUnavailable, RejectedBody{Error: "rate_limit_unavailable",
		Message: "the rate limiter cannot settle right now; retry later", RetryAfter: 1})
}

// commitSet settles the reservations of several limits tok names, each on its own limiter at the
// cost req reports (a limit of requests took its 1 at admission and holds none), traced and
// recorded once as the middleware's settle of a request is (decision.Reporter.SettleSet): 200
// with each limit's settlement when the store settled any, 409 when it held none of them, 503
// when it failed on any (a retry settles the rest; those settled answer not settled).
func (m *Middleware) commitSet(w http.ResponseWriter, r *http.Request, rt route, tok parsedToken, req CommitRequest, unknown string) {
	parts, status, err := tok.heldParts(rt)
	if err != nil {
		code := "bad_request"
		if status == http.StatusNotFound {
			code = "not_found"
		}
		writeJSON(w, "application/json", status, RejectedBody{Error: code, Message: err.Error()})
		return
	}
	// As for one limit, the token is the caller's word (FromToken): what is counted is what the
	// store answered.
	a := decision.Ask{Endpoint: rt.pattern, Tier: tok.tier, Key: rt.key(tok.tier, tok.client), Unknown: unknown, FromToken: true}
	if req.Cost != nil {
		a.Cost = *req.Cost
	}
	resp := CommitResponse{Endpoint: rt.pattern, PlanTier: tok.tier, Estimate: tok.estimate, Limits: make([]CommitLimit, len(parts))}
	var failed error
	settled := false
	for i, o := range m.rep.SettleSet(r.Context(), a, parts, req.Cancel) {
		resp.Limits[i].Name = parts[i].Name
		switch o.Verdict {
		case decision.VerdictAllowed:
			s := o.Settlement
			resp.Limits[i] = CommitLimit{Name: parts[i].Name, Settled: true,
				Estimate: s.Estimate, Actual: s.Actual, Refunded: s.Refunded, Charged: s.Charged, Late: s.Late}
			if !settled {
				resp.Actual, resp.Refunded, resp.Charged, resp.Late = s.Actual, s.Refunded, s.Charged, s.Late
			}
			settled = true
		case decision.VerdictRejected:
		case decision.VerdictCanceled:
			return // nobody is left to answer
		default:
			failed = o.Err
		}
	}
	switch {
	case failed != nil:
		m.unsettled(w, rt.pattern, failed)
	case !settled:
		writeNotOpen(w)
	default:
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, "application/json", http.StatusOK, resp)
	}
}

// readCommitRequest reads the JSON body, or the headers of a bodiless commit; unknown is the
// reason the headers give no cost.
func readCommitRequest(w http.ResponseWriter, r *http.Request) (req CommitRequest, tok parsedToken, unknown string, status int, err error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxTokenBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, tok, "", http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", MaxTokenBody)
		}
		return req, tok, "", http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if r.Header.Values(ReservationHeader) != nil || r.Header.Values(CostHeader) != nil {
		if len(bytes.TrimSpace(body)) > 0 {
			return req, tok, "", http.StatusBadRequest, fmt.Errorf("a JSON body or the %s and %s headers, not both", ReservationHeader, CostHeader)
		}
		return headerCommit(r.Header)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, tok, "", http.StatusBadRequest, fmt.Errorf("body is not a JSON commit request: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, tok, "", http.StatusBadRequest, errors.New("body has data after the JSON object")
	}
	switch {
	case req.Reservation == "":
		return req, tok, "", http.StatusBadRequest, errors.New("reservation: required")
	case req.Cancel && req.Cost != nil:
		return req, tok, "", http.StatusBadRequest, errors.New("cost: not with cancel")
	case !req.Cancel && req.Cost == nil:
		return req, tok, "", http.StatusBadRequest, errors.New("cost: required (or cancel: true)")
	case req.Cost != nil && *req.Cost < 0:
		return req, tok, "", http.StatusBadRequest, fmt.Errorf("cost: must be >= 0, got %d", *req.Cost)
	}
	tok, err = parseToken(req.Reservation)
	if err != nil {
		return req, tok, "", http.StatusBadRequest, err
	}
	return req, tok, "", 0, nil
}

// headerCommit is the commit of ReservationHeader at CostHeader.
func headerCommit(h http.Header) (req CommitRequest, tok parsedToken, unknown string, status int, err error) {
	req.Reservation, err = oneValue(h, http.CanonicalHeaderKey(ReservationHeader))
	if err == nil && req.Reservation == "" {
		err = fmt.Errorf("%s: required", ReservationHeader)
	}
	if err == nil {
		tok, err = parseToken(req.Reservation)
	}
	if err != nil {
		return req, tok, "", http.StatusBadRequest, err
	}
	c := costReader{}
	v, err := oneValue(h, http.CanonicalHeaderKey(CostHeader))
	c.number(v, err == nil && v != "")
	if err != nil {
		c.reason = CostInvalid
	}
	if c.found {
		req.Cost = &c.cost
	}
	return req, tok, c.reason, 0, nil
}
