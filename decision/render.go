package decision

import (
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// MaxKey is the longest caller key used as is; the decision API refuses longer ones, rls hashes them.
const MaxKey = 512

// MaxRememberedName is the longest endpoint or descriptor path kept in a cache or metric label,
// so that callers sending long names grow nothing.
const MaxRememberedName = 256

// HeaderConfig selects the header families and the 429 body. The zero value sends
// X-RateLimit-Limit/-Remaining/-Reset (Unix time) and RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers-10); Legacy adds RateLimit-Limit/-Remaining/-Reset
// (seconds); ProblemJSON makes 429 bodies application/problem+json (RFC 9457).
type HeaderConfig struct {
	OmitXRateLimit bool
	OmitRateLimit  bool
	Legacy         bool
	ProblemJSON    bool
}

// The header names, canonical as net/http keeps them, so setting them needs no canonicalising.
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

// HeaderNames lists every header Write sets, in order. Do not modify it.
var HeaderNames = []string{
	HeaderXLimit, HeaderXRemaining, HeaderXReset, HeaderPolicy, HeaderRateLimit,
	HeaderLegacyLimit, HeaderLegacyRemaining, HeaderLegacyReset, HeaderRetryAfter,
}

// CeilSeconds rounds d up to whole seconds, 0 for d <= 0, without overflow.
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

// RetryAfterSeconds is a refusal's Retry-After: rounded up, never 0.
func RetryAfterSeconds(d limiter.Decision) int64 {
	return max(1, CeilSeconds(d.RetryAfter))
}

// maxSFInteger is the largest Structured Field integer (RFC 9651).
const maxSFInteger = 999_999_999_999_999

// RenderedLimit is what the headers say of a limit whatever the decision (see RenderLimit); immutable.
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

// RenderLimit renders lim under policy (any string: escaped, '_' for what an sf-string cannot hold).
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

// plainName reports whether s, quoted, is an sf-string (every class name is).
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

// ResetAt is the instant X-RateLimit-Reset names for a reset resetAfter from now: rounded up to
// the second. Stores measure resetAfter from their own clock in whole microseconds, so now's
// part below the microsecond is dropped first: kept, it pushed a window's end at a whole second
// to the next one. Take now before the store call, so that it is not later than the store's
// own reading. A store whose clock runs ahead may report a reset in the past: now then.
// A pure function.
func ResetAt(now time.Time, resetAfter time.Duration) time.Time {
	at := now.Truncate(time.Microsecond).Add(max(resetAfter, 0))
	if s := at.Truncate(time.Second); !s.Equal(at) {
		return s.Add(time.Second)
	}
	return at
}

// resetUnix is ResetAt(now, resetAfter).Unix() in integer arithmetic: every decision's headers
// need it, and the two Truncates of time.Time cost more than the rest of FieldsOf.
func resetUnix(now time.Time, resetAfter time.Duration) int64 {
	ra := max(resetAfter, 0)
	// Seconds and nanoseconds apart, as time.Time.Add: the longest durations do not overflow.
	sec := now.Unix() + int64(ra/time.Second)
	ns := int64(now.Nanosecond())
	ns += int64(ra%time.Second) - ns%int64(time.Microsecond)
	if ns >= int64(time.Second) {
		sec, ns = sec+1, ns-int64(time.Second)
	}
	if ns != 0 {
		sec++
	}
	return sec
}

// Fields are the values, all >= 0, every header family and body is written from, so that they
// agree: Reset is the seconds until the quota is full again (ResetUnix its time), T is
// RateLimit's t (Reset, or Retry when refused) and Retry is Retry-After (0 when allowed).
type Fields struct {
	lim                                          *rendered
	Quota, Remaining, Reset, ResetUnix, T, Retry int64
}

// Policy is the policy name of the fields' limit.
func (f Fields) Policy() string { return f.lim.name }

// FieldsOf works out the fields of decision d of the limit rl at now.
func FieldsOf(rl RenderedLimit, d limiter.Decision, now time.Time) Fields {
	f := Fields{lim: rl.rl, Quota: d.Limit, Remaining: max(0, d.Remaining), Reset: CeilSeconds(d.ResetAfter)}
	if f.Quota <= 0 {
		f.Quota = rl.rl.quota
	}
	f.ResetUnix = max(0, resetUnix(now, d.ResetAfter))
	f.T = f.Reset
	if !d.Allowed {
		f.Retry = RetryAfterSeconds(d)
		f.T = f.Retry
	}
	return f
}

// WriteHeaders is Write(h, FieldsOf(rl, d, now)).
func (hc HeaderConfig) WriteHeaders(h map[string][]string, rl RenderedLimit, d limiter.Decision, now time.Time) {
	hc.Write(h, FieldsOf(rl, d, now))
}

const headerValues = 9

// Write sets the enabled families of f on h (an http.Header) in two allocations: one string
// cut into every value not rendered in advance, one array cut into every header's slice.
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
