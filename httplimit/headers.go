package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// HeaderConfig selects the rate-limit header families and the 429 body.
// The zero value sends X-RateLimit-* and the IETF RateLimit-Policy /
// RateLimit fields, not the legacy trio, and a plain JSON 429 body.
type HeaderConfig struct {
	// OmitXRateLimit stops X-RateLimit-Limit, -Remaining and -Reset (Unix time).
	OmitXRateLimit bool
	// OmitRateLimit stops the draft-ietf-httpapi-ratelimit-headers-10
	// structured fields RateLimit-Policy and RateLimit.
	OmitRateLimit bool
	// Legacy adds the older RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset (delta seconds) trio.
	Legacy bool
	// ProblemJSON makes 429 bodies application/problem+json (RFC 9457) with
	// the quota-exceeded problem type and violated-policies.
	ProblemJSON bool
}

// QuotaExceededType is the problem type of a 429 in problem+json form.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// retryAfterSeconds is the Retry-After of a refused request: whole seconds
// rounded up, never 0.
func retryAfterSeconds(d limiter.Decision) int64 {
	return max(1, ceilSeconds(d.RetryAfter))
}

// numbers are the values every header family is written from, so that the
// families always agree.
type numbers struct {
	policy    string
	quota     int64
	window    int64 // seconds, at least 1
	remaining int64
	reset     int64 // seconds until the full quota is available
	resetUnix int64 // Unix time of reset, rounded up
	t         int64 // RateLimit t: reset when allowed, retry-after when refused
	retry     int64 // Retry-After; 0 when allowed
}

func computeNumbers(policy string, lim limiter.Limit, d limiter.Decision, now time.Time) numbers {
	n := numbers{
		policy:    policy,
		quota:     d.Limit,
		window:    max(1, ceilSeconds(lim.Window())),
		remaining: max(0, d.Remaining),
		reset:     ceilSeconds(d.ResetAfter),
	}
	if n.quota == 0 {
		n.quota = lim.Quota()
	}
	at := now.Add(d.ResetAfter)
	n.resetUnix = at.Unix()
	if at.Nanosecond() > 0 {
		n.resetUnix++
	}
	n.t = n.reset
	if !d.Allowed {
		n.retry = retryAfterSeconds(d)
		n.t = n.retry
	}
	return n
}

// write sets the enabled header families on h.
func (hc HeaderConfig) write(h http.Header, n numbers) {
	if !hc.OmitXRateLimit {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(n.quota, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(n.remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(n.resetUnix, 10))
	}
	if !hc.OmitRateLimit {
		pol := httpsfv.NewItem(n.policy)
		pol.Params.Add("q", n.quota)
		pol.Params.Add("w", n.window)
		if v, err := httpsfv.Marshal(httpsfv.List{pol}); err == nil {
			h.Set("RateLimit-Policy", v)
		}
		cur := httpsfv.NewItem(n.policy)
		cur.Params.Add("r", n.remaining)
		cur.Params.Add("t", n.t)
		if v, err := httpsfv.Marshal(httpsfv.List{cur}); err == nil {
			h.Set("RateLimit", v)
		}
	}
	if hc.Legacy {
		h.Set("RateLimit-Limit", strconv.FormatInt(n.quota, 10))
		h.Set("RateLimit-Remaining", strconv.FormatInt(n.remaining, 10))
		h.Set("RateLimit-Reset", strconv.FormatInt(n.t, 10))
	}
	if n.retry > 0 {
		h.Set("Retry-After", strconv.FormatInt(n.retry, 10))
	}
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

// writeRejected answers 429 with the configured body; the rate-limit headers
// are already set.
func (hc HeaderConfig) writeRejected(w http.ResponseWriter, endpoint string, n numbers) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	msg := fmt.Sprintf("rate limit exceeded on %s; retry in %d s", endpoint, n.retry)
	if hc.ProblemJSON {
		writeJSON(w, "application/problem+json", http.StatusTooManyRequests, ProblemBody{
			Type:             QuotaExceededType,
			Title:            "Request cannot be satisfied as assigned quota has been exceeded",
			Status:           http.StatusTooManyRequests,
			Detail:           msg,
			ViolatedPolicies: []string{n.policy},
			RetryAfter:       n.retry,
		})
		return
	}
	writeJSON(w, "application/json", http.StatusTooManyRequests, RejectedBody{
		Error: "rate_limit_exceeded", Message: msg, RetryAfter: n.retry,
	})
}

// writeUnavailable answers 503 for a fail-closed decision.
func writeUnavailable(w http.ResponseWriter, d limiter.Decision) {
	retry := retryAfterSeconds(d)
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(retry, 10))
	h.Set("Cache-Control", "no-store")
	writeJSON(w, "application/json", http.StatusServiceUnavailable, RejectedBody{
		Error: "rate_limit_unavailable", Message: "the rate limiter cannot decide right now; retry later", RetryAfter: retry,
	})
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
