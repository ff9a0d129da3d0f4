package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// RenewPath is where serve mounts the renewal of the decision API's reservations and leases.
const RenewPath = "/v1/renew"

// RenewRequest is the body of POST RenewPath: one of a reservation token (CheckResponse's
// Reservation, or ReservationHeader) or a lease token (CheckResponse's Lease, or LeaseHeader).
type RenewRequest struct {
	Reservation string `json:"reservation,omitempty"`
	Lease       string `json:"lease,omitempty"`
}

// RenewResponse is the answer of a renewal: 200 with Renewed and the new end of the hold or TTL.
type RenewResponse struct {
	Renewed bool      `json:"renewed"`
	Expires time.Time `json:"expires"` // on the store's clock
}

// RenewHandler returns the renewal of the decision API's reservations and leases: a caller whose
// request outlives the class's hold (or the limit's lease_ttl) POSTs a RenewRequest every third
// of it, so that the reservation or lease ends only when the caller is gone. 200 renewed; 400 for
// a bad body or token; 404 for a token whose class or tier the policy in force does not have,
// or ("lease_unknown") a lease no longer held; 409 ("reservation_not_open") for a reservation no
// longer open; 503 when the store failed. A gateway that cannot write JSON sends no body and
// ReservationHeader or LeaseHeader instead, as it does to CommitPath and ReleasePath. Mount it
// beside CommitHandler, behind the same peer rules.
func (m *Middleware) RenewHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, "application/json", http.StatusMethodNotAllowed, RejectedBody{Error: "method_not_allowed", Message: "use POST"})
			return
		}
		req, err := readRenewRequest(w, r)
		if err != nil {
			writeJSON(w, "application/json", http.StatusBadRequest, RejectedBody{Error: "bad_request", Message: err.Error()})
			return
		}
		var rn limiter.Renewal
		var status int
		if req.Lease != "" {
			rn, status, err = m.renewLease(r, req.Lease)
		} else {
			rn, status, err = m.renewReservation(r, req.Reservation)
		}
		switch {
		case status == http.StatusServiceUnavailable:
			m.logger.Warn("not renewed", "error", err.Error())
			w.Header().Set(decision.HeaderRetryAfter, "1")
			writeJSON(w, "application/json", status, RejectedBody{Error: "rate_limit_unavailable",
				Message: "the rate limiter cannot renew right now; retry before the hold ends", RetryAfter: 1})
		case err != nil:
			code := map[int]string{http.StatusBadRequest: "bad_request", http.StatusNotFound: "not_found",
				http.StatusConflict: "reservation_not_open"}[status]
			if errors.Is(err, limiter.ErrLeaseUnknown) {
				code = "lease_unknown"
			}
			writeJSON(w, "application/json", status, RejectedBody{Error: code, Message: err.Error()})
		default:
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, "application/json", http.StatusOK, RenewResponse{Renewed: true, Expires: rn.Expires.UTC()})
		}
	})
}

// renewReservation renews the reservation a token names, answering the status of a failure.
func (m *Middleware) renewReservation(r *http.Request, token string) (limiter.Renewal, int, error) {
	tok, err := parseToken(token)
	if err != nil {
		return limiter.Renewal{}, http.StatusBadRequest, err
	}
	p := m.policy.Load()
	cl, ok := p.routes[tok.endpoint]
	if !ok || !p.tiers[tok.tier] {
		return limiter.Renewal{}, http.StatusNotFound, fmt.Errorf("reservation: endpoint %q, tier %q is not in the policy in force", tok.endpoint, tok.tier)
	}
	rt := route{pattern: tok.endpoint, class: cl}
	if tok.parts != nil {
		return m.renewSet(r, rt, tok)
	}
	a := rt.ask(tok.tier, tok.client)
	if a.Limiter == nil {
		return limiter.Renewal{}, http.StatusNotFound, errHoldsNoReservation(rt, tok)
	}
	a.Reservation, a.FromToken = limiter.Reservation{ID: tok.id, Key: a.Key}, true
	return renewed(m.rep.Renew(r.Context(), a), http.StatusConflict, errors.New("reservation: not open: already settled, cancelled or expired"))
}

// renewSet renews each reservation of several limits tok names, on its own limiter: renewed
// (the earliest new end) when the store held any, 409 when it held none, 503 when it failed on
// any.
func (m *Middleware) renewSet(r *http.Request, rt route, tok parsedToken) (limiter.Renewal, int, error) {
	parts, status, err := tok.heldParts(rt)
	if err != nil {
		return limiter.Renewal{}, status, err
	}
	var rn limiter.Renewal
	held := false
	for _, p := range parts {
		o := m.rep.Renew(r.Context(), decision.Ask{Endpoint: rt.pattern, Tier: tok.tier, Key: p.Key, Limiter: p.Limiter,
			Reservation: p.Reservation, FromToken: true})
		switch o.Verdict {
		case decision.VerdictAllowed:
			if !held || o.Renewal.Expires.Before(rn.Expires) {
				rn.Expires = o.Renewal.Expires
			}
			rn.Expired += o.Renewal.Expired
			held = true
		case decision.VerdictRejected:
		default:
			return o.Renewal, http.StatusServiceUnavailable, o.Err
		}
	}
	if !held {
		return rn, http.StatusConflict, errors.New("reservation: not open: already settled, cancelled or expired")
	}
	return rn, 0, nil
}

// renewed answers a renewal's outcome: the status of a failure, unknown's for nothing held.
func renewed(o decision.Outcome, status int, unknown error) (limiter.Renewal, int, error) {
	switch o.Verdict {
	case decision.VerdictAllowed:
		return o.Renewal, 0, nil
	case decision.VerdictRejected:
		return o.Renewal, status, unknown
	}
	return o.Renewal, http.StatusServiceUnavailable, o.Err
}

// renewLease renews the lease a token names, answering the status of a failure.
func (m *Middleware) renewLease(r *http.Request, token string) (limiter.Renewal, int, error) {
	lease, className, tier, err := parseLeaseToken(token)
	if err != nil {
		return limiter.Renewal{}, http.StatusBadRequest, err
	}
	ls, endpoint := m.policy.Load().leasesOf(lease, className, tier)
	if ls == nil {
		return limiter.Renewal{}, http.StatusNotFound, fmt.Errorf("lease: class %s tier %s has no concurrency limit in force", className, tier)
	}
	o := m.rep.Renew(r.Context(), decision.Ask{Endpoint: endpoint, Tier: tier, Key: lease.Key, Mode: limiter.ModeLease,
		Leases: ls, Lease: lease, FromToken: true})
	return renewed(o, http.StatusNotFound, limiter.ErrLeaseUnknown)
}

// readRenewRequest reads the JSON body, or the ReservationHeader or LeaseHeader of a bodiless
// renewal; exactly one token.
func readRenewRequest(w http.ResponseWriter, r *http.Request) (RenewRequest, error) {
	var req RenewRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxTokenBody))
	if err != nil {
		return req, fmt.Errorf("read body: %w", err)
	}
	if r.Header.Values(ReservationHeader) != nil || r.Header.Values(LeaseHeader) != nil {
		if len(bytes.TrimSpace(body)) > 0 {
			return req, fmt.Errorf("a JSON body or the %s or %s header, not both", ReservationHeader, LeaseHeader)
		}
		if r.Header.Values(ReservationHeader) != nil {
			req.Reservation, err = oneValue(r.Header, http.CanonicalHeaderKey(ReservationHeader))
		}
		if err == nil && r.Header.Values(LeaseHeader) != nil {
			req.Lease, err = oneValue(r.Header, http.CanonicalHeaderKey(LeaseHeader))
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return req, fmt.Errorf("body is not a JSON renew request (or send the %s or %s header without a body): %w", ReservationHeader, LeaseHeader, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return req, errors.New("body has data after the JSON object")
		}
	}
	switch {
	case err != nil:
		return req, err
	case (req.Reservation == "") == (req.Lease == ""):
		return req, errors.New("reservation or lease: exactly one is required")
	}
	return req, nil
}
