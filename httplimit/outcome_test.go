package httplimit

import (
	"testing"

	"github.com/rl-exporter/rl-exporter/decision"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// TestBothShadowRejectedMeaningsAnswerAsTheyMeanOnEveryHTTPWayIn checks the
// two verdicts recorded as shadow_rejected through the middleware and the
// decision API: a shadow class over its limit sends no rate-limit headers;
// a live change in shadow leaves the enforced limit's headers.
func TestBothShadowRejectedMeaningsAnswerAsTheyMeanOnEveryHTTPWayIn(t *testing.T) {
	shadowClass := oneClass("default", limiter.PerMinute(limiter.FixedWindow, 1))
	shadowClass.Shadow = true
	liveShadow := oneClass("default", limiter.PerMinute(limiter.FixedWindow, 3))
	liveShadow.Live = map[string]decision.LiveLimit{"default": {Limit: limiter.PerMinute(limiter.FixedWindow, 1), RolloutPercent: 100, Shadow: true, Source: "rl:config:default"}}
	cases := []struct {
		name        string
		class       Class
		wantHeaders bool
	}{
		{"a shadow class over its limit enforces nothing and sends no headers", shadowClass, false},
		{"a live change in shadow keeps the enforced limit's headers", liveShadow, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, h, rec := setup(t, PolicyConfig{Classes: []Class{c.class}}, newClock())
			do(h, "GET", "/x", "192.0.2.1:1", nil) // takes the one unit
			w := do(h, "GET", "/x", "192.0.2.1:1", nil)
			cw := postCheck(m.CheckHandler(), "", `{"key":"ip:192.0.2.1","endpoint":"GET /x"}`)
			for way, w := range map[string]int{"middleware": w.Code, "check": cw.Code} {
				if w != 200 {
					t.Errorf("%s: status %d, want 200", way, w)
				}
			}
			for way, hdr := range map[string]string{"middleware": w.Header().Get("X-RateLimit-Limit"), "check": cw.Header().Get("X-RateLimit-Limit")} {
				if (hdr != "") != c.wantHeaders {
					t.Errorf("%s: X-RateLimit-Limit %q, want headers: %v", way, hdr, c.wantHeaders)
				}
			}
			var resp CheckResponse
			decodeJSON(t, cw.Body.Bytes(), &resp)
			if !resp.Allowed || resp.Status != limiter.StatusShadowRejected {
				t.Errorf("check: %+v, want allowed and shadow_rejected", resp)
			}
			all := rec.all()
			if len(all) != 3 || all[1].Status != limiter.StatusShadowRejected || all[2].Status != limiter.StatusShadowRejected {
				t.Errorf("recorded %+v, want the 2nd and 3rd decisions shadow_rejected", all)
			}
		})
	}
}
