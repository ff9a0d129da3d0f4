package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
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

// ceilSeconds rounds d up to whole seconds; 0 for d <= 0. It cannot
// overflow, whatever d.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// retryAfterSeconds is the Retry-After of a refused request: whole seconds
// rounded up, never 0.
func retryAfterSeconds(d limiter.Decision) int64 {
	return max(1, ceilSeconds(d.RetryAfter))
}

// maxSFInteger is the largest Structured Field integer (RFC 9651, 15
// digits): RateLimit and RateLimit-Policy parameters saturate at it.
const maxSFInteger = 999_999_999_999_999

// The header names as net/http keeps them in a Header map (the canonical
// form of "X-RateLimit-Limit" is "X-Ratelimit-Limit"), so that they are
// set without canonicalising them on every request.
const (
	headerXLimit          = "X-Ratelimit-Limit"
	headerXRemaining      = "X-Ratelimit-Remaining"
	headerXReset          = "X-Ratelimit-Reset"
	headerPolicy          = "Ratelimit-Policy"
	headerRateLimit       = "Ratelimit"
	headerLegacyLimit     = "Ratelimit-Limit"
	headerLegacyRemaining = "Ratelimit-Remaining"
	headerLegacyReset     = "Ratelimit-Reset"
	headerRetryAfter      = "Retry-After"
)

// renderedLimit is what the headers say about one limit of one class that
// never changes between requests, rendered once when the policy is built.
// It is immutable.
type renderedLimit struct {
	class     string
	item      string // class as a structured-field string: "class", escaped
	quota     int64
	quotaText string // quota in decimal
	window    int64  // seconds, at least 1
	// policy is the RateLimit-Policy field: "class";q=quota;w=window.
	policy string
	// rateLimitPrefix is the RateLimit field up to its r value: "class";r=
	rateLimitPrefix string
}

func renderLimit(class string, lim limiter.Limit) *renderedLimit {
	// A class name is letters, digits, '_' and '-': an sf-string without escapes.
	return renderLimitItem(class, `"`+class+`"`, lim)
}

// renderLimitItem is renderLimit with the policy name already serialized
// as a structured-field string (item).
func renderLimitItem(class, item string, lim limiter.Limit) *renderedLimit {
	rl := &renderedLimit{class: class, item: item, quota: lim.Quota(), window: max(1, ceilSeconds(lim.Window()))}
	rl.quotaText = strconv.FormatInt(rl.quota, 10)
	rl.policy = item + ";q=" + strconv.FormatInt(min(rl.quota, maxSFInteger), 10) + ";w=" + strconv.FormatInt(min(rl.window, maxSFInteger), 10)
	rl.rateLimitPrefix = item + ";r="
	return rl
}

// RenderedLimit is what the rate-limit headers say of one limit that does
// not change between decisions (quota, window, policy name), rendered once
// by RenderLimit for WriteHeaders. It is immutable: safe for concurrent use.
type RenderedLimit struct{ rl *renderedLimit }

// RenderLimit renders the header values of lim under the policy name
// policy, which may be any string: it is written as a structured-field
// string, escaped, and a character an sf-string cannot hold (a control or
// non-ASCII one) becomes '_'.
func RenderLimit(policy string, lim limiter.Limit) RenderedLimit {
	item, err := httpsfv.Marshal(httpsfv.NewItem(policy))
	if err != nil {
		item = `"` + strings.Map(func(r rune) rune {
			if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
				return '_'
			}
			return r
		}, policy) + `"`
	}
	return RenderedLimit{rl: renderLimitItem(policy, item, lim)}
}

// HeaderNames lists every header WriteHeaders can set, in the order the
// families are written, as net/http canonicalises them.
var HeaderNames = []string{
	headerXLimit, headerXRemaining, headerXReset, headerPolicy, headerRateLimit,
	headerLegacyLimit, headerLegacyRemaining, headerLegacyReset, headerRetryAfter,
}

// WriteHeaders sets on h the header families hc enables for decision d of
// the limit rl, exactly as serve's HTTP path writes them (Retry-After only
// when d refused). For other ways in than HTTP (Envoy's rate limit
// service), which pass the values on.
func (hc HeaderConfig) WriteHeaders(h http.Header, rl RenderedLimit, d limiter.Decision, now time.Time) {
	hc.write(h, computeNumbers(rl.rl, d, now))
}

// HeaderConfig returns the header families the policy writes. Safe for
// concurrent use.
func (p *Policy) HeaderConfig() HeaderConfig { return p.headers }

// render keeps l's header values for renderedFor. Only while the
// policy is being built.
func (c *class) render(l *limiter.Limiter) {
	if c.rendered == nil {
		c.rendered = map[*limiter.Limiter]*renderedLimit{}
	}
	c.rendered[l] = renderLimit(c.name, l.Limit())
}

// renderedFor returns the header values of l, one of c's limiters.
func (c *class) renderedFor(l *limiter.Limiter) *renderedLimit {
	if rl, ok := c.rendered[l]; ok {
		return rl
	}
	return renderLimit(c.name, l.Limit())
}

// numbers are the values every header family is written from, so that the
// families always agree. All are >= 0.
type numbers struct {
	lim       *renderedLimit
	policy    string
	quota     int64
	remaining int64
	reset     int64 // seconds until the full quota is available
	resetUnix int64 // Unix time of reset, rounded up
	t         int64 // RateLimit t: reset when allowed, retry-after when refused
	retry     int64 // Retry-After; 0 when allowed
}

func computeNumbers(rl *renderedLimit, d limiter.Decision, now time.Time) numbers {
	n := numbers{
		lim:       rl,
		policy:    rl.class,
		quota:     d.Limit,
		remaining: max(0, d.Remaining),
		reset:     ceilSeconds(d.ResetAfter),
	}
	if n.quota <= 0 {
		n.quota = rl.quota
	}
	// Never before now: a store whose clock runs ahead may report a
	// reset in the past.
	at := now.Add(max(d.ResetAfter, 0))
	n.resetUnix = at.Unix()
	if at.Nanosecond() > 0 {
		n.resetUnix++
	}
	n.resetUnix = max(0, n.resetUnix)
	n.t = n.reset
	if !d.Allowed {
		n.retry = retryAfterSeconds(d)
		n.t = n.retry
	}
	return n
}

// headerValues is the most values write sets at once.
const headerValues = 9

// write sets the enabled header families on h. Values that never change
// for a limit come rendered; the others are formatted into one buffer
// that becomes one string, and every header's one-value slice is cut from
// one array: two allocations per response whatever the families.
func (hc HeaderConfig) write(h http.Header, n numbers) {
	var buf [160]byte
	b := buf[:0]
	// Cut points of the values formatted into b.
	var cut [headerValues + 1]int
	var keys [headerValues]string
	var fixed [headerValues]string // a value rendered in advance, else ""
	k := 0
	num := func(key string, v int64) {
		keys[k] = key
		b = strconv.AppendInt(b, v, 10)
		k++
		cut[k] = len(b)
	}
	text := func(key, v string) {
		keys[k], fixed[k] = key, v
		k++
		cut[k] = len(b)
	}
	quota := n.lim.quotaText
	if n.quota != n.lim.quota {
		quota = ""
	}
	if !hc.OmitXRateLimit {
		if quota != "" {
			text(headerXLimit, quota)
		} else {
			num(headerXLimit, n.quota)
		}
		num(headerXRemaining, n.remaining)
		num(headerXReset, n.resetUnix)
	}
	if !hc.OmitRateLimit {
		if n.quota == n.lim.quota {
			text(headerPolicy, n.lim.policy)
		} else {
			keys[k] = headerPolicy
			b = append(b, n.lim.item...)
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, min(n.quota, maxSFInteger), 10)
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, min(n.lim.window, maxSFInteger), 10)
			k++
			cut[k] = len(b)
		}
		keys[k] = headerRateLimit
		b = append(b, n.lim.rateLimitPrefix...)
		b = strconv.AppendInt(b, min(n.remaining, maxSFInteger), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, min(n.t, maxSFInteger), 10)
		k++
		cut[k] = len(b)
	}
	if hc.Legacy {
		if quota != "" {
			text(headerLegacyLimit, quota)
		} else {
			num(headerLegacyLimit, n.quota)
		}
		num(headerLegacyRemaining, n.remaining)
		num(headerLegacyReset, n.t)
	}
	if n.retry > 0 {
		num(headerRetryAfter, n.retry)
	}
	if k == 0 {
		return
	}
	all := string(b)
	vals := make([]string, k)
	for i := range k {
		if fixed[i] != "" {
			vals[i] = fixed[i]
		} else {
			vals[i] = all[cut[i]:cut[i+1]]
		}
		h[keys[i]] = vals[i : i+1 : i+1]
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

// writeRejected writes the 429 body in the configured form; the headers
// (rate-limit ones, Cache-Control) are already set by respond.
func (hc HeaderConfig) writeRejected(w http.ResponseWriter, n numbers, body RejectedBody) {
	if hc.ProblemJSON {
		writeJSON(w, "application/problem+json", http.StatusTooManyRequests, ProblemBody{
			Type:             QuotaExceededType,
			Title:            "Request cannot be satisfied as assigned quota has been exceeded",
			Status:           http.StatusTooManyRequests,
			Detail:           body.Message,
			ViolatedPolicies: []string{n.policy},
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
