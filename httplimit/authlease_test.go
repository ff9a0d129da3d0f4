package httplimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// releaseByHeader sends the release a gateway sends after the response: no body, the lease in a header.
func releaseByHeader(h http.Handler, lease, body string) (int, map[string]any) {
	r := httptest.NewRequest(http.MethodPost, ReleasePath, strings.NewReader(body))
	if lease != "" {
		r.Header.Set(LeaseHeader, lease)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	out := map[string]any{}
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

// Forward-auth on a concurrency limit takes a lease and answers its token; the gateway's
// body-less release gives it back, and the slot is free again.
func TestForwardAuthTakesALeaseAndAHeaderReleaseGivesItBack(t *testing.T) {
	m, rec := jobsLeases(t, 2)
	authH, releaseH := m.AuthHandler(), m.ReleaseHandler()
	ask := func(hdr map[string]string) *httptest.ResponseRecorder {
		h := map[string]string{"X-Original-URI": "/jobs/run", "X-Original-Method": "POST"}
		for k, v := range hdr {
			h[k] = v
		}
		return auth(authH, "GET", AuthPath, h)
	}
	var leases []string
	for i := range 2 {
		w := ask(nil)
		tok := w.Header().Get(LeaseHeader)
		if w.Code != http.StatusOK || tok == "" || w.Header().Get("RateLimit-Policy") != `"api";q=2;qu="concurrent-requests"` {
			t.Fatalf("auth %d: status %d, %s %q, headers %v", i+1, w.Code, LeaseHeader, tok, w.Header())
		}
		leases = append(leases, tok)
	}
	if rec.held() != 2 {
		t.Fatalf("in flight %d after two auths, want 2", rec.held())
	}
	if w := ask(nil); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || w.Header().Get(LeaseHeader) != "" ||
		!strings.Contains(w.Body.String(), "concurrency_limit_exceeded") {
		t.Fatalf("third auth: status %d, headers %v, body %q; want the middleware's 429 with Retry-After", w.Code, w.Header(), w.Body)
	}
	if w := ask(map[string]string{DenyStatusHeader: "403"}); w.Code != http.StatusForbidden || w.Header().Get("Retry-After") == "" {
		t.Fatalf("third auth for nginx: status %d, headers %v; want 403 with Retry-After", w.Code, w.Header())
	}
	if w := auth(authH, "GET", AuthPath, map[string]string{"X-Original-URI": "/elsewhere"}); w.Code != http.StatusOK || w.Header().Get(LeaseHeader) != "" {
		t.Fatalf("a rate-limited route: status %d, %s %q; want 200 without a lease", w.Code, LeaseHeader, w.Header().Get(LeaseHeader))
	}

	if code, out := releaseByHeader(releaseH, leases[0], `{"lease":"`+leases[0]+`"}`); code != http.StatusBadRequest {
		t.Fatalf("release with both a body and the header: %d %v, want 400", code, out)
	}
	if code, out := releaseByHeader(releaseH, leases[0], ""); code != http.StatusOK || out["released"] != true {
		t.Fatalf("header release: %d %v", code, out)
	}
	if rec.held() != 1 {
		t.Fatalf("in flight %d after one release, want 1", rec.held())
	}
	if code, out := releaseByHeader(releaseH, leases[0], ""); code != http.StatusNotFound || out["error"] != "lease_unknown" {
		t.Fatalf("released twice: %d %v, want 404 lease_unknown", code, out)
	}
	if code, _ := releaseByHeader(releaseH, "nonsense", ""); code != http.StatusBadRequest {
		t.Fatalf("a malformed lease header: %d, want 400", code)
	}
	if code, _ := releaseByHeader(releaseH, "", ""); code != http.StatusBadRequest {
		t.Fatalf("neither a body nor the header: %d, want 400", code)
	}
	if w := ask(nil); w.Code != http.StatusOK || w.Header().Get(LeaseHeader) == "" {
		t.Fatalf("auth after the release: status %d, %s %q", w.Code, LeaseHeader, w.Header().Get(LeaseHeader))
	}
	// The JSON body still works, for the same tokens.
	if code, out := releaseByHeader(releaseH, "", `{"lease":"`+leases[1]+`"}`); code != http.StatusOK || out["released"] != true {
		t.Fatalf("JSON release of an auth's lease: %d %v", code, out)
	}
}
