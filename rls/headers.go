package rls

import (
	"strconv"
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
// is kept here; the tests pin both to the same values.
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
		pol := httpsfv.NewItem(policy)
		pol.Params.Add("q", quota)
		pol.Params.Add("w", window)
		if v, err := httpsfv.Marshal(httpsfv.List{pol}); err == nil {
			out = append(out, [2]string{"RateLimit-Policy", v})
		}
		cur := httpsfv.NewItem(policy)
		cur.Params.Add("r", remaining)
		cur.Params.Add("t", t)
		if v, err := httpsfv.Marshal(httpsfv.List{cur}); err == nil {
			out = append(out, [2]string{"RateLimit", v})
		}
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
