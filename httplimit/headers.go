package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// HeaderConfig selects the rate-limit header families and the 429 body (see decision.HeaderConfig).
type HeaderConfig = decision.HeaderConfig

// QuotaExceededType is the problem type of a 429 in problem+json form.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// HeaderConfig returns the header families the policy writes. Safe for concurrent use.
func (p *Policy) HeaderConfig() HeaderConfig { return p.headers }

// render keeps l's header values for renderedFor; only while the policy is being built.
func (c *class) render(l *limiter.Limiter) {
	if c.rendered == nil {
		c.rendered = map[*limiter.Limiter]decision.RenderedLimit{}
	}
	c.rendered[l] = decision.RenderLimit(c.name, l.Limit())
}

// renderedFor returns the header values of l, one of c's limiters.
func (c *class) renderedFor(l *limiter.Limiter) decision.RenderedLimit {
	if rl, ok := c.rendered[l]; ok {
		return rl
	}
	return decision.RenderLimit(c.name, l.Limit())
}

// RejectedBody is the JSON body of a 429 (and, with Error "rate_limit_unavailable", of a
// fail-closed 503). Error is "rate_limit_exceeded", "rate_limit_unavailable", or for the
// decision API "bad_request", "method_not_allowed" or "not_implemented"; Message is for people.
type RejectedBody struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	RetryAfter int64  `json:"retry_after"` // the Retry-After header's value in seconds, 0 when none
	// Status is "penalized" for a client in its class's penalty box (Error
	// "rate_limit_penalized"), else empty.
	Status limiter.Status `json:"status,omitempty"`
	// RefusedBy names the limits that refused, for a tier of several limits (TierLimit.Name).
	RefusedBy []string `json:"refused_by,omitempty"`
}

// ProblemBody is the application/problem+json body of a 429 (RFC 9457).
type ProblemBody struct {
	Type             string   `json:"type"`  // QuotaExceededType
	Title            string   `json:"title"` // an RFC 9457 member, as are Status and Detail
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`    // the RateLimit-Policy (class, or limits of several) that refused
	RetryAfter       int64    `json:"retry_after"`          // the Retry-After header's value in seconds
	RefusedBy        []string `json:"refused_by,omitempty"` // as RejectedBody's
}

// writeRejected writes the 429 body in the configured form; respond has set the headers.
func writeRejected(hc HeaderConfig, w http.ResponseWriter, f decision.Fields, body RejectedBody) {
	writeRejectedStatus(hc, w, http.StatusTooManyRequests, f, body)
}

// writeRejectedStatus is writeRejected with another status (the forward-auth's 401 or 403).
func writeRejectedStatus(hc HeaderConfig, w http.ResponseWriter, code int, f decision.Fields, body RejectedBody) {
	if hc.ProblemJSON {
		violated := []string{f.Policy()}
		if len(body.RefusedBy) > 0 {
			violated = body.RefusedBy
		}
		writeJSON(w, "application/problem+json", code, ProblemBody{
			Type:             QuotaExceededType,
			Title:            "Request cannot be satisfied as assigned quota has been exceeded",
			Status:           code,
			Detail:           body.Message,
			ViolatedPolicies: violated,
			RetryAfter:       body.RetryAfter,
			RefusedBy:        body.RefusedBy,
		})
		return
	}
	writeJSON(w, "application/json", code, body)
}

func writeJSON(w http.ResponseWriter, contentType string, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
