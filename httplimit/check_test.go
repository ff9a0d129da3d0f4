package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func postCheck(h http.Handler, contentType, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", CheckPath, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestTheDecisionAPIAnswersLikeTheMiddleware(t *testing.T) {
	clk := newClock()
	m, _, rec := setup(t, PolicyConfig{
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{
			{Name: "default", Limits: map[string]limiter.Limit{"free": limiter.PerMinute(limiter.FixedWindow, 100)}},
			{Name: "orders", Routes: []string{"GET /orders/{id}"}, Limits: map[string]limiter.Limit{
				"free": limiter.PerMinute(limiter.FixedWindow, 2), "pro": limiter.PerMinute(limiter.FixedWindow, 3)}},
		},
	}, clk)
	h := m.CheckHandler()
	body := `{"key":"alice","endpoint":"GET /orders/42","plan_tier":"free"}`

	// Content-Type does not matter: text/plain and none are read as JSON.
	for i, ct := range []string{"application/json", "text/plain"} {
		w := postCheck(h, ct, body)
		if w.Code != 200 {
			t.Fatalf("check %d: status %d, want 200: %s", i+1, w.Code, w.Body)
		}
		var resp CheckResponse
		decodeJSON(t, w.Body.Bytes(), &resp)
		if !resp.Allowed || resp.Endpoint != "GET /orders/{id}" || resp.Class != "orders" || resp.Limit != 2 || resp.Remaining != int64(1-i) {
			t.Errorf("check %d: %+v, want allowed on GET /orders/{id}, class orders, limit 2, remaining %d", i+1, resp, 1-i)
		}
		if w.Header().Get("X-RateLimit-Remaining") == "" || w.Header().Get("RateLimit") == "" {
			t.Errorf("check %d: no rate-limit headers: %v", i+1, w.Header())
		}
	}
	w := postCheck(h, "", `{"key":"alice","endpoint":"GET /orders/7","plan_tier":"free"}`)
	if w.Code != 429 {
		t.Fatalf("third check: status %d, want 429", w.Code)
	}
	var resp CheckResponse
	decodeJSON(t, w.Body.Bytes(), &resp)
	if resp.Allowed || resp.Error != "rate_limit_exceeded" || resp.RetryAfter < 1 || resp.Message == "" {
		t.Errorf("third check: %+v, want refused with the 429 error fields", resp)
	}
	if w.Header().Get("Retry-After") == "" || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("third check headers %v: want Retry-After and Cache-Control: no-store", w.Header())
	}

	// Other tiers, unknown endpoints and costs.
	w = postCheck(h, "", `{"key":"alice","endpoint":"GET /orders/7","plan_tier":"pro","cost":3}`)
	decodeJSON(t, w.Body.Bytes(), &resp)
	if w.Code != 200 || resp.PlanTier != "pro" || resp.Remaining != 0 {
		t.Errorf("pro tier with cost 3: status %d %+v, want 200 with remaining 0", w.Code, resp)
	}
	w = postCheck(h, "", `{"key":"alice","endpoint":"DELETE /nowhere/at/all"}`)
	decodeJSON(t, w.Body.Bytes(), &resp)
	if w.Code != 200 || resp.Endpoint != CatchAll || resp.Class != "default" || resp.PlanTier != "free" {
		t.Errorf("unknown endpoint: status %d %+v, want the default class on %q and the default tier", w.Code, resp, CatchAll)
	}
	for _, r := range rec.all() {
		if strings.Contains(r.Endpoint, "42") || strings.Contains(r.Endpoint, "nowhere") {
			t.Errorf("recorded endpoint %q is a raw path, not a pattern", r.Endpoint)
		}
	}
}

func TestTheDecisionAPIRefusesBadBodies(t *testing.T) {
	m, _, _ := setup(t, PolicyConfig{Classes: []Class{oneClass("default", limiter.PerMinute(limiter.FixedWindow, 5))}}, newClock())
	h := m.CheckHandler()
	cases := []struct {
		name string
		body string
		code int
		want string
	}{
		{"not JSON", `key=alice`, 400, "not a JSON"},
		{"an unknown field", `{"key":"a","endpoint":"GET /","kee":"x"}`, 400, "kee"},
		{"no key", `{"endpoint":"GET /"}`, 400, "key"},
		{"no endpoint", `{"key":"a"}`, 400, "endpoint"},
		{"an endpoint without a leading slash", `{"key":"a","endpoint":"GET orders"}`, 400, "path must start with /"},
		{"a method with a control character", `{"key":"a","endpoint":"G\u0000T /x"}`, 400, "HTTP method"},
		{"a method with a separator", `{"key":"a","endpoint":"GET,POST /x"}`, 400, "HTTP method"},
		{"a path with a broken escape", `{"key":"a","endpoint":"GET /%zz"}`, 400, "not a valid URL path"},
		{"a zero cost", `{"key":"a","endpoint":"GET /","cost":0}`, 400, "cost"},
		{"a cost above the quota", `{"key":"a","endpoint":"GET /","cost":6}`, 400, "cost"},
		{"two objects", `{"key":"a","endpoint":"GET /"}{}`, 400, "after"},
		{"a body over the size limit", `{"key":"` + strings.Repeat("a", MaxCheckBody) + `","endpoint":"GET /"}`, 413, "bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := postCheck(h, "application/json", c.body)
			if w.Code != c.code {
				t.Fatalf("status %d, want %d: %s", w.Code, c.code, w.Body)
			}
			var b RejectedBody
			decodeJSON(t, w.Body.Bytes(), &b)
			if !strings.Contains(b.Message, c.want) {
				t.Errorf("message %q, want it to mention %q", b.Message, c.want)
			}
		})
	}
	r := httptest.NewRequest("GET", CheckPath, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET: status %d Allow %q, want 405 with Allow: POST", w.Code, w.Header().Get("Allow"))
	}
}

func TestTheDecisionAPILooksUpTheTierOfAKeyWithoutOne(t *testing.T) {
	m, _, _ := setup(t, PolicyConfig{
		Tiers: []string{"free", "pro"}, DefaultTier: "free",
		Classes: []Class{{Name: "default", Limits: map[string]limiter.Limit{
			"free": limiter.PerMinute(limiter.FixedWindow, 1), "pro": limiter.PerMinute(limiter.FixedWindow, 9)}}},
		Identity: IdentityConfig{TierByKey: map[string]string{"carol": "pro"}},
	}, newClock())
	for _, key := range []string{"carol", "user:carol"} {
		var resp CheckResponse
		decodeJSON(t, postCheck(m.CheckHandler(), "", `{"key":"`+key+`","endpoint":"GET /"}`).Body.Bytes(), &resp)
		if resp.PlanTier != "pro" || resp.Limit != 9 {
			t.Errorf("key %s: tier %q limit %d, want pro with 9", key, resp.PlanTier, resp.Limit)
		}
	}
}
