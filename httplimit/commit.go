package httplimit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

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
}

// tokenPrefix starts every reservation token, naming its format.
const tokenPrefix = "r1."

// reservationToken is the token of a reservation opened through the decision API: the endpoint,
// tier and client that find its limiter and key, its 128-bit random id, estimate and expiry. It
// is a handle, not a secret to sign: the store holds the id under that key alone, so a token
// altered to name another key or class names no open reservation.
func reservationToken(endpoint, tier, client string, r limiter.Reservation) string {
	b, _ := json.Marshal([]any{endpoint, tier, client, r.ID, r.Estimate, r.Expires.Unix()})
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

type parsedToken struct {
	endpoint, tier, client, id string
	estimate                   int64
	expires                    time.Time
}

func parseToken(s string) (parsedToken, error) {
	var t parsedToken
	raw, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return t, errors.New("reservation: not a reservation token")
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return t, errors.New("reservation: not a reservation token")
	}
	var f []json.RawMessage
	var exp int64
	if json.Unmarshal(b, &f) != nil || len(f) != 6 ||
		json.Unmarshal(f[0], &t.endpoint) != nil || json.Unmarshal(f[1], &t.tier) != nil ||
		json.Unmarshal(f[2], &t.client) != nil || json.Unmarshal(f[3], &t.id) != nil ||
		json.Unmarshal(f[4], &t.estimate) != nil || json.Unmarshal(f[5], &exp) != nil || t.id == "" {
		return t, errors.New("reservation: not a reservation token")
	}
	t.expires = time.Unix(exp, 0)
	return t, nil
}

// CommitHandler returns the settlement of the decision API's reservations: POST a
// CommitRequest and get a CommitResponse (200); 400 for a bad body or token, 404 for a token
// whose endpoint or tier the policy in force does not have, 409 for a reservation the store no
// longer holds (settled or cancelled, or expired over a hold ago). A commit after the hold ended
// but within one more hold is settled late (200, "late": true). A gateway that cannot write JSON
// (nginx's post_action) sends no body and ReservationHeader with CostHeader instead; a cost it
// lacks or cannot read settles at the estimate, counted as a cost unknown, as the proxy does.
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
		p := m.policy.Load()
		cl, ok := p.routes[tok.endpoint]
		if !ok || !p.tiers[tok.tier] {
			writeJSON(w, "application/json", http.StatusNotFound, RejectedBody{Error: "not_found",
				Message: fmt.Sprintf("reservation: endpoint %q, tier %q is not in the policy in force", tok.endpoint, tok.tier)})
			return
		}
		rt := route{pattern: tok.endpoint, class: cl}
		a := rt.ask(tok.tier, tok.client)
		if a.Limiter == nil { // a concurrency tier holds no reservation
			writeJSON(w, "application/json", http.StatusNotFound, RejectedBody{Error: "not_found",
				Message: fmt.Sprintf("reservation: endpoint %q, tier %q has a concurrency limit, which holds leases", tok.endpoint, tok.tier)})
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
			writeJSON(w, "application/json", http.StatusConflict, RejectedBody{Error: "reservation_not_open",
				Message: "reservation: not open: already settled, cancelled or expired"})
			return
		case decision.VerdictCanceled:
			return // nobody is left to answer
		default:
			m.logger.Warn("reservation not settled", "endpoint", rt.pattern, "error", o.Err.Error())
			w.Header().Set("Retry-After", "1")
			writeJSON(w, "application/json", http.StatusServiceUnavailable, RejectedBody{Error: "rate_limit_unavailable",
				Message: "the rate limiter cannot settle right now; retry later", RetryAfter: 1})
			return
		}
		s := o.Settlement
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, "application/json", http.StatusOK, CommitResponse{Endpoint: rt.pattern, PlanTier: tok.tier,
			Estimate: s.Estimate, Actual: s.Actual, Refunded: s.Refunded, Charged: s.Charged, Late: s.Late})
	})
}

// readCommitRequest reads the JSON body, or the headers of a bodiless commit; unknown is the
// reason the headers give no cost.
func readCommitRequest(w http.ResponseWriter, r *http.Request) (req CommitRequest, tok parsedToken, unknown string, status int, err error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxCheckBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return req, tok, "", http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", MaxCheckBody)
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
