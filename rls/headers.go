package rls

import (
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// renderHeaders returns the header families hc enables for decision d under
// lim, as serve's HTTP path writes them: X-RateLimit-Limit/-Remaining/-Reset
// (Unix time), the draft-10 RateLimit-Policy and RateLimit fields, the
// legacy RateLimit-Limit/-Remaining/-Reset trio, and Retry-After when
// refused. httplimit keeps its writer unexported, so the same arithmetic
// is kept here; the tests pin both to the same values. policy is the
// policy name already serialized as a structured-field item (policyItem).
func renderHeaders(hc httplimit.HeaderConfig, policy string, lim limiter.Limit, d limiter.Decision, now time.Time) [][2]string {
	quota := d.Limit
	if quota == 0 {
		quota = lim.Quota()
	}
	window := max(1, ceilSeconds(lim.Window()))
	remaining := max(0, d.Remaining)
	reset := ceilSeconds(d.ResetAfter)
	at := now.Add(d.ResetAfter)
	resetUnix := at.Unix()
	if at.Nanosecond() > 0 {
		resetUnix++
	}
	t, retry := reset, int64(0)
	if !d.Allowed {
		retry = max(1, ceilSeconds(d.RetryAfter))
		t = retry
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	var out [][2]string
	if !hc.OmitXRateLimit {
		out = append(out,
			[2]string{"X-RateLimit-Limit", itoa(quota)},
			[2]string{"X-RateLimit-Remaining", itoa(remaining)},
			[2]string{"X-RateLimit-Reset", itoa(resetUnix)})
	}
	if !hc.OmitRateLimit {
		// A one-item list with integer parameters, as httpsfv writes it.
		out = append(out,
			[2]string{"RateLimit-Policy", policy + ";q=" + itoa(quota) + ";w=" + itoa(window)},
			[2]string{"RateLimit", policy + ";r=" + itoa(remaining) + ";t=" + itoa(t)})
	}
	if hc.Legacy {
		out = append(out,
			[2]string{"RateLimit-Limit", itoa(quota)},
			[2]string{"RateLimit-Remaining", itoa(remaining)},
			[2]string{"RateLimit-Reset", itoa(t)})
	}
	if retry > 0 {
		out = append(out, [2]string{"Retry-After", itoa(retry)})
	}
	return out
}

// ceilSeconds rounds d up to whole seconds; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// policyItem serializes a policy name as a structured-field string item
// (quoted, escaped), once per rule rather than once per answer.
func policyItem(name string) string {
	v, err := httpsfv.Marshal(httpsfv.NewItem(name))
	if err != nil {
		// Not a valid sf-string (a control or non-ASCII character): a token
		// of the name's safe characters still names the policy.
		return `"` + strings.Map(func(r rune) rune {
			if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
				return '_'
			}
			return r
		}, name) + `"`
	}
	return v
}
