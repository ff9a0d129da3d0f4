package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// HeaderConfig selects the rate-limit header families and the 429 body
// (see decision.HeaderConfig).
type HeaderConfig = decision.HeaderConfig

// QuotaExceededType is the problem type of a 429 in problem+json form.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// HeaderConfig returns the header families the policy writes. Safe for
// concurrent use.
func (p *Policy) HeaderConfig() HeaderConfig { return p.headers }

// render keeps l's header values for renderedFor. Only while the policy
// is being built.
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

// RejectedBody is the JSON body of a 429 (and, with Error
// "rate_limit_unavailable", of a fail-closed 503).
type RejectedBody struct {
	// Error is a machine-readable code: "rate_limit_exceeded",
	// "rate_limit_unavailable", or for the decision API "bad_request" and
	// "method_not_allowed".
	Error string `json:"error"`
	// Message says what happened, for people.
	Message string `json:"message"`
	// RetryAfter is the Retry-After header's value in seconds (0 when none).
	RetryAfter int64 `json:"retry_after"`
}

// ProblemBody is the application/problem+json body of a 429 (RFC 9457).
type ProblemBody struct {
	// Type is QuotaExceededType.
	Type string `json:"type"`
	// Title, Status and Detail are the RFC 9457 members.
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// ViolatedPolicies names the RateLimit-Policy that refused (the class).
	ViolatedPolicies []string `json:"violated-policies"`
	// RetryAfter is the Retry-After header's value in seconds.
	RetryAfter int64 `json:"retry_after"`
}

// writeRejected writes the 429 body in the configured form; the headers
// (rate-limit ones, Cache-Control) are already set by respond.
func writeRejected(hc HeaderConfig, w http.ResponseWriter, f decision.Fields, body RejectedBody) {
	if hc.ProblemJSON {
		writeJSON(w, "application/problem+json", http.StatusTooManyRequests, ProblemBody{
			Type:             QuotaExceededType,
			Title:            "Request cannot be satisfied as assigned quota has been exceeded",
			Status:           http.StatusTooManyRequests,
			Detail:           body.Message,
			ViolatedPolicies: []string{f.Policy()},
			RetryAfter:       body.RetryAfter,
		})
		return
	}
	writeJSON(w, "application/json", http.StatusTooManyRequests, body)
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
