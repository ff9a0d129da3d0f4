package httplimit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestJudgeGivesEachAnswerOfTheLimiterOneVerdictStatusAndAction(t *testing.T) {
	lim := limiter.PerMinute(limiter.FixedWindow, 10)
	storeDown := errors.New("store down")
	cases := []struct {
		name       string
		d          limiter.Decision
		err        error
		shadow     bool
		want       Verdict
		wantStatus limiter.Status
		wantAction Action
	}{
		{"an admitted request passes with the limit's headers", limiter.Decision{Allowed: true}, nil, false,
			VerdictAllowed, limiter.StatusAllowed, ActionPassLimited},
		{"a refused request is answered 429", limiter.Decision{}, nil, false,
			VerdictRejected, limiter.StatusRejected, ActionRefuse},
		{"a cost over the limit is refused, whatever the store said", limiter.Decision{Allowed: true}, fmt.Errorf("cost 11: %w", limiter.ErrCostExceedsLimit), false,
			VerdictRejected, limiter.StatusRejected, ActionRefuse},
		{"a shadow limit over passes without headers", limiter.Decision{}, nil, true,
			VerdictShadowClassOver, limiter.StatusShadowRejected, ActionPass},
		{"a shadow limit under passes with its headers", limiter.Decision{Allowed: true}, nil, true,
			VerdictAllowed, limiter.StatusAllowed, ActionPassLimited},
		{"a fail-open decision passes without headers", limiter.Decision{Allowed: true, Failure: limiter.FailureOpen}, storeDown, false,
			VerdictFailOpen, limiter.StatusFailOpen, ActionPass},
		{"a fail-closed decision is answered 503", limiter.Decision{Failure: limiter.FailureClosed}, storeDown, false,
			VerdictFailClosed, limiter.StatusFailClosed, ActionUnavailable},
		{"a shadow limit fails open even under a closed policy", limiter.Decision{Failure: limiter.FailureClosed}, storeDown, true,
			VerdictFailOpen, limiter.StatusFailOpen, ActionPass},
		{"a degraded decision counts as what it decided", limiter.Decision{Failure: limiter.FailureLocal}, storeDown, false,
			VerdictRejected, limiter.StatusRejected, ActionRefuse},
		{"a cancelled caller gets nothing", limiter.Decision{Failure: limiter.FailureCanceled}, errors.New("context canceled"), false,
			VerdictCanceled, limiter.StatusCanceled, ActionDrop},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Judge(c.d, c.err, lim, c.shadow)
			if o.Verdict != c.want || o.Status() != c.wantStatus || o.Verdict.Action() != c.wantAction {
				t.Errorf("verdict %d, status %s, action %d; want %d, %s, %d", o.Verdict, o.Status(), o.Verdict.Action(), c.want, c.wantStatus, c.wantAction)
			}
			if errors.Is(c.err, limiter.ErrCostExceedsLimit) && (o.Decision.Allowed || o.Decision.RetryAfter != lim.Window()) {
				t.Errorf("decision %+v: a cost no limit admits is refused, to retry in one window", o.Decision)
			}
		})
	}
}

func TestTheRecordCarriesTheErrorOnlyOfFailedAndDegradedDecisions(t *testing.T) {
	lim := limiter.PerMinute(limiter.FixedWindow, 10)
	storeDown := errors.New("store down")
	cases := []struct {
		name    string
		o       Outcome
		wantErr bool
	}{
		{"fail-open", Judge(limiter.Decision{Allowed: true, Failure: limiter.FailureOpen}, storeDown, lim, false), true},
		{"fail-closed", Judge(limiter.Decision{Failure: limiter.FailureClosed}, storeDown, lim, false), true},
		{"degraded", Judge(limiter.Decision{Allowed: true, Failure: limiter.FailureLocal}, storeDown, lim, false), true},
		{"a cost no limit admits", Judge(limiter.Decision{}, limiter.ErrCostExceedsLimit, lim, false), false},
		{"cancelled", Judge(limiter.Decision{Failure: limiter.FailureCanceled}, storeDown, lim, false), false},
	}
	for _, c := range cases {
		rec := c.o.Record("/x", "free", "ip:1", lim)
		if (rec.Err != nil) != c.wantErr || rec.Status != c.o.Status() {
			t.Errorf("%s: record %+v, want an error: %v", c.name, rec, c.wantErr)
		}
	}
}

// TestBothShadowRejectedMeaningsAnswerAsTheyMeanOnEveryHTTPWayIn checks the
// two verdicts recorded as shadow_rejected through the middleware and the
// decision API: a shadow class over its limit sends no rate-limit headers;
// a live change in shadow leaves the enforced limit's headers.
func TestBothShadowRejectedMeaningsAnswerAsTheyMeanOnEveryHTTPWayIn(t *testing.T) {
	shadowClass := oneClass("default", limiter.PerMinute(limiter.FixedWindow, 1))
	shadowClass.Shadow = true
	liveShadow := oneClass("default", limiter.PerMinute(limiter.FixedWindow, 3))
	liveShadow.Live = map[string]LiveLimit{"default": {Limit: limiter.PerMinute(limiter.FixedWindow, 1), RolloutPercent: 100, Shadow: true, Source: "rl:config:default"}}
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
