package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func postUsage(h http.Handler, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", UsagePath, strings.NewReader(body)))
	return w
}

// A tenant asks with the key it holds, as its client sends it: the answer is the budget the
// proxy charged that key, on the key's own tier, naming the stored key; an operator's GET with
// the stored key answers the same. A key the policy does not know is a 404, not zeros.
func TestUsageByTheRawAPIKeyIsTheBudgetTheProxyChargedOnTheKeysTier(t *testing.T) {
	m, h, _ := setup(t, sdkKeyPolicy(false), newClock())
	for range 3 {
		do(h, "POST", "/v1/chat/completions", "203.0.113.7:1", openAISDKHeaders)
	}
	stored := APIKeyKey("sk-pro")
	for name, w := range map[string]*httptest.ResponseRecorder{
		"POST with the raw key":   postUsage(m.UsageHandler(), `{"api_key":"sk-pro"}`),
		"GET with the stored key": getUsage(m.UsageHandler(), "?key="+stored),
	} {
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", name, w.Code, w.Body)
		}
		var r UsageReport
		decodeJSON(t, w.Body.Bytes(), &r)
		if r.Key != stored || r.PlanTier != "pro" {
			t.Errorf("%s: key %q on %q, want %s on pro", name, r.Key, r.PlanTier, stored)
		}
		if u := findUsage(t, r, "default", "/"); u.Used != 3 || u.Quota != 100 {
			t.Errorf("%s: %+v, want 3 used of pro's 100", name, u)
		}
		if strings.Contains(w.Body.String(), "sk-pro") {
			t.Errorf("%s: the answer shows the raw key: %s", name, w.Body)
		}
	}
	// The other pro key has used nothing yet: zeros, on pro.
	w := postUsage(m.UsageHandler(), `{"api_key":"sk-ant-pro"}`)
	var r UsageReport
	decodeJSON(t, w.Body.Bytes(), &r)
	if w.Code != 200 || r.PlanTier != "pro" || findUsage(t, r, "default", "/").Used != 0 {
		t.Errorf("a known key with no use: %d %s, want zeros on pro", w.Code, w.Body)
	}
	for body, want := range map[string]int{
		`{"api_key":"sk-invented"}`:            http.StatusNotFound,
		`{"api_key":""}`:                       http.StatusBadRequest,
		`{"key":"sk-pro"}`:                     http.StatusBadRequest,
		`{"api_key":"sk-pro","plan_tier":"x"}`: http.StatusBadRequest,
		`not json`:                             http.StatusBadRequest,
	} {
		w := postUsage(m.UsageHandler(), body)
		if w.Code != want || strings.Contains(w.Body.String(), "sk-") {
			t.Errorf("POST %s: %d %s, want %d without the key", body, w.Code, w.Body, want)
		}
	}
	// With every key allowed, an unlisted key is a budget of its own on the default tier.
	cfg := sdkKeyPolicy(false)
	cfg.Identity.AllowUnknownAPIKeys = true
	open, _, _ := setup(t, cfg, newClock())
	w = postUsage(open.UsageHandler(), `{"api_key":"sk-invented"}`)
	decodeJSON(t, w.Body.Bytes(), &r)
	if w.Code != 200 || r.Key != APIKeyKey("sk-invented") || r.PlanTier != "free" {
		t.Errorf("any key allowed: %d %s, want the key's own budget on free", w.Code, w.Body)
	}
}
