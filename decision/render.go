package decision

import (
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// MaxKey is the longest caller-supplied key a way in takes as it is: the
// decision API refuses a longer one, the rate limit service keys a longer
// descriptor by its hash.
const MaxKey = 512

// MaxRememberedName is the longest name (an endpoint, a descriptor path) a
// way in keeps in a bounded cache or uses as a metric label; longer ones
// are worked out every time, so that callers sending long names grow nothing.
const MaxRememberedName = 256

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

// The header names in the canonical form net/http keeps them in, so that
// they are set without canonicalising them on every request.
const (
	HeaderXLimit          = "X-Ratelimit-Limit"
	HeaderXRemaining      = "X-Ratelimit-Remaining"
	HeaderXReset          = "X-Ratelimit-Reset"
	HeaderPolicy          = "Ratelimit-Policy"
	HeaderRateLimit       = "Ratelimit"
	HeaderLegacyLimit     = "Ratelimit-Limit"
	HeaderLegacyRemaining = "Ratelimit-Remaining"
	HeaderLegacyReset     = "Ratelimit-Reset"
	HeaderRetryAfter      = "Retry-After"
)

// HeaderNames lists every header Write can set, in the order the families
// are written. Do not modify it.
var HeaderNames = []string{
	HeaderXLimit, HeaderXRemaining, HeaderXReset, HeaderPolicy, HeaderRateLimit,
	HeaderLegacyLimit, HeaderLegacyRemaining, HeaderLegacyReset, HeaderRetryAfter,
}

// CeilSeconds rounds d up to whole seconds; 0 for d <= 0. It cannot
// overflow, whatever d.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// RetryAfterSeconds is the Retry-After of a refused decision: whole
// seconds rounded up, never 0.
func RetryAfterSeconds(d limiter.Decision) int64 {
	return max(1, CeilSeconds(d.RetryAfter))
}

// maxSFInteger is the largest Structured Field integer (RFC 9651, 15
// digits): RateLimit and RateLimit-Policy parameters saturate at it.
const maxSFInteger = 999_999_999_999_999

// RenderedLimit is what the headers say of one limit that does not change
// between decisions (quota, window, policy name), rendered once by
// RenderLimit. It is immutable; the zero value is not usable.
type RenderedLimit struct{ rl *rendered }

type rendered struct {
	name      string
	item      string // name as a structured-field string: "name", escaped
	quota     int64
	quotaText string
	window    int64  // seconds, at least 1
	policy    string // RateLimit-Policy: "name";q=quota;w=window
	rlPrefix  string // RateLimit up to its r value: "name";r=
}

// RenderLimit renders the header values of lim under the policy name
// policy, which may be any string: it is written as a structured-field
// string, escaped, and a character an sf-string cannot hold (a control or
// non-ASCII one) becomes '_'.
func RenderLimit(policy string, lim limiter.Limit) RenderedLimit {
	item := `"` + policy + `"`
	if !plainName(policy) {
		var err error
		if item, err = httpsfv.Marshal(httpsfv.NewItem(policy)); err != nil {
			item = `"` + strings.Map(func(r rune) rune {
				if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
					return '_'
				}
				return r
			}, policy) + `"`
		}
	}
	rl := &rendered{name: policy, item: item, quota: lim.Quota(), window: max(1, CeilSeconds(lim.Window()))}
	rl.quotaText = strconv.FormatInt(rl.quota, 10)
	rl.policy = item + ";q=" + strconv.FormatInt(min(rl.quota, maxSFInteger), 10) + ";w=" + strconv.FormatInt(min(rl.window, maxSFInteger), 10)
	rl.rlPrefix = item + ";r="
	return RenderedLimit{rl: rl}
}

// plainName reports whether s is an sf-string as it is, quoted: letters,
// digits, '_' and '-' (every class name).
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}

// Name is the policy name the limit was rendered under.
func (r RenderedLimit) Name() string { return r.rl.name }

// Fields are the values every header family and answer body is written
// from, so that they always agree. All are >= 0.
type Fields struct {
	lim *rendered
	// Quota is the limit (X-RateLimit-Limit).
	Quota int64
	// Remaining is what could still be admitted now.
	Remaining int64
	// Reset is the seconds until the full quota is available again, and
	// ResetUnix its Unix time, rounded up.
	Reset, ResetUnix int64
	// T is RateLimit's t: Reset when allowed, Retry when refused.
	T int64
	// Retry is Retry-After in seconds; 0 when allowed.
	Retry int64
}

// Policy is the policy name of the limit the fields are of.
func (f Fields) Policy() string { return f.lim.name }

// FieldsOf works out the fields of decision d of the limit rl at now.
func FieldsOf(rl RenderedLimit, d limiter.Decision, now time.Time) Fields {
	f := Fields{lim: rl.rl, Quota: d.Limit, Remaining: max(0, d.Remaining), Reset: CeilSeconds(d.ResetAfter)}
	if f.Quota <= 0 {
		f.Quota = rl.rl.quota
	}
	// Never before now: a store whose clock runs ahead may report a
	// reset in the past.
	at := now.Add(max(d.ResetAfter, 0))
	f.ResetUnix = at.Unix()
	if at.Nanosecond() > 0 {
		f.ResetUnix++
	}
	f.ResetUnix = max(0, f.ResetUnix)
	f.T = f.Reset
	if !d.Allowed {
		f.Retry = RetryAfterSeconds(d)
		f.T = f.Retry
	}
	return f
}

// WriteHeaders sets on h the header families hc enables for decision d of
// the limit rl (Retry-After only when d refused): Write(h, FieldsOf(...)).
func (hc HeaderConfig) WriteHeaders(h map[string][]string, rl RenderedLimit, d limiter.Decision, now time.Time) {
	hc.Write(h, FieldsOf(rl, d, now))
}

// headerValues is the most values Write sets at once.
const headerValues = 9

// Write sets the enabled header families of f on h (an http.Header), each
// under its name in HeaderNames. Values that never change for a limit come
// rendered; the others are formatted into one buffer that becomes one
// string, and every header's one-value slice is cut from one array: two
// allocations per answer whatever the families.
func (hc HeaderConfig) Write(h map[string][]string, f Fields) {
	var buf [160]byte
	b := buf[:0]
	var cut [headerValues + 1]int // cut points of the values formatted into b
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
	quota := f.lim.quotaText
	if f.Quota != f.lim.quota {
		quota = ""
	}
	if !hc.OmitXRateLimit {
		if quota != "" {
			text(HeaderXLimit, quota)
		} else {
			num(HeaderXLimit, f.Quota)
		}
		num(HeaderXRemaining, f.Remaining)
		num(HeaderXReset, f.ResetUnix)
	}
	if !hc.OmitRateLimit {
		if f.Quota == f.lim.quota {
			text(HeaderPolicy, f.lim.policy)
		} else {
			keys[k] = HeaderPolicy
			b = append(b, f.lim.item...)
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, min(f.Quota, maxSFInteger), 10)
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, min(f.lim.window, maxSFInteger), 10)
			k++
			cut[k] = len(b)
		}
		keys[k] = HeaderRateLimit
		b = append(b, f.lim.rlPrefix...)
		b = strconv.AppendInt(b, min(f.Remaining, maxSFInteger), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, min(f.T, maxSFInteger), 10)
		k++
		cut[k] = len(b)
	}
	if hc.Legacy {
		if quota != "" {
			text(HeaderLegacyLimit, quota)
		} else {
			num(HeaderLegacyLimit, f.Quota)
		}
		num(HeaderLegacyRemaining, f.Remaining)
		num(HeaderLegacyReset, f.T)
	}
	if f.Retry > 0 {
		num(HeaderRetryAfter, f.Retry)
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
